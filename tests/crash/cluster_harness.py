"""Crash harness over ``serve --processes 2``: kill -9 one node or the whole group, restart, check.

    python -m tests.crash.cluster_harness --iterations 300 --seed 7 [--data-dir DIR] [--keep]

The real command, ``kafka-sidecar serve --processes 2`` (a supervisor and two node processes, in
a process group of their own), with the single-node harness's tiny segments and short retention,
cleaner, flush and checkpoint intervals (tests/crash/harness.py). Every topic has partitions led
by both nodes. Each iteration:

1. start the cluster if it is down (every node recovers: no clean-shutdown marker), and open two
   transactional producers whose ``InitProducerId`` settles what the previous life left open (one
   transactional id coordinated by each node);
2. check through the Kafka protocol, each partition at its leader: every acknowledged record once,
   at its offset, in send order, the log start offset never back (``check_partition`` of the
   single-node harness); the transactional topic read as read_committed (Fetch with
   isolation_level 1: the last stable offset and the aborted transactions the broker answers):
   every committed transaction's records exactly once at their acknowledged offsets, no record of
   an aborted one, a transaction whose commit was in flight either whole or absent, never half;
   the committed offsets of two groups (one coordinated by each node, offsets of partitions on
   both) at least what the last acknowledged OffsetCommit set, at most what was sent; and every
   segment of every node's dir with ``kafka_sidecar.storage.verify``;
3. produce with acks=all (confluent-kafka: an idempotent producer, one with retries off),
   transactions over partitions of both nodes (commits and aborts, in a thread each), and offset
   commits (a thread each), recording every acknowledgement;
4. crash: SIGKILL one node after a random time (the supervisor restarts it) or at a storage crash
   point armed in that node only (``KAFKA_SIDECAR_CRASH_AT`` with ``KAFKA_SIDECAR_CRASH_ARM=signal``
   and SIGUSR1 sent to that node's pid); or SIGKILL the whole group (supervisor and nodes at once,
   ``killpg``) after a random time, right after a node died at its crash point, or while the
   cluster is starting; the harness then starts it again.

At the end the cluster is stopped with SIGTERM and every node's segments must pass the strict
check. Prints one line per iteration and a JSON summary; exits 1 on the first failure (the data
dir is kept for inspection).
"""

from __future__ import annotations

import os
import queue
import random
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException, Producer
from kafka_sidecar.protocol.records import decode_batches
from kafka_sidecar.server.cluster.placement import leader_of
from kafka_sidecar.storage.failpoints import ARM_ENV
from kafka_sidecar.storage.failpoints import ENV as CRASH_ENV

from tests.conformance.wire import Wire
from tests.crash.harness import (
    COMPACT,
    COMPACT_KEYS,
    CRASH_POINTS,
    KEEP,
    RETAIN,
    SERVER_OVERRIDES,
    Acked,
    CrashStats,
    HarnessFailure,
    Ledger,
    LifeTimer,
    _parse,
    _value,
    book_acks,
    check_partition,
    cli,
    trim_partitions,
)
from tests.crash.harness import check_disk as harness_check_disk
from tests.integration.test_bad_input import create_topic
from tests.support import cluster_node_pids, sidecar_command

