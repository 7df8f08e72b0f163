"""Mixed soak: every client kind at once against one kafka-sidecar, with the log engine busy.

    python -m tests.soak.mixed --seconds 3600 [--rate 100] [--sample 60]

On topic ``mixed`` (2 partitions), for ``--seconds``:

- producers, each at ``--rate`` records/s, every acknowledgement recorded (partition, offset,
  value): librdkafka (confluent-kafka, idempotent), kafka-python, aiokafka, and Kafka's Java
  producer (``kafka-verifiable-producer.sh``);
- one consumer group per client kind, each of which must consume every acknowledged record
  exactly once: librdkafka, kafka-python, aiokafka (classic protocol), the Java consumer with
  the classic protocol and with KIP-848's (``kafka-verifiable-consumer.sh --group-protocol``);
- a share group (``kafka-verifiable-share-consumer.sh``): every acknowledged record delivered
  (at least once: share groups redeliver by design; the redeliveries are counted);
- transactions: ``tests/tools/txn_copier/TxnCopier.java`` (Kafka's Java clients: a KIP-848
  consumer reading read_committed, a transactional producer, the offsets in the transaction,
  one transaction in three aborted) copies ``mixed`` to ``mixed-txn-out``; a read_committed
  librdkafka consumer of ``mixed-txn-out`` must see every acknowledged value exactly once;
- the log engine: topics created, written and deleted every few seconds; DeleteRecords and
  size-based retention on ``mixed-retention``; compaction of keyed writes on ``mixed-compact``.

Every ``--sample`` seconds the server's RSS and open files are recorded (segment files, which
grow with the data kept as Kafka's do, apart). The run fails on a lost or duplicated record in
any group, a client error, an ERROR line in the server log, RSS or the other open files
(sockets, checkpoints) growing after warm-up (the first quarter), deleted files held open, or a
segment failing verification after the clean stop. Prints a JSON summary (with the samples); exit status 1 on failure.
Loopback only, bounded in time; every process it starts is stopped.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka_sidecar.storage.verify import problems, verify_data_dir

from bench.reference import find_kafka_home
from tests.integration.test_bad_input import create_topic
from tests.soak.soak import rss_kib
from tests.support import SidecarProcess, kafka_bin

TOPIC, TXN_OUT, COMPACT, RETENTION = "mixed", "mixed-txn-out", "mixed-compact", "mixed-retention"
PARTITIONS = 2
COPIER = Path(__file__).resolve().parents[1] / "tools" / "txn_copier" / "TxnCopier.java"
JAVA_ENV = {**os.environ, "KAFKA_HEAP_OPTS": "-Xmx192m", "KAFKA_JVM_PERFORMANCE_OPTS": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"}


class Ledger:
    """Acknowledged records, what each group consumed, and every client error."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.acked: dict[tuple[int, int], bytes] = {}
        self.groups: dict[str, Counter[tuple[int, int]]] = {}
        self.txn_out: Counter[bytes] = Counter()
        self.errors: list[str] = []
        self.counts: Counter[str] = Counter()

    def error(self, what: str) -> None:
        with self.lock:
            if len(self.errors) < 100:
                self.errors.append(what)

    def ack(self, partition: int, offset: int, value: bytes) -> None:
        with self.lock:
            self.acked[(partition, offset)] = value

    def consumed(self, group: str, partition: int, offset: int, n: int = 1) -> None:
        with self.lock:
            seen = self.groups.setdefault(group, Counter())
            for o in range(offset, offset + n):
                seen[(partition, o)] += 1


# ------------------------------------------------------------------------- Python clients


def librdkafka_producer(bootstrap: str, rate: float, stop: threading.Event, ledger: Ledger) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5, "log_level": 3})

    def done(err: Any, msg: Any) -> None:
        if err is not None:
            ledger.error(f"librdkafka producer: {err}")
        else:
            ledger.ack(msg.partition(), msg.offset(), msg.value())

    _paced(rate, stop, lambda i: p.produce(TOPIC, key=b"r%d" % (i % 50), value=b"librdkafka-%d" % i, on_delivery=done), p.poll)
    if p.flush(60):
        ledger.error("librdkafka producer: records never acknowledged")


def kafka_python_producer(bootstrap: str, rate: float, stop: threading.Event, ledger: Ledger) -> None:
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)

    def send(i: int) -> None:
        value = b"kafka-python-%d" % i
        fut = p.send(TOPIC, key=b"k%d" % (i % 50), value=value)
        fut.add_callback(lambda md, v=value: ledger.ack(md.partition, md.offset, v))
        fut.add_errback(lambda e: ledger.error(f"kafka-python producer: {e!r}"))

    _paced(rate, stop, send, lambda t: time.sleep(t))
    p.flush(60)
    p.close(10)


