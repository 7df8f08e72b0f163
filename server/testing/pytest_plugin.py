"""pytest fixtures for a kafka-sidecar broker (registered as the ``pytest11`` entry point).

- ``kafka_sidecar``: a fresh broker for one test (its own data dir);
- ``kafka_sidecar_session``: one broker for the whole session.

Both yield an ``EmbeddedBroker`` (``.bootstrap_servers``). Overrides for the per-test broker
come from the marker ``@pytest.mark.kafka_sidecar(num_partitions=3)``; nothing starts unless
a test asks for a fixture.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .embedded import EmbeddedBroker


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "kafka_sidecar(**configs): Kafka configs for the kafka_sidecar fixture's broker")


@pytest.fixture
def kafka_sidecar(request: pytest.FixtureRequest) -> Iterator[EmbeddedBroker]:
    marker = request.node.get_closest_marker("kafka_sidecar")
    overrides = {**(marker.args[0] if marker and marker.args else {}), **(marker.kwargs if marker else {})}
    broker = EmbeddedBroker(overrides).start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def kafka_sidecar_session() -> Iterator[EmbeddedBroker]:
    broker = EmbeddedBroker().start()
    try:
        yield broker
    finally:
        broker.stop()
