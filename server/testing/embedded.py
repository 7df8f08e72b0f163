"""An in-process kafka-sidecar broker for tests (see the package docstring)."""

from __future__ import annotations

import argparse
import asyncio
import shutil
import tempfile
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

# Kafka config names -> values that suit tests (overrides win).
TEST_DEFAULTS: dict[str, str] = {
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "1",
    "log.retention.check.interval.ms": "1000",
    "log.initial.task.delay.ms": "0",
    "log.segment.delete.delay.ms": "1000",
    "log.cleaner.backoff.ms": "500",
}


def config_name(key: str) -> str:
    """``num_partitions`` -> ``num.partitions``; a name with dots is Kafka's already."""
    return key if "." in key else key.replace("_", ".")


class EmbeddedBroker:
    """A kafka-sidecar broker on 127.0.0.1 (a free port), running on its own thread's event loop."""

    def __init__(self, overrides: Mapping[str, Any] | None = None, *, data_dir: Path | str | None = None,
                 port: int = 0, start_timeout: float = 30.0, console: bool = False, console_allow_writes: bool = False) -> None:
        self.overrides = {**TEST_DEFAULTS, **{config_name(k): _text(v) for k, v in (overrides or {}).items()}}
        self._own_dir = data_dir is None
        self.data_dir = Path(data_dir) if data_dir is not None else None
        self.host = "127.0.0.1"
        self.port = port
        self.start_timeout = start_timeout
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._broker: Any = None
        self._stopped: asyncio.Event | None = None
        # The web console (server/console/), on a free loopback port: ``console_url`` once started.
        self.console = console
        self.console_allow_writes = console_allow_writes
        self.console_url: str | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> EmbeddedBroker:
        if self.running:
            raise RuntimeError("the broker is already running")
        if self.data_dir is None:
            self.data_dir = Path(tempfile.mkdtemp(prefix="kafka-sidecar-test-"))
        ready = threading.Event()
        failure: list[BaseException] = []
        self._thread = threading.Thread(target=self._run, args=(ready, failure), name=f"kafka-sidecar-{id(self):x}", daemon=True)
        self._thread.start()
        if not ready.wait(self.start_timeout):
            raise RuntimeError(f"kafka-sidecar did not start in {self.start_timeout} s")
        if failure:
            self._thread.join()
            self._thread = None
            raise failure[0]
        return self

    def _run(self, ready: threading.Event, failure: list[BaseException]) -> None:
        from kafka_sidecar.server.broker import Broker
        from kafka_sidecar.server.cli import apply_cli_settings
        from kafka_sidecar.server.config import load_config

        async def main() -> None:
            args = argparse.Namespace(data_dir=self.data_dir, listen=(self.host, self.port))
            config = load_config(None, [f"{k}={v}" for k, v in self.overrides.items()])
            data_dir, listeners = apply_cli_settings(config, args)
            broker = Broker(config, data_dir, listeners=listeners.listeners, advertised=listeners.advertised)
            self._stopped = asyncio.Event()
            try:
                await broker.start()
            except BaseException as e:
                failure.append(e)
                ready.set()
                await broker.stop()
                return
            console = None
            if self.console:
                from kafka_sidecar.server.console.server import ConsoleServer

                console = ConsoleServer(broker, self.host, 0, allow_writes=self.console_allow_writes)
                try:
                    await console.start()
                except BaseException as e:
                    failure.append(e)
                    ready.set()
                    await broker.stop()
                    return
                self.console_url = console.url
            self._broker = broker
            self.port = broker.port
            ready.set()
            await self._stopped.wait()
            if console is not None:
                await console.stop()
            await broker.stop()

        self._loop = asyncio.new_event_loop()
        try:
            self._loop.run_until_complete(main())
        except BaseException as e:  # noqa: BLE001 - reported to start()
            failure.append(e)
            ready.set()
        finally:
            self._loop.close()

    def stop(self, *, keep_data: bool = False) -> None:
        """Stop cleanly (logs flushed, checkpoints written); remove a temporary data dir."""
        if self._thread is not None:
            if self._loop is not None and self._stopped is not None and self._thread.is_alive():
                self._loop.call_soon_threadsafe(self._stopped.set)
            self._thread.join(60)
            self._thread = None
        self._broker = None
        if self._own_dir and not keep_data and self.data_dir is not None:
            shutil.rmtree(self.data_dir, ignore_errors=True)
            self.data_dir = None

    def restart(self) -> EmbeddedBroker:
        """Stop and start again on the same port with the same data."""
        self.stop(keep_data=True)
        return self.start()

    def __enter__(self) -> EmbeddedBroker:
        return self if self.running else self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<EmbeddedBroker {'on ' + self.bootstrap_servers if self.running else 'stopped'}>"


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@contextmanager
def broker(overrides: Mapping[str, Any] | None = None, /, **kwargs: Any) -> Iterator[Any]:
    """``with broker(num_partitions=3) as b: b.bootstrap_servers`` (or a dict of Kafka names);
    ``broker(console=True)`` also serves the web console at ``b.console_url``;
    ``broker(processes=2)`` is a ``serve --processes 2`` cluster (child processes, cluster.py)."""
    processes = int(kwargs.pop("processes", 1))
    if processes > 1:
        from .cluster import ClusterBroker

        merged = {**TEST_DEFAULTS, **{config_name(k): _text(v) for k, v in {**(overrides or {}), **kwargs}.items()}}
        cluster = ClusterBroker(merged, processes).start()
        try:
            yield cluster
        finally:
            cluster.stop()
        return
    console = bool(kwargs.pop("console", False))
    writes = bool(kwargs.pop("console_allow_writes", False))
    b = EmbeddedBroker({**(overrides or {}), **kwargs}, console=console, console_allow_writes=writes).start()
    try:
        yield b
    finally:
        b.stop()


