"""``kafka-sidecar produce``: each stdin line sent as it arrives, as kcat -P and
kafka-console-producer.sh do.

Lines are read from the file descriptor as they come (``tail -f | produce`` and typing work);
records wait at most ``--linger-ms`` (or until a partition's batch reaches ~1 MiB) and go out
together, one Produce per leader with one batch per partition. EOF, Ctrl-C (SIGINT) and
SIGTERM all end the same way: what the pipe already holds is read, every pending record is
sent and its answer awaited, then the process exits (0 at EOF, 128 + the signal after one;
1 if any record was not delivered). ``--sync`` sends each record on its own and waits for its
answer before reading the next line. A delivery error is printed per batch (partition, error,
how many records) and producing goes on; the exit status is then 1.
"""

from __future__ import annotations

import argparse
import os
import random
import selectors
import signal
import sys
import time
from collections import defaultdict
from typing import Any, TextIO

from kafka_sidecar.spark._records import build_batch, partition_for_key, record_size_upper_bound
from kafka_sidecar.spark._wire import Broker, TopicPartition, error_name

BATCH_BYTES = 1 << 20  # a partition's batch goes out once it reaches about this many bytes
READ_BYTES = 1 << 16

Record = tuple[bytes | None, bytes | None, Any, int]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("values", nargs="*", metavar="VALUE", help="records to send (default: one per line of stdin, sent as they arrive)")
    p.add_argument("-H", "--header", action="append", default=[], metavar="KEY=VALUE",
                   help="a header on every record (repeatable)")
    p.add_argument("--acks", choices=["all", "-1", "1"], default="all", help="all (default, as Kafka's producer) or 1")
    p.add_argument("--create", action="store_true",
                   help="ask the broker to create a missing topic (auto.create.topics.enable must allow it)")
    p.add_argument("--linger-ms", type=int, default=5, metavar="MS",
                   help="how long a record may wait for others to share its request (default 5, as kcat)")
    p.add_argument("--sync", action="store_true", help="send each record on its own and wait for its answer")


class Sender:
    """Pending records per partition, sent when lingered long enough, full, or flushed."""

    def __init__(self, broker: Broker, topic: str, partitions: list[int], args: argparse.Namespace,
                 headers: list[tuple[str, bytes]] | None, err: TextIO) -> None:
        self.broker, self.topic, self.partitions, self.args, self.headers, self.err = broker, topic, partitions, args, headers, err
        self.acks = -1 if args.acks in ("all", "-1") else 1
        self.sticky = random.choice(partitions)  # keyless records: one partition per run (Kafka's sticky partitioner)
        self.sep = args.key_separator.encode() if args.key_separator is not None else None
        self.pending: dict[int, list[Record]] = defaultdict(list)
        self.sizes: dict[int, int] = defaultdict(int)
        self.first_pending: float | None = None
        self.sent = 0
        self.failed = 0

    def add(self, line: bytes) -> None:
        key: bytes | None = None
        value = line
        if self.sep is not None:
            k, sep, v = line.partition(self.sep)
            if sep:
                key, value = k, v
        if self.args.partition is not None:
            part = self.args.partition
        elif key is not None:
            part = self.partitions[partition_for_key(key, len(self.partitions))]
        else:
            part = self.sticky
        record = (key, value, self.headers, int(time.time() * 1000))
        self.pending[part].append(record)
        self.sizes[part] += record_size_upper_bound(key, value, self.headers)
        if self.first_pending is None:
            self.first_pending = time.monotonic()
        if self.args.sync:
            self.flush()
        elif self.sizes[part] >= BATCH_BYTES:
            self._send({part: self.pending.pop(part)})
            self.sizes[part] = 0

    def wait_s(self) -> float | None:
        """Seconds until the pending records have lingered long enough (None: nothing pending)."""
        if self.first_pending is None:
            return None
        return max(0.0, self.first_pending + self.args.linger_ms / 1000 - time.monotonic())

    def flush(self) -> None:
        if self.pending:
            pending, self.pending = self.pending, defaultdict(list)
            self.sizes.clear()
            self._send(pending)
        self.first_pending = None

    def _send(self, pending: dict[int, list[Record]]) -> None:
        """One Produce per leader, one batch per partition; errors reported per partition."""
        by_node: dict[int, dict[TopicPartition, bytes]] = defaultdict(dict)
        for part, records in pending.items():
            by_node[self.broker.leader(self.topic, part)][(self.topic, part)] = build_batch(records)
        for node, batches in by_node.items():
            answers = self.broker.produce(node, batches, acks=self.acks, timeout_ms=30000)
            for (t, p), (code, _base, message) in answers.items():
                n = len(pending[p])
                if code:
                    self.failed += n
                    self.err.write(f"kafka-sidecar: error: {n} record(s) to {t}-{p} not delivered: {error_name(code)}"
                                   + (f": {message}" if message else "") + "\n")
                    self.err.flush()
                else:
                    self.sent += n


def stream(sender: Sender, stdin: Any) -> int:
    """Read ``stdin`` as lines arrive until EOF or SIGINT/SIGTERM; returns the signal number or 0."""
    try:
        fd = stdin.fileno()
    except (AttributeError, OSError, ValueError):  # not a real file (an io.StringIO): lines as given
        for line in stdin:
            sender.add(line.rstrip("\r\n").encode())
        sender.flush()
        return 0
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    caught: list[int] = []

    def on_signal(signum: int, _frame: Any) -> None:
        caught.append(signum)

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    old_wakeup = signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    selector = selectors.DefaultSelector()
    selector.register(fd, selectors.EVENT_READ)
    selector.register(wake_r, selectors.EVENT_READ)
    partial = b""
    try:
        while not caught:
            ready = selector.select(sender.wait_s())
            if any(key.fd == fd for key, _ in ready):
                chunk = os.read(fd, READ_BYTES)
                if not chunk:
                    break
                *complete, partial = (partial + chunk).split(b"\n")
                for line in complete:
                    sender.add(line[:-1] if line.endswith(b"\r") else line)
            if sender.wait_s() == 0.0:
                sender.flush()
        if caught:  # what was written before the signal is in the pipe: send it too
            os.set_blocking(fd, False)
            while True:
                try:
                    chunk = os.read(fd, READ_BYTES)
                except (BlockingIOError, InterruptedError):
                    break
                if not chunk:
                    break
                *complete, partial = (partial + chunk).split(b"\n")
                for line in complete:
                    sender.add(line[:-1] if line.endswith(b"\r") else line)
        if partial:  # a last line without its newline
            sender.add(partial[:-1] if partial.endswith(b"\r") else partial)
        sender.flush()
    finally:
        signal.set_wakeup_fd(old_wakeup)
        for s, handler in old.items():
            signal.signal(s, handler)
        selector.close()
        os.close(wake_r)
        os.close(wake_w)
    return caught[0] if caught else 0


def run(broker: Broker, topic: str, partitions: list[int], args: argparse.Namespace,
        headers: list[tuple[str, bytes]] | None, stdin: Any = None, err: TextIO | None = None) -> int:
    """Produce ``args.values`` or stdin's lines; the exit status."""
    sender = Sender(broker, topic, partitions, args, headers, err or sys.stderr)
    if args.values:
        for value in args.values:
            sender.add(value.encode())
        sender.flush()
        signum = 0
    else:
        signum = stream(sender, stdin if stdin is not None else sys.stdin)
    if sender.failed:
        return 1
    return 128 + signum if signum else 0


__all__ = ["Sender", "add_arguments", "run", "stream"]