def aiokafka_producer(bootstrap: str, rate: float, stop: threading.Event, ledger: Ledger) -> None:
    from aiokafka import AIOKafkaProducer

    async def main() -> None:
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
        await p.start()
        pending: set[asyncio.Future[Any]] = set()
        try:
            i, start = 0, time.monotonic()
            while not stop.is_set():
                while i < int((time.monotonic() - start) * rate):
                    value = b"aiokafka-%d" % i
                    fut = await p.send(TOPIC, key=b"a%d" % (i % 50), value=value)
                    pending.add(fut)
                    fut.add_done_callback(lambda f, v=value: (pending.discard(f), ledger.error(f"aiokafka producer: {f.exception()!r}")
                                          if f.exception() else ledger.ack(f.result().partition, f.result().offset, v)))
                    i += 1
                await asyncio.sleep(0.02)
            await p.flush()
        finally:
            await p.stop()

    asyncio.run(main())


def _paced(rate: float, stop: threading.Event, send: Any, idle: Any) -> None:
    i, start = 0, time.monotonic()
    while not stop.is_set():
        while i < int((time.monotonic() - start) * rate):
            try:
                send(i)
                i += 1
            except BufferError:
                idle(0.01)
        idle(0.02)


def librdkafka_consumer(bootstrap: str, group: str, topic: str, stop: threading.Event, ledger: Ledger, txn: bool = False) -> None:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest", "log_level": 3,
                  "isolation.level": "read_committed", "enable.partition.eof": False})
    c.subscribe([topic])
    try:
        while not stop.is_set():
            for msg in c.consume(500, 0.2):
                if msg.error():
                    ledger.error(f"{group}: {msg.error()}")
                elif txn:
                    with ledger.lock:
                        ledger.txn_out[msg.value()] += 1
                else:
                    ledger.consumed(group, msg.partition(), msg.offset())
    finally:
        c.close()


def kafka_python_consumer(bootstrap: str, stop: threading.Event, ledger: Ledger) -> None:
    from kafka import KafkaConsumer

    # Kafka's 45 s session (the Python clients default to 10 s): a busy machine must not expire members.
    c = KafkaConsumer(TOPIC, bootstrap_servers=bootstrap, group_id="g-kafka-python", auto_offset_reset="earliest",
                      session_timeout_ms=45000, heartbeat_interval_ms=3000)
    try:
        while not stop.is_set():
            for tp, msgs in c.poll(200).items():
                for m in msgs:
                    ledger.consumed("g-kafka-python", tp.partition, m.offset)
    finally:
        c.close()


def aiokafka_consumer(bootstrap: str, stop: threading.Event, ledger: Ledger) -> None:
    from aiokafka import AIOKafkaConsumer

    async def main() -> None:
        c = AIOKafkaConsumer(TOPIC, bootstrap_servers=bootstrap, group_id="g-aiokafka", auto_offset_reset="earliest",
                             session_timeout_ms=45000, heartbeat_interval_ms=3000)
        await c.start()
        try:
            while not stop.is_set():
                for tp, msgs in (await c.getmany(timeout_ms=200)).items():
                    for m in msgs:
                        ledger.consumed("g-aiokafka", tp.partition, m.offset)
        finally:
            await c.stop()

    asyncio.run(main())


# --------------------------------------------------------------------------- Java clients


class JavaTool:
    """A Kafka tool (bin/ script or a tools class) whose JSON lines go to ``on_line``."""

    def __init__(self, name: str, argv: list[str], on_line: Any, log_dir: Path) -> None:
        self.name, self.argv, self.on_line = name, argv, on_line
        self.stderr = open(log_dir / f"{name}.stderr", "w")  # noqa: SIM115 (closed in stop)
        self.proc: subprocess.Popen[str] | None = None
        self.thread = threading.Thread(target=self._read, name=name, daemon=True)
        self.started = threading.Event()  # its first JSON line (the tools print startup_complete)

    def start(self) -> JavaTool:
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=self.stderr, text=True, env=JAVA_ENV)
        self.thread.start()
        return self

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("{"):
                self.started.set()
                try:
                    self.on_line(json.loads(line))
                except (ValueError, KeyError) as e:
                    self.on_line({"name": "unparsed", "line": line, "error": str(e)})

    def stop(self) -> int | None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()  # the tools' shutdown hooks close the clients (and commit)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.thread.join(10)
        self.stderr.close()
        return self.proc.returncode if self.proc is not None else None


