"""kafka-python against kafka-sidecar: create, produce, fetch, restart, fetch again."""

from __future__ import annotations

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from tests.support import RECENT_TS


def _consume_all(bootstrap: str, tp: TopicPartition, expected: int) -> list:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=5000, enable_auto_commit=False)
    consumer.assign([tp])
    out = []
    for msg in consumer:
        out.append(msg)
        if len(out) >= expected:
            break
    consumer.close()
    return out


def test_produce_fetch_restart_roundtrip(sidecar_factory, topic_name):
    server = sidecar_factory()
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap)
    admin.create_topics([NewTopic(topic_name, 1, 1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=server.bootstrap, linger_ms=5)
    futures = [
        producer.send(topic_name, key=f"k{i}".encode(), value=f"v{i}".encode(), headers=[("h", b"%d" % i)], timestamp_ms=RECENT_TS + i)
        for i in range(1000)
    ]
    producer.flush()
    offsets = [f.get(timeout=10).offset for f in futures]
    producer.close()
    assert offsets == list(range(1000))

    tp = TopicPartition(topic_name, 0)

    def check(msgs):
        assert [m.offset for m in msgs] == list(range(1000))
        assert [m.key for m in msgs] == [f"k{i}".encode() for i in range(1000)]
        assert [m.value for m in msgs] == [f"v{i}".encode() for i in range(1000)]
        assert [m.timestamp for m in msgs] == [RECENT_TS + i for i in range(1000)]
        assert [m.headers for m in msgs] == [[("h", b"%d" % i)] for i in range(1000)]

    check(_consume_all(server.bootstrap, tp, 1000))
    assert server.stop() == 0
    assert (server.data_dir / ".kafka_cleanshutdown").exists()
    assert (server.data_dir / f"{topic_name}-0" / "00000000000000000000.log").stat().st_size > 0
    server.start()
    check(_consume_all(server.bootstrap, tp, 1000))
    consumer = KafkaConsumer(bootstrap_servers=server.bootstrap)
    assert consumer.end_offsets([tp])[tp] == 1000
    assert consumer.beginning_offsets([tp])[tp] == 0
    consumer.close()
