"""DeleteTopics as Kafka's LogManager does it: the partition dirs are renamed
``<topic>-<p>.<uuid>-delete`` at once (the topic is gone for clients) and removed from disk
``log.segment.delete.delay.ms`` later (kafka-delete-logs), not at once."""

from __future__ import annotations

import time

from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic
from kafka_sidecar.testing import EmbeddedBroker


def _dirs(b: EmbeddedBroker, topic: str) -> tuple[list[str], list[str]]:
    names = [p.name for p in b.data_dir.iterdir() if p.name.startswith(f"{topic}-")]
    return sorted(n for n in names if not n.endswith("-delete")), sorted(n for n in names if n.endswith("-delete"))


def test_deleted_partition_dirs_are_removed_after_the_delay() -> None:
    with EmbeddedBroker({"log.segment.delete.delay.ms": 1500}) as b:
        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap_servers)
        try:
            admin.create_topics([NewTopic("doomed", 2, 1)])
            producer = KafkaProducer(bootstrap_servers=b.bootstrap_servers)
            producer.send("doomed", b"x", partition=1).get(timeout=30)
            producer.close()
            admin.delete_topics(["doomed"])
            deleted_at = time.monotonic()
            live, renamed = _dirs(b, "doomed")
            assert live == [] and len(renamed) == 2
            assert all(n.startswith(("doomed-0.", "doomed-1.")) for n in renamed)
            time.sleep(0.5)
            assert _dirs(b, "doomed")[1] == renamed  # still there within the delay
            deadline = deleted_at + 10
            while _dirs(b, "doomed")[1] and time.monotonic() < deadline:
                time.sleep(0.05)
            assert _dirs(b, "doomed") == ([], [])
            assert time.monotonic() - deleted_at >= 1.4
        finally:
            admin.close()
