"""``kafka_sidecar.testing``: the context manager, the KafkaContainer look-alike and the pytest
plugin, each used by a real client over TCP."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka_sidecar.testing import KafkaContainer, broker

pytest_plugins = ["pytester"]


def roundtrip(bootstrap: str, topic: str, values: list[bytes], expect: int | None = None) -> list[bytes]:
    """Produce ``values``, then read the topic from the start until ``expect`` records (default: as many)."""
    p = Producer({"bootstrap.servers": bootstrap})
    for v in values:
        p.produce(topic, v)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex, "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got: list[bytes] = []
    try:
        for _ in range(100):
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append(m.value())
            if len(got) == (expect or len(values)):
                break
    finally:
        c.close()
    return got


def test_broker_context_manager_overrides_and_cleanup() -> None:
    with broker(num_partitions=3, **{"auto.create.topics.enable": "true"}) as b:
        assert b.bootstrap_servers.startswith("127.0.0.1:") and b.port > 0
        data_dir = b.data_dir
        assert data_dir is not None and data_dir.is_dir()
        # three partitions: Kafka orders records within a partition only
        assert sorted(roundtrip(b.bootstrap_servers, "auto-created", [b"a", b"b"])) == [b"a", b"b"]
        md = AdminClient({"bootstrap.servers": b.bootstrap_servers}).list_topics(timeout=10)
        assert len(md.topics["auto-created"].partitions) == 3  # num.partitions took effect
        assert (data_dir / "auto-created-0").is_dir()
    assert not data_dir.exists()  # the temporary data dir is gone


def test_restart_keeps_data_and_two_brokers_get_their_own_ports() -> None:
    with broker() as one, broker() as two:
        assert one.port != two.port
        admin = AdminClient({"bootstrap.servers": one.bootstrap_servers})
        admin.create_topics([NewTopic("kept", 1, 1)])["kept"].result(30)
        assert roundtrip(one.bootstrap_servers, "kept", [b"x"]) == [b"x"]
        port = one.port
        one.restart()
        assert one.port == port
        assert roundtrip(one.bootstrap_servers, "kept", [b"y"], expect=2) == [b"x", b"y"]  # x survived the restart
        md = AdminClient({"bootstrap.servers": two.bootstrap_servers}).list_topics(timeout=10)
        assert "kept" not in md.topics


def test_broker_of_two_processes() -> None:
    """``broker(processes=2)``: a ``serve --processes 2`` cluster; a topic's partitions led by
    both nodes, written and read through the bootstrap list; the data dir gone after."""
    with broker(processes=2, num_partitions=4, **{"auto.create.topics.enable": "true"}) as b:
        assert len(b.ports) == 2 and b.bootstrap_servers == ",".join(f"127.0.0.1:{p}" for p in b.ports)
        data_dir = b.data_dir
        assert sorted(roundtrip(b.bootstrap_servers, "two-nodes", [b"v%d" % i for i in range(8)])) == sorted(b"v%d" % i for i in range(8))
        md = AdminClient({"bootstrap.servers": b.bootstrap_servers}).list_topics("two-nodes", timeout=10)
        assert sorted(md.brokers) == [1, 2]
        assert {p.leader for p in md.topics["two-nodes"].partitions.values()} == {1, 2}
        assert sorted(d.name for d in data_dir.iterdir() if d.is_dir()) == ["node-1", "node-2"]
    assert not data_dir.exists()


def test_kafka_container_shape() -> None:
    with KafkaContainer("confluentinc/cp-kafka:7.6.0").with_env("KAFKA_NUM_PARTITIONS", "2") as kafka:
        bootstrap = kafka.get_bootstrap_server()
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("shape", -1, -1)])["shape"].result(30)  # broker defaults
        assert len(admin.list_topics(timeout=10).topics["shape"].partitions) == 2
    container = KafkaContainer().start()
    try:
        assert roundtrip(container.get_bootstrap_server(), "t", [b"1"]) == [b"1"]
        # What testcontainers users call to build their own address.
        host, port = container.get_container_host_ip(), container.get_exposed_port(9092)
        assert isinstance(port, int) and container.get_exposed_port(container.port) == port
        assert f"{host}:{port}" == container.get_bootstrap_server()
        assert roundtrip(f"{host}:{port}", "t2", [b"2"]) == [b"2"]
        with pytest.raises(ValueError, match="port 5432 is not exposed"):
            container.get_exposed_port(5432)
    finally:
        container.stop()
    with pytest.raises(RuntimeError):
        container.get_bootstrap_server()


def test_pytest_plugin_fixtures(pytester: pytest.Pytester) -> None:
    """The entry point's fixtures in a suite of its own: a fresh broker per test (with the
    marker's configs) and one for the session."""
    pytester.makepyfile(
        """
        import pytest
        from confluent_kafka.admin import AdminClient, NewTopic

        seen = []

        @pytest.mark.kafka_sidecar(num_partitions=4)
        def test_function_broker(kafka_sidecar):
            admin = AdminClient({"bootstrap.servers": kafka_sidecar.bootstrap_servers})
            admin.create_topics([NewTopic("t", -1, -1)])["t"].result(30)
            assert len(admin.list_topics(timeout=10).topics["t"].partitions) == 4
            seen.append(kafka_sidecar.port)

        def test_another_function_broker(kafka_sidecar):
            assert "t" not in AdminClient({"bootstrap.servers": kafka_sidecar.bootstrap_servers}).list_topics(timeout=10).topics

        def test_session_broker(kafka_sidecar_session):
            seen.append(kafka_sidecar_session.port)
            assert AdminClient({"bootstrap.servers": kafka_sidecar_session.bootstrap_servers}).list_topics(timeout=10).brokers

        def test_same_session_broker(kafka_sidecar_session):
            assert kafka_sidecar_session.port == seen[-1]
        """
    )
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=4)
