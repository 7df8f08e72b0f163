"""The cluster's topic log: ``<data-dir>/cluster-metadata.log``, which every node follows.

Kafka keeps topics in the KRaft metadata log: the controller appends a record, the brokers
replay it. The nodes of ``serve --processes N`` share one host and one data dir, so the log is a
file they all read and take turns to append to: a change (CreateTopics, DeleteTopics,
CreatePartitions, a topic's configs, auto-creation, the coordinators' internal topics), whichever
node is asked, is made under an exclusive ``flock`` of the log, after catching up with it: the
node reads what the others appended, checks the request against that (a topic created meanwhile
by another node is TOPIC_ALREADY_EXISTS), appends its record, fsyncs it, then applies it to its
own logs; the lock orders the changes as the controller would. Before answering any request but
Produce and Fetch, a node catches up if the file grew (one ``fstat``), so an answer from any node
reflects every change already acknowledged by any node: a topic created through node 2 is in
node 1's next Metadata answer. Produce and Fetch look only when they name a topic or partition the
node does not hold (so one sent right after CreateTopics finds it); a node learns of a deletion made
elsewhere within ``POLL_INTERVAL_S`` (the periodic catch-up), as a Kafka broker learns it from the
metadata log after the controller answered.

One record per line: ``<crc32 of the JSON, 8 hex digits> <JSON>``. Records:
``{"op": "topic", "name", "topic_id", "partitions", "configs"}`` (the topic's whole state: made,
grown or reconfigured) and ``{"op": "delete", "name", "topic_id"}``. A line cut short by a crash
fails its CRC or lacks its newline: readers stop before it and the next writer truncates it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import threading
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

METADATA_LOG = "cluster-metadata.log"
POLL_INTERVAL_S = 0.2  # how often a node looks for changes on its own (deletions reach Produce/Fetch)

Record = dict[str, Any]


def encode_record(record: Record) -> bytes:
    body = json.dumps(record, separators=(",", ":"), sort_keys=True).encode()
    return b"%08x " % zlib.crc32(body) + body + b"\n"


def decode_record(line: bytes) -> Record | None:
    """A record from one complete line (without its newline), or None if damaged."""
    crc, _, body = line.partition(b" ")
    try:
        if len(crc) != 8 or int(crc, 16) != zlib.crc32(body):
            return None
        record = json.loads(body)
    except ValueError:
        return None
    return record if isinstance(record, dict) and "op" in record else None


class MetadataLog:
    """One node's view of the shared topic log: what it has read (``offset``) and the topics
    the log says exist (``topics``: name -> its last ``topic`` record)."""

    def __init__(self, cluster_dir: Path) -> None:
        self.path = Path(cluster_dir) / METADATA_LOG
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        self.offset = 0  # bytes read
        # Bytes read AND applied to this node's logs: ``has_news`` compares with this, so a request
        # arriving while another thread is still applying what it read (the periodic catch-up
        # creating a new topic's logs) waits for that catch-up instead of missing the topic.
        self.applied = 0
        self.topics: dict[str, Record] = {}
        self._lock = threading.RLock()  # one reader/writer of this node at a time (loop or storage thread)

    def close(self) -> None:
        os.close(self.fd)

    def has_news(self) -> bool:
        """Whether another node appended since this one last read (one fstat)."""
        return os.fstat(self.fd).st_size > self.applied

    def read_new(self) -> list[Record]:
        """The complete records appended since the last read, in order; ``topics`` follows them."""
        with self._lock:
            size = os.fstat(self.fd).st_size
            if size <= self.offset:
                return []
            data = os.pread(self.fd, size - self.offset, self.offset)
            records = []
            pos = 0
            while True:
                end = data.find(b"\n", pos)
                if end < 0:
                    break
                record = decode_record(data[pos:end])
                if record is None:
                    log.warning("%s: damaged record at byte %d; reading stops there", self.path, self.offset + pos)
                    break
                records.append(record)
                self._follow(record)
                pos = end + 1
            self.offset += pos
            return records

    def _follow(self, record: Record) -> None:
        if record["op"] == "topic":
            self.topics[record["name"]] = record
        elif record["op"] == "delete":
            current = self.topics.get(record["name"])
            if current is not None and current["topic_id"] == record["topic_id"]:
                del self.topics[record["name"]]

    @contextlib.contextmanager
    def turn(self, apply: Callable[[list[Record]], None]) -> Iterator[None]:
        """This node's exclusive turn to change the log (blocking: the storage thread): the
        other nodes' records are read and ``apply``-ed first, and a torn tail is cut."""
        with self._lock:
            fcntl.flock(self.fd, fcntl.LOCK_EX)
            try:
                apply(self.read_new())
                size = os.fstat(self.fd).st_size
                if size > self.offset:  # a record cut short by a crash of its writer
                    log.warning("%s: dropping %d bytes of an unfinished record", self.path, size - self.offset)
                    os.ftruncate(self.fd, self.offset)
                yield
            finally:
                self.applied = self.offset
                fcntl.flock(self.fd, fcntl.LOCK_UN)

    def caught_up(self, apply: Callable[[list[Record]], None]) -> None:
        """Read what the other nodes appended and ``apply`` it (blocking); only then is it news no more."""
        with self._lock:
            apply(self.read_new())
            self.applied = self.offset

    def append(self, record: Record) -> None:
        """Append and fsync one record (inside ``turn``); this node has then read it too."""
        line = encode_record(record)
        os.write(self.fd, line)
        os.fsync(self.fd)
        self.offset += len(line)
        self._follow(record)
