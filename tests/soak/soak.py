"""Soak: many producers and consumers against one kafka-sidecar on loopback, for a bounded time.

    python -m tests.soak.soak --seconds 600 [--producers 4] [--consumers 4] [--rate 400]

- producers (confluent-kafka, idempotent, acks=all), each at ``--rate`` records/s, keyed,
  over all partitions of one topic; every acknowledgement is recorded;
- consumers: half of them read every partition by assignment (each must see every
  record), half form one consumer group (together they must see every record;
  a rebalance may repeat some, never lose one);
- the server's RSS is sampled every few seconds.

At the end producers stop, consumers catch up, and the run fails if any delivery or
consume error happened, any acknowledged record was not consumed with its value at its
offset (by every standalone consumer and by the group), the server logged an error, or
its memory grew (RSS at the end vs after warm-up). Then it stops cleanly and every
segment is verified. Prints a JSON summary; exit status 1 on failure. Loopback only,
bounded in time.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from kafka_sidecar.storage.verify import problems, verify_data_dir

from tests.integration.test_bad_input import create_topic
from tests.support import SidecarProcess

TOPIC = "soak"


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


class Ledger:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.acked: dict[tuple[int, int], bytes] = {}
        self.errors: list[str] = []

    def error(self, what: str) -> None:
        with self.lock:
            if len(self.errors) < 100:
                self.errors.append(what)


def producer_loop(bootstrap: str, n: int, rate: float, stop: threading.Event, ledger: Ledger) -> int:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5,
                  "client.id": f"soak-producer-{n}", "log_level": 3})
    sent = 0

    def on_delivery(err, msg) -> None:
        if err is not None:
            ledger.error(f"producer {n}: delivery failed: {err}")
            return
        with ledger.lock:
            ledger.acked[(msg.partition(), msg.offset())] = msg.value()

    start = time.monotonic()
    while not stop.is_set():
        due = int((time.monotonic() - start) * rate)
        while sent < due and not stop.is_set():
            try:
                p.produce(TOPIC, key=b"k%d-%d" % (n, sent % 97), value=b"p%d-%09d-" % (n, sent) + b"s" * (sent % 200), on_delivery=on_delivery)
                sent += 1
            except BufferError:
                p.poll(0.01)
        p.poll(0.01)
    remaining = p.flush(60)
    if remaining:
        ledger.error(f"producer {n}: {remaining} records never acknowledged")
    return sent


class Reader:
    """A consumer: by assignment of every partition, or a member of the soak group."""

    def __init__(self, bootstrap: str, n: int, partitions: int, group: bool, ledger: Ledger) -> None:
        self.n, self.group, self.ledger = n, group, ledger
        conf = {
            "bootstrap.servers": bootstrap, "group.id": "soak-group" if group else f"soak-standalone-{n}",
            "auto.offset.reset": "earliest", "enable.auto.commit": True, "auto.commit.interval.ms": 1000,
            "client.id": f"soak-consumer-{n}", "log_level": 3, "session.timeout.ms": 10000,
            "fetch.wait.max.ms": 100,
        }
        self.consumer = Consumer(conf)
        if group:
            self.consumer.subscribe([TOPIC])
        else:
            self.consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(partitions)])
        self.seen: dict[tuple[int, int], bytes] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, name=f"soak-consumer-{n}", daemon=True)

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                for msg in self.consumer.consume(500, 0.2):
                    if msg.error():
                        if msg.error().code() != KafkaError._PARTITION_EOF:
                            self.ledger.error(f"consumer {self.n}: {msg.error()}")
                        continue
                    key = (msg.partition(), msg.offset())
                    if key in self.seen and self.seen[key] != msg.value():
                        self.ledger.error(f"consumer {self.n}: offset {key} read twice with different values")
                    self.seen[key] = msg.value()
        finally:
            self.consumer.close()


def run(seconds: float, producers: int, consumers: int, rate: float, partitions: int, data_dir: Path, verbose: bool = True) -> dict:
    server = SidecarProcess(data_dir, {
        "log.segment.bytes": str(4 << 20), "num.partitions": str(partitions),
        "group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "4",
    })
    server.start()
    ledger = Ledger()
    result: dict = {}
    try:
        create_topic(server.port, TOPIC, partitions=partitions)
        readers = [Reader(server.bootstrap, i, partitions, group=i % 2 == 1, ledger=ledger) for i in range(consumers)]
        for r in readers:
            r.thread.start()
        stop = threading.Event()
        sent: list[int] = [0] * producers
        threads = []
        for i in range(producers):
            def body(i: int = i) -> None:
                sent[i] = producer_loop(server.bootstrap, i, rate, stop, ledger)
            t = threading.Thread(target=body, name=f"soak-producer-{i}", daemon=True)
            t.start()
            threads.append(t)
        assert server.proc is not None
        samples: list[tuple[float, int]] = []
        started = time.monotonic()
        interval = max(1.0, min(10.0, seconds / 30))
        while time.monotonic() - started < seconds:
            time.sleep(interval)
            samples.append((round(time.monotonic() - started, 1), rss_kib(server.proc.pid)))
            if server.proc.poll() is not None:
                ledger.error("the server exited")
                break
            if verbose:
                print(f"t={samples[-1][0]:.0f}s rss={samples[-1][1] // 1024} MiB acked={len(ledger.acked)} errors={len(ledger.errors)}", flush=True)
        stop.set()
        for t in threads:
            t.join(120)
        with ledger.lock:
            acked = dict(ledger.acked)
        # Consumers catch up with everything acknowledged.
        deadline = time.monotonic() + 90
        standalone = [r for r in readers if not r.group]
        members = [r for r in readers if r.group]

        def caught_up() -> bool:
            if any(len(r.seen.keys() & acked.keys()) < len(acked) for r in standalone):
                return False
            group_seen: set = set()
            for r in members:
                group_seen |= r.seen.keys()
            return not members or len(group_seen & acked.keys()) == len(acked)

        while time.monotonic() < deadline and not caught_up():
            time.sleep(0.5)
        for r in readers:
            r.stop.set()
        for r in readers:
            r.thread.join(30)
        missing = {}
        for r in standalone:
            lost = [k for k in acked if r.seen.get(k) != acked[k]]
            if lost:
                missing[f"consumer {r.n}"] = len(lost)
        if members:
            union: dict = {}
            for r in members:
                union.update(r.seen)
            lost = [k for k in acked if union.get(k) != acked[k]]
            if lost:
                missing["group"] = len(lost)
        log_errors = [line for line in server.log_text().splitlines() if " ERROR " in line or "Traceback" in line]
        warm = [kib for t, kib in samples if t >= seconds * 0.25] or [kib for _, kib in samples]
        rss_warm, rss_end, rss_max = (warm[0] if warm else 0), (samples[-1][1] if samples else 0), max((k for _, k in samples), default=0)
        grew_mib = (rss_end - rss_warm) / 1024
        result = {
            "seconds": seconds, "producers": producers, "consumers": consumers, "partitions": partitions,
            "records_sent": sum(sent), "records_acknowledged": len(acked),
            "records_per_second": round(len(acked) / max(seconds, 1)),
            "consumed_by_each_standalone_consumer": min((len(r.seen) for r in standalone), default=0),
            "missing": missing, "errors": ledger.errors[:10], "server_log_errors": log_errors[:10],
            "rss_mib": {"after_warmup": rss_warm // 1024, "end": rss_end // 1024, "max": rss_max // 1024},
        }
        ok = not missing and not ledger.errors and not log_errors and grew_mib < max(20.0, rss_warm / 1024 * 0.25)
        if server.stop() != 0:
            ok = False
            result["errors"].append("unclean stop")
        disk = problems(verify_data_dir(data_dir, strict=True))
        result["segment_problems"] = disk[:10]
        result["ok"] = ok and not disk
        return result
    finally:
        if server.proc is not None and server.proc.poll() is None:
            server.kill()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.soak.soak", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=600)
    parser.add_argument("--producers", type=int, default=4)
    parser.add_argument("--consumers", type=int, default=4)
    parser.add_argument("--rate", type=float, default=400, help="records per second per producer")
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="kafka-sidecar-soak-"))
    try:
        result = run(args.seconds, args.producers, args.consumers, args.rate, args.partitions, tmp / "data", verbose=not args.quiet)
    finally:
        pass
    print(json.dumps(result, indent=1))
    if result.get("ok"):
        shutil.rmtree(tmp, ignore_errors=True)
        return 0
    print(f"FAILED (data dir kept: {tmp})", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