NODES = 2
TXN = "crash-txn"
TOPICS: dict[str, tuple[int, dict[str, str]]] = {
    KEEP: (4, {"retention.ms": "-1", "preallocate": "true"}),
    RETAIN: (2, {"retention.bytes": "49152", "retention.ms": "-1"}),
    COMPACT: (2, {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01", "segment.bytes": "8192"}),
    TXN: (4, {"retention.ms": "-1"}),
}
CLUSTER_OVERRIDES = {
    **SERVER_OVERRIDES,
    "offsets.topic.num.partitions": "4",
    "transaction.state.log.num.partitions": "4",
    "group.initial.rebalance.delay.ms": "0",
    # Active segments' indexes preallocated to 64 KiB, not 10 MiB: the file check after each
    # restart reads them whole (a 16 KiB segment has at most 32 index entries of 8 bytes).
    "log.index.size.max.bytes": "65536",
}
FETCH, OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR = 1, 8, 9, 10
CONTROL_ABORT, CONTROL_COMMIT = 0, 1
QUIET = {"log_level": 0}


# ---------------------------------------------------------------------------- the cluster


class ClusterProcess:
    """``kafka-sidecar serve --processes 2`` in a session of its own (so ``killpg`` takes the
    supervisor and every node at once); its stdout read by a thread (node restarts are announced
    there, and a full pipe would block the supervisor)."""

    def __init__(self, data_dir: Path, overrides: dict[str, str]) -> None:
        self.data_dir = data_dir
        self.overrides = overrides
        self.env: dict[str, str] = {}
        self.proc: subprocess.Popen[str] | None = None
        self.ports: list[int] = []
        self.log_path = data_dir.parent / f"{data_dir.name}.server.log"
        self.lines: queue.Queue[str | None] = queue.Queue()

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.ports)

    def port_of(self, node: int) -> int:
        return self.ports[node - 1]

    def launch(self) -> None:
        cmd = [*sidecar_command(), "serve", "--processes", str(NODES), "--data-dir", str(self.data_dir), "--listen", "127.0.0.1:0"]
        for k, v in self.overrides.items():
            cmd += ["--override", f"{k}={v}"]
        self.lines = queue.Queue()
        with open(self.log_path, "a") as log:
            self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL, text=True,
                                         env={**os.environ, **self.env}, start_new_session=True)
        threading.Thread(target=self._read, args=(self.proc, self.lines), daemon=True).start()

    @staticmethod
    def _read(proc: subprocess.Popen[str], lines: queue.Queue[str | None]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    def wait_line(self, prefix: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                raise HarnessFailure(f"no {prefix!r} line in {timeout:.0f} s: {self.log_tail()}") from None
            if line is None:
                raise HarnessFailure(f"the cluster exited ({self.proc.poll() if self.proc else None}) waiting for {prefix!r}: {self.log_tail()}")
            if line.startswith(prefix):
                return line

    def start(self, timeout: float = 120.0) -> None:
        self.launch()
        line = self.wait_line("kafka-sidecar listening on ", timeout)
        self.ports = [int(p) for p in re.findall(r"127\.0\.0\.1:(\d+) \[node \d+\]", line)]
        if len(self.ports) != NODES:
            raise HarnessFailure(f"ready line without {NODES} nodes: {line}")

    def node_pids(self) -> dict[int, int]:
        assert self.proc is not None
        return cluster_node_pids(self.proc.pid)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill_group(self) -> None:
        """SIGKILL the supervisor and every node at once (their process group)."""
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        deadline = time.monotonic() + 10
        # Nodes are the group's too: wait until none is left (they are reaped by init).
        while time.monotonic() < deadline:
            try:
                os.killpg(self.proc.pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.02)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self.proc = None

    def stop(self, timeout: float = 90.0) -> int:
        """SIGTERM: the supervisor stops every node cleanly."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill_group()
            return -9
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self.proc = None
        return code

    def log_tail(self, n: int = 3000) -> str:
        try:
            return self.log_path.read_text()[-n:]
        except FileNotFoundError:
            return ""


# ------------------------------------------------------------------------- the workloads


@dataclass
class Txn:
    """One transaction of one transactional producer."""

    txn_id: str
    number: int
    sent: dict[bytes, tuple[str, int]] = field(default_factory=dict)  # value -> (topic, partition)
    acked: dict[bytes, tuple[int, int]] = field(default_factory=dict)  # value -> (partition, offset)
    # "open" (no commit or abort asked), "committing" (asked, no answer), "committed", "aborted"
    outcome: str = "open"


@dataclass
class ClusterLedger(Ledger):
    txns: dict[tuple[str, int], Txn] = field(default_factory=dict)
    txn_by_value: dict[bytes, Txn] = field(default_factory=dict)
    # group -> partition -> committed offset acknowledged / highest sent
    commits_acked: dict[str, dict[int, int]] = field(default_factory=lambda: defaultdict(dict))
    commits_sent: dict[str, dict[int, int]] = field(default_factory=lambda: defaultdict(dict))
    commit_counter: int = 0
    txn_seen_to: dict[int, int] = field(default_factory=dict)  # TXN partition -> records checked below


@dataclass
class Stats(CrashStats):
    slowest_start_ms: float = 0.0
    slowest_node_restart_ms: float = 0.0
    txns: Counter = field(default_factory=Counter)
    txn_records_checked: int = 0
    commits_acked: int = 0
    commits_checked: int = 0


def _txn_value(txn: Txn, seq: int, pad: int) -> bytes:
    return b"%s|%s|%d|%d|" % (TXN.encode(), txn.txn_id.encode(), txn.number, seq) + b"." * pad


class TxnWorker(threading.Thread):
    """One transactional producer: transactions over every partition of the transactional topic
    (so over both nodes), committed or aborted at random, until told to stop."""

    def __init__(self, producer: Producer, txn_id: str, ledger: ClusterLedger, rng: random.Random, lock: threading.Lock) -> None:
        super().__init__(daemon=True, name=f"txn-{txn_id}")
        self.producer = producer
        self.txn_id = txn_id
        self.ledger = ledger
        self.rng = random.Random(rng.random())
        self.lock = lock
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.ended_by: KafkaException | None = None

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                self._one()
        except KafkaException as e:
            self.ended_by = e  # the cluster died under it: the transaction's state is what the ledger says
        except BaseException as e:  # a harness bug: reported by the main thread
            self.error = e

    def _one(self) -> None:
        with self.lock:
            number = 1 + max((n for (t, n) in self.ledger.txns if t == self.txn_id), default=0)
            txn = Txn(self.txn_id, number)
            self.ledger.txns[(self.txn_id, number)] = txn
        self.producer.begin_transaction()
        pad = self.rng.randint(10, 200)
        partitions = TOPICS[TXN][0]

        def on_delivery(err, msg) -> None:
            if err is None:
                with self.lock:
                    txn.acked[msg.value()] = (msg.partition(), msg.offset())

        for seq in range(self.rng.randint(partitions, 6 * partitions)):
            value = _txn_value(txn, seq, pad)
            p = seq % partitions  # every partition: both nodes
            with self.lock:
                txn.sent[value] = (TXN, p)
                self.ledger.txn_by_value[value] = txn
            self.producer.produce(TXN, value=value, partition=p, on_delivery=on_delivery)
            self.producer.poll(0)
        deadline = time.monotonic() + 15
        while self.producer.flush(0.1) != 0:
            if self.stop.is_set() or time.monotonic() > deadline:
                return  # left open: the next life's InitProducerId aborts it
        if self.stop.is_set():
            return
        # Short timeouts: after a kill of the whole group nothing answers until the next life.
        if self.rng.random() < 0.3:
            self.producer.abort_transaction(5)
            txn.outcome = "aborted"
        else:
            txn.outcome = "committing"
            self.producer.commit_transaction(5)
            txn.outcome = "committed"


class CommitWorker(threading.Thread):
    """Offset commits of growing offsets of partitions led by both nodes to a group, one at a time
    (OffsetCommit v9 to the group's coordinator, as a consumer with manual assignment commits:
    generation -1, no member), until told to stop; what each answer acknowledged goes in the
    ledger. Raw requests with a socket timeout, so a dead coordinator never blocks the stop."""

    def __init__(self, port: int, group: str, ledger: ClusterLedger, lock: threading.Lock) -> None:
        super().__init__(daemon=True, name=f"commit-{group}")
        self.port = port
        self.group = group
        self.ledger = ledger
        self.lock = lock
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        wire: Wire | None = None
        try:
            while not self.stop.is_set():
                try:
                    if wire is None:
                        wire = Wire(f"127.0.0.1:{self.port}", client_id="crash-committer", timeout=5)
                    with self.lock:
                        self.ledger.commit_counter += 1
                        n = self.ledger.commit_counter
                        sent = self.ledger.commits_sent[self.group]
                        for p in range(TOPICS[KEEP][0]):
                            sent[p] = n
                    body = wire.call(OFFSET_COMMIT, 9, {
                        "group_id": self.group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
                        "topics": [{"name": KEEP, "partitions": [
                            {"partition_index": p, "committed_offset": n, "committed_leader_epoch": -1, "committed_metadata": ""}
                            for p in range(TOPICS[KEEP][0])]}]})
                except (OSError, EOFError):
                    if wire is not None:
                        wire.close()
                        wire = None
                    time.sleep(0.05)
                    continue
                with self.lock:
                    for t in body["topics"]:
                        for p in t["partitions"]:
                            if p["error_code"] == 0:
                                self.ledger.commits_acked[self.group][p["partition_index"]] = n
                time.sleep(0.005)
        except BaseException as e:
            self.error = e
        finally:
            if wire is not None:
                wire.close()


# ------------------------------------------------------------------------------ checking


def check_transactions(cluster: ClusterProcess, ledger: ClusterLedger, timeout: float = 30.0) -> int:
    """Read every partition of the transactional topic as read_committed at its leader (Fetch v12,
    isolation_level 1, the broker's aborted transactions applied as a Kafka consumer does) and
    check them against the transactions' ledger: committed ones whole, aborted and open ones
    absent, one whose commit was in flight whole or absent over all partitions. Returns how many
    records were read."""
    seen: dict[bytes, tuple[int, int]] = {}
    for partition in range(TOPICS[TXN][0]):
        where = f"{TXN}-{partition}"
        deadline = time.monotonic() + timeout
        port = cluster.port_of(leader_of(TXN, partition, NODES))
        with Wire(f"127.0.0.1:{port}", client_id="crash-check-txn", timeout=20) as w:
            while True:
                visible, lso, hw = _read_committed(w, partition)
                if lso == hw:
                    break
                if time.monotonic() > deadline:
                    raise HarnessFailure(f"{where}: last stable offset {lso} stays below the high watermark {hw} "
                                         f"after both transactional ids were initialised")
                time.sleep(0.2)
        for offset, value in visible:
            if value in seen:
                raise HarnessFailure(f"{where}: {value[:40]!r} visible twice (at {seen[value]} and offset {offset})")
            seen[value] = (partition, offset)
            txn = ledger.txn_by_value.get(value)
            if txn is None:
                raise HarnessFailure(f"{where}: offset {offset} holds {value[:40]!r}, never sent")
            if txn.outcome.startswith("aborted") or txn.outcome == "open":
                raise HarnessFailure(f"{where}: offset {offset}: {value[:40]!r} of {txn.outcome} transaction "
                                     f"{txn.txn_id}#{txn.number} is visible to read_committed")
            acked = txn.acked.get(value)
            if acked is not None and acked != (partition, offset):
                raise HarnessFailure(f"{where}: {value[:40]!r} acknowledged at {acked}, read at offset {offset}")
    for txn in ledger.txns.values():
        mine = set(txn.sent)
        shown = mine & seen.keys()
        name = f"transaction {txn.txn_id}#{txn.number}"
        if txn.outcome.startswith("committed") and shown != mine:
            raise HarnessFailure(f"committed {name}: {len(mine - shown)} of its {len(mine)} records are missing")
        if txn.outcome == "committing":
            if shown and shown != mine:
                raise HarnessFailure(f"{name} (commit in flight at the crash) is half visible: {len(shown)} of {len(mine)} records")
            # InitProducerId settled it: visible whole (committed) or not at all (aborted).
            txn.outcome = "committed (in doubt)" if shown else "aborted (in doubt)"
        elif txn.outcome == "open":
            txn.outcome = "aborted (left open)"
    return len(seen)


def _read_committed(w: Wire, partition: int) -> tuple[list[tuple[int, bytes]], int, int]:
    """(visible (offset, value)s, last stable offset, high watermark) of a read_committed read."""
    offset = 0
    visible: list[tuple[int, bytes]] = []
    aborted_pids: set[int] = set()
    pending: list[tuple[int, int]] = []  # (first offset, producer id) of aborted transactions
    lso = hw = 0
    for _ in range(100_000):
        body = w.call(FETCH, 12, {
            "replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 1,
            "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": TXN, "partitions": [{
                "partition": partition, "current_leader_epoch": -1, "fetch_offset": offset,
                "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": "",
        })
        (p,) = body["responses"][0]["partitions"]
        if p["error_code"] != 0:
            raise HarnessFailure(f"{TXN}-{partition}: read_committed fetch at {offset}: error {p['error_code']}")
        lso, hw = p["last_stable_offset"], p["high_watermark"]
        for a in p["aborted_transactions"] or []:
            if (a["first_offset"], a["producer_id"]) not in pending:
                pending.append((a["first_offset"], a["producer_id"]))
        pending.sort()
        for b in decode_batches(p["records"] or b"", verify_crc=True):
            if b.next_offset <= offset:
                continue
            while pending and pending[0][0] <= b.last_offset:
                aborted_pids.add(pending.pop(0)[1])
            if b.is_control:
                ctype = int.from_bytes(b.records[0].key[2:4], "big") if b.records and b.records[0].key else -1
                if ctype == CONTROL_ABORT:
                    aborted_pids.discard(b.producer_id)
            elif not (b.is_transactional and b.producer_id in aborted_pids):
                visible.extend((r.offset, r.value) for r in b.records if r.offset >= offset)
            offset = b.next_offset
        if offset >= lso:
            return visible, lso, hw
    raise HarnessFailure(f"{TXN}-{partition}: read_committed read did not end")


def find_coordinator(port: int, key: str, key_type: int, timeout: float = 60.0) -> int:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with Wire(f"127.0.0.1:{port}", timeout=10) as w:
                c = w.call(FIND_COORDINATOR, 4, {"key_type": key_type, "coordinator_keys": [key]})["coordinators"][0]
            if c["error_code"] == 0:
                return c["node_id"]
        except (OSError, EOFError):
            pass
        if time.monotonic() > deadline:
            raise HarnessFailure(f"FindCoordinator {key!r}: no coordinator in {timeout:.0f} s")
        time.sleep(0.2)


def check_commits(cluster: ClusterProcess, ledger: ClusterLedger, groups: dict[str, int], stats: Stats) -> None:
    """Every group's committed offsets: at least the last acknowledged, at most the last sent."""
    for group, node in groups.items():
        deadline = time.monotonic() + 30
        while True:
            try:
                with Wire(f"127.0.0.1:{cluster.port_of(node)}", client_id="crash-check-offsets", timeout=10) as w:
                    body = w.call(OFFSET_FETCH, 7, {"group_id": group, "topics": [
                        {"name": KEEP, "partition_indexes": list(range(TOPICS[KEEP][0]))}], "require_stable": True})
            except (OSError, EOFError):
                body = {"error_code": -1}
            if body["error_code"] == 0 and all(p["error_code"] == 0 for t in body["topics"] for p in t["partitions"]):
                break
            if time.monotonic() > deadline:
                raise HarnessFailure(f"OffsetFetch {group} at node {node} failed: {body}")
            time.sleep(0.2)
        for t in body["topics"]:
            for p in t["partitions"]:
                i, got = p["partition_index"], p["committed_offset"]
                acked = ledger.commits_acked[group].get(i, -1)
                sent = ledger.commits_sent[group].get(i, -1)
                if got < acked:
                    raise HarnessFailure(f"group {group} (coordinator node {node}): {KEEP}-{i} committed offset {got}, "
                                         f"but {acked} was acknowledged as committed")
                if got > sent:
                    raise HarnessFailure(f"group {group}: {KEEP}-{i} committed offset {got}, never sent (last sent {sent})")
                # What it holds now is the floor from here on (an in-flight commit may have landed).
                ledger.commits_acked[group][i] = got
                stats.commits_checked += 1


# What storage/verify.py says of a zero tail: a header of zeros (magic 0), or, when fewer bytes
# than a batch header are left before the file's end, "stray bytes" (seen once in 127 iterations:
# 55 zeros at 16,329 of a 16,384-byte preallocated segment).
_ZERO_TAIL = re.compile(r"position (\d+): magic 0, not a v2 batch|stray bytes at position (\d+) \(a torn batch\)")


def check_disk(node_dir: Path, strict: bool = False, attempts: int = 4) -> int:
    """Every segment of the harness's topics in one node's dir passes the verifier
    (tests/crash/harness.py's check_disk). A node that was not restarted still appends to its
    preallocated active segments: their zero tail (what ``preallocate`` leaves after the last
    batch, cut at the next recovery or roll) is no problem here, only in the strict check after
    a clean stop."""

    def live_tails(reports: dict[str, list[Any]]) -> None:
        for segments in reports.values():
            if segments:
                active = segments[-1]
                active.problems = [p for p in active.problems if not _zero_tail(active.log_path, p)]

    return harness_check_disk(node_dir, strict, attempts, where=f"{node_dir.name}: ", adjust=None if strict else live_tails)


def _zero_tail(log_path: Path, problem: str) -> bool:
    m = _ZERO_TAIL.search(problem)
    if m is None:
        return False
    with open(log_path, "rb") as f:
        f.seek(int(m.group(1) or m.group(2)))
        return not f.read().strip(b"\0")


def check_all(cluster: ClusterProcess, ledger: ClusterLedger, groups: dict[str, int], stats: Stats) -> None:
    for topic, (partitions, _) in TOPICS.items():
        for p in range(partitions):
            port = cluster.port_of(leader_of(topic, p, NODES))
            if topic != TXN:
                stats.records_checked += _retrying(lambda: check_partition(port, topic, p, ledger))  # noqa: B023
    stats.txn_records_checked += check_transactions(cluster, ledger)
    check_commits(cluster, ledger, groups, stats)
    for node in range(1, NODES + 1):
        stats.segments_checked += check_disk(cluster.data_dir / f"node-{node}")


def _retrying(fn, attempts: int = 3):
    """A check over a fresh connection, again if the connection breaks (a node just restarted)."""
    for attempt in range(attempts):
        try:
            return fn()
        except (OSError, EOFError):
            if attempt == attempts - 1:
                raise
            time.sleep(0.5)
    return None


def trim_keep_topic(cluster: ClusterProcess, ledger: ClusterLedger, rng: random.Random, keep: int = 2000) -> None:
    """DeleteRecords on the keep topic, each partition at its leader (bounds the checks)."""
    trim_partitions(lambda p: cluster.port_of(leader_of(KEEP, p, NODES)), TOPICS[KEEP][0], ledger, rng, keep)


# ----------------------------------------------------------------------------- one life


def _producer(bootstrap: str, idempotent: bool) -> Producer:
    conf = {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 2, "batch.num.messages": 50,
            "message.timeout.ms": 15000, "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 200,
            "batch.size": 7000, **QUIET}  # the compacted topic's segments are 8 KiB
    if idempotent:
        conf["enable.idempotence"] = True
    else:
        conf.update({"enable.idempotence": False, "retries": 0})
    return Producer(conf)


def init_txn_producers(cluster: ClusterProcess, txn_ids: dict[str, int]) -> dict[str, Producer]:
    """A transactional producer per id; InitProducerId fences the previous life's and settles its
    open transaction (aborted, or its commit completed)."""
    out = {}
    for txn_id in txn_ids:
        p = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": txn_id, "transaction.timeout.ms": 60000,
                      "linger.ms": 2, "message.timeout.ms": 15000, "reconnect.backoff.ms": 50,
                      "reconnect.backoff.max.ms": 200, **QUIET})
        try:
            p.init_transactions(90)
        except KafkaException as e:
            raise HarnessFailure(f"init_transactions({txn_id}) failed after a restart: {e}") from None
        out[txn_id] = p
    return out


def run_life(cluster: ClusterProcess, ledger: ClusterLedger, iteration: int, rng: random.Random, txn_producers: dict[str, Producer],
             groups: dict[str, int], kill: str, node: int, kill_after: float | None, max_seconds: float) -> tuple[int, str]:
    """Produce, transact and commit until the crash this iteration is for. Returns (records
    acknowledged, how it ended)."""
    lock = threading.Lock()
    lock_free: list[tuple[tuple[str, int], Acked]] = []

    def on_delivery(err, msg) -> None:
        if err is None:
            tag, it, seq, _ = _parse(msg.value())
            lock_free.append(((msg.topic(), msg.partition()), Acked(msg.offset(), msg.key(), msg.value(), (it, seq))))

    keep_producer = _producer(cluster.bootstrap, idempotent=True)
    other_producer = _producer(cluster.bootstrap, idempotent=False)
    workers: list[TxnWorker | CommitWorker] = [TxnWorker(p, t, ledger, rng, lock) for t, p in txn_producers.items()]
    for group, coordinator in groups.items():
        workers.append(CommitWorker(cluster.port_of(coordinator), group, ledger, lock))
    for w in workers:
        w.start()
    pad = rng.randint(20, 300)
    timer = LifeTimer(rng, kill_after)
    ended = "timer"
    seq = 0
    pids = cluster.node_pids()
    try:
        while True:
            elapsed = timer.elapsed()
            if timer.trim_due(elapsed):
                trim_keep_topic(cluster, ledger, rng)
            if kill_after is None:
                pid = pids.get(node)
                if pid is None or not Path(f"/proc/{pid}").exists() or _zombie(pid):
                    ended = "crash point"
                    break
            if timer.kill_due(bool(lock_free)):
                break
            if elapsed > max_seconds:
                if kill_after is None:
                    ended = "not reached in time: SIGKILL"
                break
            try:
                for _ in range(10):
                    seq += 1
                    keep_producer.produce(KEEP, value=_value(KEEP, iteration, seq, None, pad), partition=seq % TOPICS[KEEP][0],
                                          on_delivery=on_delivery)
                    other_producer.produce(RETAIN, value=_value(RETAIN, iteration, seq, None, pad), partition=seq % TOPICS[RETAIN][0],
                                           on_delivery=on_delivery)
                    key = b"k%03d" % rng.randrange(COMPACT_KEYS)
                    other_producer.produce(COMPACT, key=key, value=_value(COMPACT, iteration, seq, key, pad),
                                           partition=rng.randrange(TOPICS[COMPACT][0]), on_delivery=on_delivery)
            except BufferError:
                pass
            keep_producer.poll(0.02)  # a steady load, not a flood: the transactions need their turn
            other_producer.poll(0)
            for w in workers:
                if w.error is not None:
                    raise HarnessFailure(f"{w.name}: {w.error!r}")
    finally:
        for w in workers:
            w.stop.set()  # no new transaction or commit once the crash is due
        # The crash itself.
        if kill.startswith("node") and ended != "crash point":
            pid = pids.get(node)
            if pid is not None:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        if kill.startswith("group"):
            cluster.kill_group()
        for p in (keep_producer, other_producer):
            p.purge(in_queue=True, in_flight=True)
            p.flush(10)
        for w in workers:
            w.stop.set()
        for w in workers:
            w.join(60)
            if w.is_alive():
                raise HarnessFailure(f"{w.name} did not stop in 60 s")
        for p in txn_producers.values():
            p.purge(in_queue=True, in_flight=True)
            p.flush(5)
    acks = book_acks(ledger, lock_free)
    for w in workers:
        if w.error is not None:
            raise HarnessFailure(f"{w.name}: {w.error!r}")
    return acks, ended


def _zombie(pid: int) -> bool:
    """Whether ``pid`` is dead or a zombie. A process reaped between the open of its stat file
    and the read makes the read fail with ESRCH (ProcessLookupError): dead too (it stopped two
    runs at iterations 73 and 504)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def wait_node_restarted(cluster: ClusterProcess, node: int, old_pid: int | None, timeout: float = 120.0) -> float:
    """Wait for the supervisor's "node <k> restarted" line; milliseconds it took."""
    t0 = time.monotonic()
    line = cluster.wait_line(f"kafka-sidecar node {node} restarted", timeout)
    new = cluster.node_pids().get(node)
    if new is None or new == old_pid:
        raise HarnessFailure(f"node {node} announced a restart but its pid is {new} (was {old_pid}): {line}")
    return (time.monotonic() - t0) * 1000


def start_cluster(cluster: ClusterProcess, stats: Stats, rng: random.Random, env: dict[str, str]) -> None:
    """Start the whole group (every node recovers); sometimes SIGKILL it while it starts first."""
    for _ in range(5):
        if rng.random() < 0.08:
            cluster.env = {}
            cluster.launch()
            time.sleep(rng.uniform(0.05, 1.0))
            cluster.kill_group()
            stats.startup_crashes += 1
            stats.kills["group while starting"] += 1
            continue
        break
    cluster.env = env
    t0 = time.monotonic()
    cluster.start(timeout=180)
    stats.slowest_start_ms = max(stats.slowest_start_ms, (time.monotonic() - t0) * 1000)


def pick_keys(port: int, key_type: int, prefix: str) -> dict[str, int]:
    """One key coordinated by each node (FindCoordinator): key -> node."""
    out: dict[int, str] = {}
    for i in range(200):
        key = f"{prefix}-{i}"
        node = find_coordinator(port, key, key_type)
        out.setdefault(node, key)
        if len(out) == NODES:
            return {k: n for n, k in sorted(out.items())}
    raise HarnessFailure(f"no {prefix} key coordinated by every node")


KILLS = ("node-timer", "node-crash-point", "group-timer", "group-crash-point")


def run(iterations: int, seed: int, data_dir: Path, verbose: bool = True) -> Stats:
    rng = random.Random(seed)
    stats = Stats()
    ledger = ClusterLedger()
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    cluster = ClusterProcess(data_dir, CLUSTER_OVERRIDES)
    cluster.start(timeout=180)
    try:
        return _run(cluster, iterations, rng, stats, ledger, verbose)
    finally:
        if cluster.alive():
            cluster.kill_group()


def _run(cluster: ClusterProcess, iterations: int, rng: random.Random, stats: Stats, ledger: ClusterLedger, verbose: bool) -> Stats:
    for topic, (partitions, configs) in TOPICS.items():
        create_topic(cluster.port_of(1 + len(topic) % NODES), topic, partitions=partitions, configs=configs)
        with Wire(f"127.0.0.1:{cluster.port_of(1)}") as w:
            md = w.metadata([topic])
        leaders = {p["partition_index"]: p["leader_id"] for p in md["topics"][0]["partitions"]}
        if leaders != {p: leader_of(topic, p, NODES) for p in range(partitions)} or set(leaders.values()) != set(range(1, NODES + 1)):
            raise HarnessFailure(f"{topic}: leaders {leaders}, not spread over both nodes as placement says: {md}")
    txn_ids = pick_keys(cluster.port_of(1), 1, "crash-txn-id")
    groups = pick_keys(cluster.port_of(1), 0, "crash-group")
    cluster.kill_group()
    # The crash point armed in this life's nodes (fixed when the group starts: nodes inherit it).
    point = rng.choice(sorted(CRASH_POINTS))
    for iteration in range(1, iterations + 1):
        t = [time.monotonic()]
        if not cluster.alive():
            point = rng.choice(sorted(CRASH_POINTS))
            lo, hi = CRASH_POINTS[point]
            start_cluster(cluster, stats, rng, {CRASH_ENV: f"{point}:{rng.randint(lo, hi)}", ARM_ENV: "signal"})
        t.append(time.monotonic())
        txn_producers = init_txn_producers(cluster, txn_ids)
        t.append(time.monotonic())
        check_all(cluster, ledger, groups, stats)
        t.append(time.monotonic())
        # Each kind once first (so a short run has them all), then at random.
        kill = KILLS[iteration - 1] if iteration <= len(KILLS) else rng.choice(KILLS)
        node = rng.randint(1, NODES)
        pids = cluster.node_pids()
        kill_after = None
        if kill.endswith("crash-point"):
            os.kill(pids[node], signal.SIGUSR1)  # arms the crash point in that node only
        else:
            kill_after = rng.uniform(0.05, 1.0)
        acks, ended = run_life(cluster, ledger, iteration, rng, txn_producers, groups, kill, node, kill_after, max_seconds=4.0)
        t.append(time.monotonic())
        what = f"{kill} node {node}" + (f" ({point})" if kill.endswith("crash-point") else "")
        if ended != "timer":
            what += f": {ended}"
        stats.kills[kill if ended != "not reached in time: SIGKILL" else f"{kill} (not reached: timer)"] += 1
        if kill.startswith("node"):
            ms = wait_node_restarted(cluster, node, pids.get(node))
            stats.slowest_node_restart_ms = max(stats.slowest_node_restart_ms, ms)
        t.append(time.monotonic())
        stats.acked += acks
        stats.iterations = iteration
        phases = "/".join(f"{b - a:.1f}" for a, b in zip(t, t[1:], strict=False))
        if verbose:
            print(f"iteration {iteration}: {what}, {acks} acknowledged, ledger {ledger.total()}, "
                  f"transactions {len(ledger.txns)}, commit {ledger.commit_counter}; "
                  f"start/init/check/life/restart {phases} s", flush=True)
    # Final: start, settle, check, stop cleanly, strict file check.
    if not cluster.alive():
        start_cluster(cluster, stats, random.Random(0), {})
    txn_producers = init_txn_producers(cluster, txn_ids)
    check_all(cluster, ledger, groups, stats)
    for p in txn_producers.values():
        p.flush(5)
    code = cluster.stop()
    if code != 0:
        raise HarnessFailure(f"clean stop failed (exit {code}): {cluster.log_tail()}")
    for node in range(1, NODES + 1):
        stats.segments_checked += check_disk(cluster.data_dir / f"node-{node}", strict=True, attempts=1)
    stats.txns = Counter(t.outcome for t in ledger.txns.values())
    stats.commits_acked = sum(len(v) for v in ledger.commits_acked.values())
    return stats


def main(argv: list[str] | None = None) -> int:
    def summary(stats: Stats) -> dict[str, Any]:
        return {
            "transactions": dict(sorted(stats.txns.items())),
            "transactional_records_checked": stats.txn_records_checked,
            "offset_commits_checked": stats.commits_checked,
            "segments_verified": stats.segments_checked,
            "slowest_cluster_start_ms": round(stats.slowest_start_ms),
            "slowest_node_restart_ms": round(stats.slowest_node_restart_ms),
        }

    return cli(argv, "python -m tests.crash.cluster_harness", __doc__ or "", "kafka-sidecar-crash-cluster-",
               lambda n, seed, data_dir, verbose: run(n, seed, data_dir, verbose=verbose), summary, (HarnessFailure,))


if __name__ == "__main__":
    sys.exit(main())
