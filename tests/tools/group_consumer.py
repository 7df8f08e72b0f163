"""One consumer-group member in its own process, for the group tests (tests/integration/test_groups.py).

    python group_consumer.py SPEC_JSON

SPEC_JSON: {"client": "kafka-python" | "aiokafka" | "confluent", "bootstrap": "host:port",
"topic": ..., "group": ..., "session_ms": 3000, "heartbeat_ms": 500, "max_seconds": 120,
"client_id": ..., "instance_id": null}

Prints JSON lines on stdout: {"event": "assigned", "partitions": [...]} after each
assignment (and {"event": "revoked"} before a revocation), {"event": "record",
"partition": p, "offset": o} per record. SIGTERM closes the consumer cleanly (it
leaves the group) and prints {"event": "closed"}; SIGKILL is the crash the tests use.
The process ends by itself after max_seconds.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import threading
import time
from typing import Any

stop = threading.Event()


def emit(event: str, **fields: Any) -> None:
    sys.stdout.write(json.dumps({"event": event, **fields}) + "\n")
    sys.stdout.flush()


def run_kafka_python(spec: dict[str, Any]) -> None:
    from kafka import ConsumerRebalanceListener, KafkaConsumer

    topic = spec["topic"]
    consumer = KafkaConsumer(
        bootstrap_servers=spec["bootstrap"],
        group_id=spec["group"],
        client_id=spec.get("client_id") or "group-test-kafka-python",
        group_instance_id=spec.get("instance_id"),
        auto_offset_reset="earliest",
        enable_auto_commit=True,
        auto_commit_interval_ms=300,
        session_timeout_ms=spec["session_ms"],
        heartbeat_interval_ms=spec["heartbeat_ms"],
        fetch_max_wait_ms=100,
    )

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):
            emit("revoked")

        def on_partitions_assigned(self, assigned):
            emit("assigned", partitions=sorted(tp.partition for tp in consumer.assignment() if tp.topic == topic))

    # Fetch the topic's metadata before joining: kafka-python 3.0.12 loses the assignment of a
    # leader whose rejoin (for new metadata) is still in flight when poll() times out.
    consumer.partitions_for_topic(topic)
    consumer.subscribe([topic], listener=Listener())
    deadline = time.monotonic() + spec["max_seconds"]
    while not stop.is_set() and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            for r in records:
                emit("record", partition=r.partition, offset=r.offset)
    consumer.close()


def run_confluent(spec: dict[str, Any]) -> None:
    from confluent_kafka import Consumer

    topic = spec["topic"]
    conf = {
        "bootstrap.servers": spec["bootstrap"],
        "group.id": spec["group"],
        "client.id": spec.get("client_id") or "group-test-confluent",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": True,
        "auto.commit.interval.ms": 300,
        "session.timeout.ms": spec["session_ms"],
        "heartbeat.interval.ms": spec["heartbeat_ms"],
        "fetch.wait.max.ms": 100,
    }
    if spec.get("instance_id"):
        conf["group.instance.id"] = spec["instance_id"]
    consumer = Consumer(conf)

    def on_assign(c, partitions):
        emit("assigned", partitions=sorted(p.partition for p in partitions if p.topic == topic))

    def on_revoke(c, partitions):
        emit("revoked")

    consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
    deadline = time.monotonic() + spec["max_seconds"]
    while not stop.is_set() and time.monotonic() < deadline:
        msg = consumer.poll(0.1)
        if msg is not None and msg.error() is None:
            emit("record", partition=msg.partition(), offset=msg.offset())
    consumer.close()


async def run_aiokafka(spec: dict[str, Any]) -> None:
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener

    topic = spec["topic"]
    consumer = AIOKafkaConsumer(
        bootstrap_servers=spec["bootstrap"],
        group_id=spec["group"],
        client_id=spec.get("client_id") or "group-test-aiokafka",
        group_instance_id=spec.get("instance_id"),
        auto_offset_reset="earliest",
        enable_auto_commit=True,
        auto_commit_interval_ms=300,
        session_timeout_ms=spec["session_ms"],
        heartbeat_interval_ms=spec["heartbeat_ms"],
        fetch_max_wait_ms=100,
    )

    class Listener(ConsumerRebalanceListener):
        async def on_partitions_revoked(self, revoked):
            emit("revoked")

        async def on_partitions_assigned(self, assigned):
            emit("assigned", partitions=sorted(tp.partition for tp in assigned if tp.topic == topic))

    consumer.subscribe([topic], listener=Listener())
    await consumer.start()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    deadline = time.monotonic() + spec["max_seconds"]
    try:
        while not stop.is_set() and time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=100)
            for records in batches.values():
                for r in records:
                    emit("record", partition=r.partition, offset=r.offset)
    finally:
        await consumer.stop()


def main() -> None:
    spec = json.loads(sys.argv[1])
    spec.setdefault("session_ms", 3000)
    spec.setdefault("heartbeat_ms", 500)
    spec.setdefault("max_seconds", 120)
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    client = spec["client"]
    if client == "kafka-python":
        run_kafka_python(spec)
    elif client == "confluent":
        run_confluent(spec)
    elif client == "aiokafka":
        asyncio.run(run_aiokafka(spec))
    else:
        raise SystemExit(f"unknown client {client}")
    emit("closed")


if __name__ == "__main__":
    main()
