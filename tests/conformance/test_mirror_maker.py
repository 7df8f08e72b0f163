"""Leaving kafka-sidecar for a Kafka cluster (docs/scaling.md): Apache Kafka's own MirrorMaker 2
(`connect-mirror-maker.sh`, the reference distribution's) copies a topic and a consumer group's
committed offsets from kafka-sidecar to the session's reference Kafka, with the topic names kept
(IdentityReplicationPolicy), as the doc's command does."""

from __future__ import annotations

import subprocess
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.support import kafka_bin

from .conftest import Brokers

RECORDS = 200


def test_mirror_maker_copies_a_topic_and_group_offsets_to_kafka(brokers: Brokers, tmp_path: Path) -> None:
    script = kafka_bin("connect-mirror-maker.sh")
    if brokers.reference is None or brokers.ours is None or not script.exists():
        pytest.skip(f"needs the reference Kafka and its connect-mirror-maker.sh: {brokers.reason or script}")
    ours, kafka = brokers.ours.bootstrap, brokers.reference.bootstrap
    topic, group = f"mm2-{uuid.uuid4().hex[:8]}", f"mm2-group-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": ours})
    for i in range(RECORDS):
        producer.produce(topic, f"v{i}".encode(), key=f"k{i}".encode())
    assert producer.flush(30) == 0
    source = Consumer({"bootstrap.servers": ours, "group.id": group, "enable.auto.commit": False})
    source.commit(offsets=[TopicPartition(topic, 0, 150)], asynchronous=False)
    source.close()

    props = tmp_path / "mm2.properties"
    props.write_text("\n".join([
        "clusters = sidecar, kafka",
        f"sidecar.bootstrap.servers = {ours}",
        f"kafka.bootstrap.servers = {kafka}",
        "sidecar->kafka.enabled = true",
        f"sidecar->kafka.topics = {topic}",
        f"sidecar->kafka.groups = {group}",
        "sidecar->kafka.sync.group.offsets.enabled = true",
        "sidecar->kafka.sync.group.offsets.interval.seconds = 1",
        "sidecar->kafka.emit.checkpoints.interval.seconds = 1",
        "replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
        # one reference broker: every internal topic with one replica
        *(f"{name}.replication.factor = 1" for name in (
            "replication", "checkpoints.topic", "heartbeats.topic", "offset-syncs.topic",
            "offset.storage", "status.storage", "config.storage")),
        "",
    ]))
    log = tmp_path / "mm2.log"
    with open(log, "w") as out:
        mm2 = subprocess.Popen([str(script), str(props)], stdout=out, stderr=subprocess.STDOUT)
    try:
        target = Consumer({"bootstrap.servers": kafka, "group.id": f"check-{uuid.uuid4().hex[:8]}",
                           "auto.offset.reset": "earliest", "enable.auto.commit": False})
        target.subscribe([topic])
        values = []
        deadline = time.monotonic() + 150
        while len(values) < RECORDS and time.monotonic() < deadline:
            m = target.poll(1.0)
            if m is not None and not m.error():
                values.append(m.value())
        target.close()
        assert values == [f"v{i}".encode() for i in range(RECORDS)], log.read_text()[-3000:]
        # The group's offset reaches Kafka translated through MirrorMaker's offset syncs: to just
        # past the last sync at or below it (one every offset.lag.max=100 records), never beyond.
        synced = Consumer({"bootstrap.servers": kafka, "group.id": group, "enable.auto.commit": False})
        committed = -1
        while committed <= 100 and time.monotonic() < deadline:
            committed = synced.committed([TopicPartition(topic, 0)], timeout=10)[0].offset
            time.sleep(1)
        synced.close()
        assert 100 < committed <= 150, log.read_text()[-3000:]
        assert " ERROR " not in log.read_text()
    finally:
        mm2.terminate()
        mm2.wait(60)
