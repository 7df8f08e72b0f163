"""kafka-sidecar as a test fixture: a real broker on a free loopback port, in a blink.

    from kafka_sidecar.testing import broker

    with broker(num_partitions=3) as b:
        producer = Producer({"bootstrap.servers": b.bootstrap_servers})

The broker runs in this process, on its own event loop in a background thread (no interpreter
to start, so a broker is ready in tens of milliseconds once the first one has loaded the code),
with a temporary data dir removed on exit and test-friendly defaults (``TEST_DEFAULTS``):
no initial rebalance delay, one ``__consumer_offsets`` partition, retention checked every
second. Clients talk to it over real TCP, exactly as to ``kafka-sidecar serve``.

``KafkaContainer`` has the shape of testcontainers' ``KafkaContainer`` (``start()``, ``stop()``,
``get_bootstrap_server()``, a context manager), so a suite moves between a container and this
broker by changing one import. The pytest plugin (``kafka_sidecar.testing.pytest_plugin``,
registered as a ``pytest11`` entry point) provides the ``kafka_sidecar`` (per test) and
``kafka_sidecar_session`` fixtures.
"""

from __future__ import annotations

from .embedded import TEST_DEFAULTS, EmbeddedBroker, KafkaContainer, broker

__all__ = ["TEST_DEFAULTS", "EmbeddedBroker", "KafkaContainer", "broker"]
