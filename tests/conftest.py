"""Shared fixtures: a kafka-sidecar server per test session, and fresh ones on demand."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import pytest

from tests.support import SidecarProcess


@pytest.fixture(scope="session")
def sidecar(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SidecarProcess]:
    """One server for the session (topics are unique per test, so tests do not interfere)."""
    server = SidecarProcess(tmp_path_factory.mktemp("sidecar") / "data").start()
    yield server
    server.stop()


@pytest.fixture
def sidecar_factory(tmp_path) -> Iterator[Callable[..., SidecarProcess]]:
    """Fresh servers with their own data dirs and overrides; stopped after the test."""
    started: list[SidecarProcess] = []

    def make(overrides: dict[str, str] | None = None, data_dir=None) -> SidecarProcess:
        server = SidecarProcess(data_dir or tmp_path / f"data-{len(started)}", overrides).start()
        started.append(server)
        return server

    yield make
    for s in started:
        if s.proc is not None and s.proc.poll() is None:
            s.kill()


@pytest.fixture
def topic_name(request) -> str:
    """A unique, valid topic name for this test."""
    base = "".join(c if c.isalnum() else "-" for c in request.node.name)[:80]
    return f"{base}-{uuid.uuid4().hex[:8]}"
