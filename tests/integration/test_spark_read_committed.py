"""The Spark data source's reader (kafka_sidecar.spark, no Spark needed here) against transactions:
with ``read_committed`` it skips aborted records as Kafka's consumer does, and stops at the last
stable offset; ``read_uncommitted`` reads everything. Records come from confluent-kafka's
transactional producer over TCP."""

from __future__ import annotations

import uuid

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka_sidecar.spark._consumer import read_range

TIMEOUT = 30


def _values(bootstrap: str, topic: str, isolation_level: int, end: int) -> list[bytes]:
    out: list[bytes] = []
    for cols in read_range(bootstrap, topic, 0, 0, end, isolation_level=isolation_level, fail_on_data_loss=False):
        out += [v for v in cols.values if v is not None]
    return out


def test_read_committed_skips_aborted_transactions(sidecar):
    bootstrap = sidecar.bootstrap
    topic = f"spark-txn-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(TIMEOUT)
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tx-{topic}", "linger.ms": 0})
    p.init_transactions(TIMEOUT)
    for outcome in ("commit", "abort", "commit", "abort"):
        p.begin_transaction()
        for i in range(3):
            p.produce(topic, f"{outcome}-{i}".encode(), partition=0)
        p.flush(TIMEOUT)
        if outcome == "commit":
            p.commit_transaction(TIMEOUT)
        else:
            p.abort_transaction(TIMEOUT)
    p.begin_transaction()  # left open: read_committed stops before it
    p.produce(topic, b"open-0", partition=0)
    p.flush(TIMEOUT)

    # 4 transactions x (3 records + a marker) + the open record: offsets 0..16.
    end = 17
    committed = _values(bootstrap, topic, 1, end)
    assert committed == [b"commit-0", b"commit-1", b"commit-2"] * 2
    everything = _values(bootstrap, topic, 0, end)
    assert everything == [f"{o}-{i}".encode() for o in ("commit", "abort", "commit", "abort") for i in range(3)] + [b"open-0"]
    p.abort_transaction(TIMEOUT)