def java_producer(bootstrap: str, rate: float, ledger: Ledger, log_dir: Path) -> JavaTool:
    def line(d: dict[str, Any]) -> None:
        if d["name"] == "producer_send_success":
            ledger.ack(d["partition"], d["offset"], d["value"].encode())
        elif d["name"] == "producer_send_error":
            ledger.error(f"java producer: {d}")

    return JavaTool("java-producer", [str(kafka_bin("kafka-verifiable-producer.sh")), "--bootstrap-server", bootstrap,
                                      "--topic", TOPIC, "--throughput", str(int(rate)), "--acks", "-1",
                                      "--value-prefix", "7"], line, log_dir)


def java_consumer(bootstrap: str, protocol: str, ledger: Ledger, log_dir: Path) -> JavaTool:
    group = f"g-java-{protocol}"

    def line(d: dict[str, Any]) -> None:
        if d["name"] == "records_consumed":
            for p in d["partitions"]:
                if p["count"] != p["maxOffset"] - p["minOffset"] + 1:
                    ledger.error(f"{group}: a gap in {p}")
                ledger.consumed(group, p["partition"], p["minOffset"], p["maxOffset"] - p["minOffset"] + 1)
        elif d["name"] == "offsets_committed" and not d.get("success", True):
            ledger.error(f"{group}: commit failed: {d}")

    return JavaTool(group, [str(kafka_bin("kafka-verifiable-consumer.sh")), "--bootstrap-server", bootstrap, "--topic", TOPIC,
                            "--group-id", group, "--group-protocol", protocol, "--reset-policy", "earliest"], line, log_dir)


def java_share_consumer(bootstrap: str, ledger: Ledger, log_dir: Path) -> JavaTool:
    def line(d: dict[str, Any]) -> None:
        if d["name"] == "record_data":
            ledger.consumed("share", d["partition"], d["offset"])
        elif d["name"] == "offsets_acknowledged" and not d.get("success", True):
            ledger.error(f"share consumer: acknowledgement failed: {d}")

    return JavaTool("java-share", [str(kafka_bin("kafka-verifiable-share-consumer.sh")), "--bootstrap-server", bootstrap,
                                   "--topic", TOPIC, "--group-id", "g-share", "--verbose",
                                   "--offset-reset-strategy", "earliest"], line, log_dir)


def java_txn_copier(bootstrap: str, ledger: Ledger, log_dir: Path) -> JavaTool:
    """tests/tools/txn_copier/TxnCopier.java (Java clients, KIP-848 group, a third of the
    transactions aborted), compiled against the reference's jars."""
    home = find_kafka_home()
    assert home is not None
    classes = log_dir / "classes"
    subprocess.run(["javac", "-d", str(classes), "-cp", f"{home / 'libs'}/*", str(COPIER)], check=True, timeout=300)

    def line(d: dict[str, Any]) -> None:
        if d["name"] == "startup_complete":
            pass
        elif d["name"] in ("committed", "aborted"):
            ledger.counts[f"txn_{d['name']}"] += 1
        else:
            ledger.error(f"transactional copier: {d}")

    return JavaTool("java-txn-copier", ["java", "-Xmx192m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp",
                                        f"{home / 'libs'}/*:{classes}", "TxnCopier", bootstrap, TOPIC, TXN_OUT,
                                        "g-txn-copier", "mixed-copier", "consumer"], line, log_dir)


# ----------------------------------------------------------------------------- the engine


