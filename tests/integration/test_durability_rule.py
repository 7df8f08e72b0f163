"""The one durability rule, seen by real clients: with ``log.flush.interval.messages=1`` every
acknowledged write (a produce with acks=all, an offset commit, a group's metadata, a
transaction's state and markers) is fsynced before its answer arrives: the partition's
recovery point (what a kill -9 keeps for sure) has reached its log end by then."""

from __future__ import annotations

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata
from kafka_sidecar.testing import EmbeddedBroker


def _unflushed(b: EmbeddedBroker, topic: str) -> list[tuple[int, int, int]]:
    lm = b._broker.log_manager
    out = []
    for (t, p), lg in list(lm.logs.items()):
        if t == topic and lg.recovery_point < lg.log_end_offset:
            out.append((p, lg.recovery_point, lg.log_end_offset))
    return out


def test_acknowledged_writes_are_fsynced_first() -> None:
    with EmbeddedBroker({"log.flush.interval.messages": 1, "auto.create.topics.enable": True}) as b:
        producer = KafkaProducer(bootstrap_servers=b.bootstrap_servers, acks="all", linger_ms=0)
        for i in range(5):
            producer.send("durable", f"v{i}".encode(), partition=0).get(timeout=30)
            assert _unflushed(b, "durable") == []
        producer.close()

        consumer = KafkaConsumer(bootstrap_servers=b.bootstrap_servers, group_id="g-durable", enable_auto_commit=False)
        tp = TopicPartition("durable", 0)
        consumer.assign([tp])
        for offset in (1, 3, 5):
            consumer.commit({tp: OffsetAndMetadata(offset, "", -1)})
            assert _unflushed(b, "__consumer_offsets") == []
        assert consumer.committed(tp) == 5
        consumer.close()

        producer = KafkaProducer(bootstrap_servers=b.bootstrap_servers, transactional_id="tx-durable", acks="all")
        producer.init_transactions()
        assert _unflushed(b, "__transaction_state") == []
        producer.begin_transaction()
        producer.send("durable", b"in-txn", partition=0).get(timeout=30)
        producer.commit_transaction()
        assert _unflushed(b, "__transaction_state") == []
        assert _unflushed(b, "durable") == []  # the COMMIT marker too
        producer.close()