class KafkaContainer:
    """testcontainers' ``KafkaContainer`` shape over an embedded broker: change one import.

    The image and port arguments are accepted and ignored (there is no container);
    ``with_env("KAFKA_X_Y", v)`` sets config ``x.y`` as the apache/kafka image does.
    """

    def __init__(self, image: str = "kafka-sidecar", port: int = 9093, **kwargs: Any) -> None:
        self.image = image
        self.port = port
        self._overrides: dict[str, str] = {}
        self._broker: EmbeddedBroker | None = None

    def with_env(self, key: str, value: str) -> KafkaContainer:
        if key.startswith("KAFKA_"):
            from kafka_sidecar.server.config import properties_from_env

            for name, (_var, val) in properties_from_env({key: value}).items():
                self._overrides[name] = val
        return self

    def with_kraft(self) -> KafkaContainer:
        return self

    def start(self) -> KafkaContainer:
        self._broker = EmbeddedBroker(self._overrides).start()
        return self

    def stop(self) -> None:
        if self._broker is not None:
            self._broker.stop()
            self._broker = None

    def get_bootstrap_server(self) -> str:
        return self._started().bootstrap_servers

    def get_container_host_ip(self) -> str:
        """The host clients connect to (testcontainers': the Docker host; here loopback)."""
        return self._started().bootstrap_servers.rpartition(":")[0]

    def get_exposed_port(self, port: int | str) -> int:
        """The port a client connects to for the container's ``port``: the broker's port for
        the Kafka ports (this container's ``port``, the image's 9092 or 9093)."""
        b = self._started()
        if int(str(port).split("/")[0]) not in (self.port, 9092, 9093):
            raise ValueError(f"port {port} is not exposed: KafkaContainer serves Kafka on {self.port} (9092 and 9093 map there too)")
        return int(b.bootstrap_servers.rpartition(":")[2])

    def _started(self) -> EmbeddedBroker:
        if self._broker is None:
            raise RuntimeError("KafkaContainer not started")
        return self._broker

    def __enter__(self) -> KafkaContainer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