def engine_churn(bootstrap: str, stop: threading.Event, ledger: Ledger) -> None:
    """Topics created, written and deleted; DeleteRecords and keyed writes for compaction."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    # No auto-creation: librdkafka's producer asks for the metadata of every topic it wrote on its
    # periodic refresh (5 min) with auto-creation allowed, so each deleted churn topic came back
    # (as it would on Kafka) and a one-hour run ended with ~800 of them, growing the RSS.
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "log_level": 3,
                  "allow.auto.create.topics": False})
    n = 0
    while not stop.wait(2):
        n += 1
        name = f"churn-{n}"
        try:
            admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
            for i in range(20):
                p.produce(name, value=b"x%d" % i)
            for i in range(200):
                p.produce(COMPACT, key=b"key-%d" % (i % 20), value=b"v%d-%d" % (n, i) * 20)
                p.produce(RETENTION, value=b"r" * 200)
            if p.flush(30):
                ledger.error("churn producer: records never acknowledged")
            admin.delete_topics([name])[name].result(30)
            if n % 5 == 0:
                tp = TopicPartition(RETENTION, 0, -1)  # OFFSET_END: everything so far
                for f in admin.delete_records([tp]).values():
                    f.result(30)
                ledger.counts["delete_records"] += 1
            ledger.counts["topics_churned"] = n
        except Exception as e:  # noqa: BLE001 (recorded: the run fails on it)
            ledger.error(f"churn {n}: {e!r}")


def open_files(pid: int) -> dict[str, int]:
    """The server's open files: all, segment files (.log and indexes: one per segment, as in
    Kafka, growing with the data kept), files already deleted (a leak), and the rest (sockets,
    checkpoints, ...), which must stay flat."""
    out = {"all": 0, "segments": 0, "deleted": 0, "other": 0}
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return out
    for name in names:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{name}")
        except OSError:
            continue
        out["all"] += 1
        if target.endswith(" (deleted)"):
            out["deleted"] += 1
        elif target.endswith((".log", ".index", ".timeindex", ".txnindex")):
            out["segments"] += 1
        else:
            out["other"] += 1
    return out


def run(seconds: float, rate: float, sample: float, data_dir: Path, verbose: bool = True) -> dict[str, Any]:
    log_dir = data_dir.parent / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    server = SidecarProcess(data_dir, {
        "log.segment.bytes": str(1 << 20), "group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "4",
        "log.retention.check.interval.ms": "5000", "log.initial.task.delay.ms": "1000", "log.cleaner.backoff.ms": "1000",
        "transaction.state.log.num.partitions": "2", "share.coordinator.state.topic.num.partitions": "2",
        # Segments the cleaner or retention replaced stay open until deleted, file.delete.delay.ms
        # later (as in Kafka); each cleaning of the compacted topic renames its old base-0 segment
        # to the same .deleted name, unlinking the previous one: with the default 60 s about 24
        # such files were open at any time. At 5 s a held deleted file is a leak, not a wait.
        "log.segment.delete.delay.ms": "5000",
    })
    server.log_path = log_dir / "server.log"
    server.start()
    ledger = Ledger()
    stop, stop_consumers = threading.Event(), threading.Event()
    threads: list[threading.Thread] = []
    tools: list[JavaTool] = []
    bs = server.bootstrap
    samples: list[dict[str, Any]] = []
    result: dict[str, Any] = {}
    try:
        create_topic(server.port, TOPIC, partitions=PARTITIONS)
        create_topic(server.port, TXN_OUT, partitions=1)
        create_topic(server.port, COMPACT, partitions=1, configs={"cleanup.policy": "compact", "segment.bytes": "65536",
                                                                   "min.cleanable.dirty.ratio": "0.01", "segment.ms": "5000"})
        create_topic(server.port, RETENTION, partitions=1, configs={"segment.bytes": "65536", "retention.bytes": "200000"})

        def thread(target: Any, *args: Any) -> None:
            def body() -> None:
                try:
                    target(*args)
                except Exception as e:  # noqa: BLE001 (recorded: the run fails on it)
                    ledger.error(f"{target.__name__}: {e!r}")
            t = threading.Thread(target=body, name=target.__name__, daemon=True)
            t.start()
            threads.append(t)

        consumers = [(librdkafka_consumer, bs, "g-librdkafka", TOPIC, stop_consumers, ledger),
                     (librdkafka_consumer, bs, "g-txn-read", TXN_OUT, stop_consumers, ledger, True),
                     (kafka_python_consumer, bs, stop_consumers, ledger), (aiokafka_consumer, bs, stop_consumers, ledger)]
        for c in consumers:
            thread(*c)
        tools += [java_txn_copier(bs, ledger, log_dir).start(),
                  java_consumer(bs, "classic", ledger, log_dir).start(), java_consumer(bs, "consumer", ledger, log_dir).start(),
                  java_share_consumer(bs, ledger, log_dir).start(), java_producer(bs, rate, ledger, log_dir).start()]
        deadline = time.monotonic() + 300  # JVMs start slowly on a busy machine: the clock starts once all run
        for tool in tools:
            tool.started.wait(max(0.0, deadline - time.monotonic()))
        slow = [tool.name for tool in tools[:-1] if not tool.started.is_set()]
        if slow:
            ledger.error(f"Java clients not started within 300 s: {slow}")
        producer_threads = len(threads)
        for target in (librdkafka_producer, kafka_python_producer, aiokafka_producer):
            thread(target, bs, rate, stop, ledger)
        producers = threads[producer_threads:]
        thread(engine_churn, bs, stop, ledger)
        assert server.proc is not None
        started = time.monotonic()
        while time.monotonic() - started < seconds and server.proc.poll() is None:
            time.sleep(min(sample, max(0.1, seconds - (time.monotonic() - started))))
            with ledger.lock:
                seen = {g: len(c) for g, c in ledger.groups.items()}
                acked = len(ledger.acked)
            samples.append({"t": round(time.monotonic() - started), "rss_mib": round(rss_kib(server.proc.pid) / 1024, 1),
                            "open_files": open_files(server.proc.pid), "acked": acked, "consumed": seen})
            if verbose:
                print(json.dumps(samples[-1]), flush=True)
        if server.proc.poll() is not None:
            ledger.error("the server exited")
        stop.set()
        tools[-1].stop()  # the Java producer
        for t in producers:
            t.join(90)
        with ledger.lock:
            acked = dict(ledger.acked)
        values = set(acked.values())
        deadline = time.monotonic() + max(180, seconds / 10)
        groups = ("g-librdkafka", "g-kafka-python", "g-aiokafka", "g-java-classic", "g-java-consumer", "share")

        def caught_up() -> bool:
            with ledger.lock:
                return (all(acked.keys() <= ledger.groups.get(g, Counter()).keys() for g in groups)
                        and values <= ledger.txn_out.keys())

        while time.monotonic() < deadline and not caught_up():
            time.sleep(1)
        stop_consumers.set()
        for tool in tools[:-1]:
            tool.stop()
        for t in threads:
            t.join(60)
        report: dict[str, Any] = {}
        with ledger.lock:
            for g in groups:
                seen = ledger.groups.get(g, Counter())
                lost = [k for k in acked if k not in seen]
                dup = sum(1 for k in acked if seen[k] > 1)
                report[g] = {"consumed": sum(seen[k] for k in acked), "lost": len(lost), "duplicated": dup}
            txn_lost = len(values - ledger.txn_out.keys())
            txn_dup = sum(1 for v in values if ledger.txn_out[v] > 1)
            report["txn (mixed -> mixed-txn-out, read back read_committed)"] = {
                "copied": sum(ledger.txn_out[v] for v in values), "lost": txn_lost, "duplicated": txn_dup}
        failed = [g for g, r in report.items() if r["lost"] or (r["duplicated"] and g != "share")]
        log_errors = [line for line in server.log_text().splitlines() if " ERROR " in line or "Traceback" in line]
        warm = [s for s in samples if s["t"] >= seconds * 0.25] or samples
        rss_growth = (samples[-1]["rss_mib"] - warm[0]["rss_mib"]) if samples else 0
        files_growth = (samples[-1]["open_files"]["other"] - warm[0]["open_files"]["other"]) if samples else 0
        deleted_held = max((s["open_files"]["deleted"] for s in warm), default=0)
        result = {
            "seconds": seconds, "rate_per_producer": rate, "records_acknowledged": len(acked),
            "by_producer": dict(Counter("java" if v[:2] == b"7." else v.rsplit(b"-", 1)[0].decode() for v in acked.values())),
            "groups": report, "counts": dict(ledger.counts), "errors": ledger.errors[:20], "server_log_errors": log_errors[:10],
            "rss_mib": {"after_warmup": warm[0]["rss_mib"] if warm else 0, "end": samples[-1]["rss_mib"] if samples else 0,
                        "max": max((s["rss_mib"] for s in samples), default=0)},
            "open_files": {"after_warmup": warm[0]["open_files"] if warm else {}, "end": samples[-1]["open_files"] if samples else {},
                           "deleted_files_held_max": deleted_held},
            "samples": samples,
        }
        ok = (not failed and not ledger.errors and not log_errors and len(acked) > 0
              and rss_growth < max(20.0, (warm[0]["rss_mib"] if warm else 0) * 0.25) and files_growth < 50 and deleted_held < 20)
        if server.stop() != 0:
            ok = False
            result["errors"].append("unclean stop")
        disk = problems(verify_data_dir(data_dir, strict=True))
        result["segment_problems"] = disk[:10]
        result["ok"] = ok and not disk
        return result
    finally:
        stop.set()
        stop_consumers.set()
        for tool in tools:
            tool.stop()
        if server.proc is not None and server.proc.poll() is None:
            server.kill()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.soak.mixed", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=3600)
    parser.add_argument("--rate", type=float, default=100, help="records per second per producer")
    parser.add_argument("--sample", type=float, default=60, help="seconds between RSS/open-files samples")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="kafka-sidecar-soak-mixed-"))
    result = run(args.seconds, args.rate, args.sample, tmp / "data", verbose=not args.quiet)
    print(json.dumps(result, indent=1))
    if result.get("ok"):
        shutil.rmtree(tmp, ignore_errors=True)
        return 0
    print(f"FAILED (data dir and client logs kept: {tmp})", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
