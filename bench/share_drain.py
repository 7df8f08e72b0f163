"""A share group draining a topic: time and broker CPU for one share consumer to get every record.

    python -m bench.share_drain                                  # ours: 500,000 records, 4 partitions
    python -m bench.share_drain --records 100000 --partitions 1
    python -m bench.share_drain --sidecar-pythonpath /tmp/base/pp  # another build of ours
    python -m bench.share_drain --reference                      # and the reference Kafka after it

The topic is filled first (librdkafka producer, 100-byte values, large batches), the share group's
``share.auto.offset.reset`` set to earliest, then one librdkafka ``ShareConsumer`` (implicit
acknowledgement) polls until it has seen every record; ``--consumers N`` runs N of them in one
thread, round robin. Figures: seconds from the first poll to the last record, records/s, the
broker's CPU seconds over that window (utime+stime of the whole process, ``/proc/<pid>/stat``),
and duplicates seen (records delivered more than once: only after a lock timeout or a release).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from bench.reference import ReferenceKafka, ReferenceUnavailable, unavailable_reason
from bench.run import ClientErrors, Sidecar, cpu_seconds, log, machine_info


def _produce(bootstrap: str, topic: str, partitions: int, records: int, errors: ClientErrors) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "error_cb": errors})
    for fut in admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)], request_timeout=30).values():
        fut.result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000,
                         "batch.num.messages": 10_000, "queue.buffering.max.messages": 500_000,
                         "compression.type": "none", "error_cb": errors})
    deadline = time.monotonic() + max(120.0, records / 2000)
    for i in range(records):
        while True:
            try:
                producer.produce(topic, b"%08d" % i + b"x" * 92, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.005)
                if time.monotonic() > deadline:
                    raise RuntimeError("produce stalled") from None
    if producer.flush(max(1.0, deadline - time.monotonic())):
        raise RuntimeError("records not delivered before the deadline")


def _set_earliest(bootstrap: str, group: str) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    for fut in admin.incremental_alter_configs([res]).values():
        fut.result(30)


def _drain(bootstrap: str, topic: str, group: str, records: int, consumers: int, pid: int | None, timeout: float) -> dict[str, Any]:
    import confluent_kafka

    cs = []
    for _ in range(consumers):
        c = confluent_kafka.ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                                           "share.acknowledgement.mode": "implicit", "log_level": 3})
        c.subscribe([topic])
        cs.append(c)
    seen: set[bytes] = set()
    delivered = 0
    cpu0, t0 = cpu_seconds(pid), time.perf_counter()
    deadline = time.monotonic() + timeout
    try:
        while len(seen) < records and time.monotonic() < deadline:
            for c in cs:
                for m in c.poll(0.2):
                    if m.error() is None:
                        seen.add(m.value()[:8])
                        delivered += 1
        elapsed = time.perf_counter() - t0
        cpu1 = cpu_seconds(pid)
    finally:
        for c in cs:
            try:
                c.commit_sync(10)
            finally:
                c.close()
    return {"records": records, "received": len(seen), "duplicates": delivered - len(seen), "seconds": round(elapsed, 2),
            "rec_s": round(len(seen) / elapsed), "broker_cpu_s": None if cpu0 is None or cpu1 is None else round(cpu1 - cpu0, 2),
            "complete": len(seen) == records}


def run_against(label: str, bootstrap: str, pid: int | None, cfg: argparse.Namespace) -> dict[str, Any]:
    errors = ClientErrors()
    topic, group = f"share-drain-{uuid.uuid4().hex[:8]}", f"sd-{uuid.uuid4().hex[:8]}"
    t0 = time.perf_counter()
    _produce(bootstrap, topic, cfg.partitions, cfg.records, errors)
    log(f"{label}: {cfg.records} records produced in {time.perf_counter() - t0:.1f}s")
    _set_earliest(bootstrap, group)
    out = _drain(bootstrap, topic, group, cfg.records, cfg.consumers, pid, cfg.timeout)
    log(f"{label}: {out}")
    return {"target": label, **out}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--consumers", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds the drain may take")
    ap.add_argument("--reference", action="store_true", help="also the reference Kafka (bench/reference.py)")
    ap.add_argument("--sidecar-pythonpath", help="PYTHONPATH for our server (another build of ours)")
    ap.add_argument("--json", type=Path)
    cfg = ap.parse_args(argv)
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="share-drain-") as tmp:
        env_before = os.environ.get("PYTHONPATH")
        if cfg.sidecar_pythonpath:
            os.environ["PYTHONPATH"] = cfg.sidecar_pythonpath
        (Path(tmp) / "ours").mkdir()
        try:
            server = Sidecar(Path(tmp) / "ours").start()
        finally:
            if cfg.sidecar_pythonpath:
                if env_before is None:
                    os.environ.pop("PYTHONPATH", None)
                else:
                    os.environ["PYTHONPATH"] = env_before
        try:
            results.append(run_against("ours" + (f" ({cfg.sidecar_pythonpath})" if cfg.sidecar_pythonpath else ""),
                                       server.bootstrap, server.pid, cfg))
        finally:
            server.stop()
        if cfg.reference:
            reason = unavailable_reason()
            if reason:
                log(f"reference skipped: {reason}")
            else:
                try:
                    with ReferenceKafka({"num.partitions": 1}, heap_opts="-Xmx1g") as ref:
                        results.append(run_against("Kafka", ref.bootstrap, ref.pid, cfg))
                except ReferenceUnavailable as e:
                    log(f"reference skipped: {e}")
    report = {"machine": machine_info(), "records": cfg.records, "partitions": cfg.partitions, "results": results}
    print(json.dumps(report, indent=2))
    if cfg.json:
        cfg.json.write_text(json.dumps(report, indent=2))
    return 0 if all(r["complete"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
