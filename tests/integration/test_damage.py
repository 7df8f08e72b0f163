"""Damaged files at start-up: torn writes and bit flips in the last segment, in any segment's
indexes and in every checkpoint file. The server never refuses to start over them, says in
its log what it repaired, never serves a corrupt batch, and loses nothing it did not have to.

One data dir is filled once (several segments, an idempotent producer, DeleteRecords, a
cleaned compacted topic) and stopped cleanly; each case damages a copy of it, starts a
server on the copy and checks what it serves, then stops it and verifies every segment
strictly (``kafka_sidecar.storage.verify``: indexes match the batches, trimmed).
"""

from __future__ import annotations

import json
import random
import re
import shutil
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from kafka_sidecar.client import KafkaClient
from kafka_sidecar.protocol.record_batch import read_header
from kafka_sidecar.protocol.records import Record, decode_batches, encode_batch
from kafka_sidecar.storage.verify import problems, verify_data_dir

from tests.integration.test_bad_input import (
    NONE,
    RawClient,
    create_topic,
    fetch_once,
    list_offset,
    partition_results,
    produce_request,
)
from tests.support import SidecarProcess, wait_until

TOPICS = [f"damage-{i}" for i in range(10)]  # identical partitions: each case damages them differently
DATA = TOPICS[0]
COMPACT = "damage-compact"
BATCHES = 60
PER_BATCH = 5
T0 = 1_700_000_000_000
PRODUCER_ID = 4242
DELETED_TO = 12  # DeleteRecords on every damage-N-0
CLEAN_SHUTDOWN = ".kafka_cleanshutdown"
OVERRIDES = {
    "log.segment.bytes": "4096",
    "log.index.interval.bytes": "300",
    "log.cleaner.backoff.ms": "100",
    "log.retention.check.interval.ms": "600000",
    "log.initial.task.delay.ms": "600000",
}


def data_batch(i: int, producer_id: int = PRODUCER_ID) -> bytes:
    """Batch ``i`` of a damage-N-0 partition: idempotent, timestamps rising."""
    return encode_batch(
        [Record(j, T0 + i * 10 + j, b"key-%d" % j, b"batch-%03d-record-%d-" % (i, j) + b"x" * 40) for j in range(PER_BATCH)],
        producer_id=producer_id, producer_epoch=0, base_sequence=i * PER_BATCH,
    )


def expected_value(offset: int) -> bytes:
    return b"batch-%03d-record-%d-" % divmod(offset, PER_BATCH) + b"x" * 40


@dataclass
class Template:
    dir: Path  # the data dir, stopped cleanly
    topic_id: str


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Template:
    root = tmp_path_factory.mktemp("damage-template")
    server = SidecarProcess(root / "data", OVERRIDES).start()
    try:
        create_topic(server.port, COMPACT, configs={"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01", "segment.bytes": "1024"})
        client = RawClient(server.port, client_id="fill")
        admin = KafkaClient(server.bootstrap, client_id="fill-admin")
        for n, topic in enumerate(TOPICS):
            create_topic(server.port, topic, configs={"retention.ms": "-1"})
            for i in range(BATCHES):
                r = partition_results(client.request(produce_request(topic, {0: data_batch(i, PRODUCER_ID + n)})))[0]
                assert (r.error_code, r.base_offset) == (NONE, i * PER_BATCH)
            _, body = admin.bootstrap.request(21, {"topics": [{"name": topic, "partitions": [{"partition_index": 0, "offset": DELETED_TO}]}], "timeout": 5000}, max_version=2, min_version=2)
            assert body.topics[0].partitions[0].low_watermark == DELETED_TO
        for i in range(40):
            batch = encode_batch([Record(0, T0 + i, b"k%d" % (i % 4), b"v%d" % i)])
            assert partition_results(client.request(produce_request(COMPACT, {0: batch})))[0].error_code == NONE
        client.close()
        admin.close()
        wait_until(lambda: (server.data_dir / "cleaner-offset-checkpoint").exists(), timeout=30, message="a cleaning")
    finally:
        assert server.stop() == 0
    data = server.data_dir
    assert len(list((data / f"{DATA}-0").glob("*.log"))) >= 5
    assert list((data / f"{DATA}-0").glob("*.snapshot"))
    topic_id = json.loads((data / "sidecar-topics.json").read_text())["topics"][DATA]["topic_id"]
    return Template(data, topic_id)


@pytest.fixture
def damaged(template, tmp_path):
    """A fresh copy of the template data dir, and the server started on it after damage."""
    data = tmp_path / "data"
    shutil.copytree(template.dir, data)
    servers: list[SidecarProcess] = []

    def start() -> SidecarProcess:
        server = SidecarProcess(data, OVERRIDES)
        servers.append(server)
        return server.start()

    yield data, start
    for s in servers:
        if s.proc is not None and s.proc.poll() is None:
            s.kill()


# ----------------------------------------------------------------------------- checks


def segment_logs(data: Path, topic: str = DATA) -> list[Path]:
    return sorted((data / f"{topic}-0").glob("*.log"), key=lambda p: int(p.stem))


def batches_of(log_file: Path) -> list[tuple[int, object]]:
    raw = log_file.read_bytes()
    out, pos = [], 0
    while len(raw) - pos >= 61:
        h = read_header(raw, pos)
        if pos + h.size > len(raw):
            break
        out.append((pos, h))
        pos += h.size
    return out


def check_served(server: SidecarProcess, end: int, start: int = DELETED_TO, topic: str = DATA, producer_id: int = PRODUCER_ID) -> None:
    """A damage-N-0 partition serves exactly offsets [start, end) with the values written, each batch
    whole and CRC-correct when fetched from any of its batches; lookups by timestamp land right;
    the next produce goes to ``end``."""
    client = RawClient(server.port, client_id="damage-check")
    try:
        assert list_offset(client, topic, 0, -2) == start, topic
        assert list_offset(client, topic, 0, -1) == end, topic
        offset = start
        while offset < end:
            p, raw = fetch_once(client, topic, 0, offset, max_bytes=1)
            assert p.error_code == NONE and p.high_watermark == end, topic
            batches = decode_batches(raw, verify_crc=True)
            assert batches, f"{topic}: nothing served at offset {offset}"
            b = batches[0]
            assert b.base_offset <= offset <= b.last_offset, topic
            for r in b.records:
                assert r.value == expected_value(r.offset), f"{topic} offset {r.offset}: {r.value[:30]!r}"
            offset = b.last_offset + 1
        for i in range(start // PER_BATCH, end // PER_BATCH, 7):
            target = T0 + i * 10 + 2
            assert list_offset(client, topic, 0, target) == max(start, i * PER_BATCH + 2), f"{topic}: timestamp {target}"
        p, raw = fetch_once(client, topic, 0, end)
        assert (p.error_code, raw) == (NONE, b""), topic
        nxt = encode_batch([Record(0, T0 + 10**6, b"k", b"after-repair")])
        r = partition_results(client.request(produce_request(topic, {0: nxt})))[0]
        assert (r.error_code, r.base_offset) == (NONE, end), topic
    finally:
        client.close()


def finish(server: SidecarProcess) -> None:
    """Stop cleanly; every segment of every partition passes the strict verification."""
    assert server.stop() == 0
    found = problems(verify_data_dir(server.data_dir, strict=True))
    assert not found, "\n".join(found)


def repair_lines(server: SidecarProcess, pattern: str) -> list[str]:
    return [line for line in server.log_text().splitlines() if re.search(pattern, line, re.I)]


END = BATCHES * PER_BATCH


# ------------------------------------------------------------------- the last segment


def _last_batch(data: Path, topic: str) -> tuple[Path, int, object]:
    log_file = segment_logs(data, topic)[-1]
    pos, h = batches_of(log_file)[-1]
    return log_file, pos, h


def _tear(data: Path, topic: str) -> int:
    log_file, pos, h = _last_batch(data, topic)
    with open(log_file, "r+b") as f:
        f.truncate(pos + h.size - 9)
    return h.base_offset


def _flip_record_byte(data: Path, topic: str) -> int:
    log_file, pos, h = _last_batch(data, topic)
    raw = bytearray(log_file.read_bytes())
    raw[pos + h.size - 5] ^= 0x10
    log_file.write_bytes(bytes(raw))
    return h.base_offset


def _flip_base_offset(data: Path, topic: str) -> int:
    # The CRC does not cover the base offset: recovery must still see the batch is wrong.
    log_file, pos, h = _last_batch(data, topic)
    raw = bytearray(log_file.read_bytes())
    raw[pos + 7] ^= 0x01
    log_file.write_bytes(bytes(raw))
    return h.base_offset


def _zero_tail(data: Path, topic: str) -> int:
    log_file, pos, h = _last_batch(data, topic)
    raw = bytearray(log_file.read_bytes())
    raw[pos + 20 :] = bytes(len(raw) - pos - 20)
    log_file.write_bytes(bytes(raw))
    return h.base_offset


def _append_garbage(data: Path, topic: str) -> int:
    log_file = segment_logs(data, topic)[-1]
    with open(log_file, "ab") as f:
        f.write(random.Random(5).randbytes(37))
    return END


SEGMENT_DAMAGE = [_tear, _flip_record_byte, _flip_base_offset, _zero_tail, _append_garbage]


@pytest.mark.parametrize("crashed", [False, True], ids=["clean-marker", "crashed"])
def test_damaged_end_of_last_segment_is_cut(damaged, crashed):
    """Torn batch, flipped record byte, flipped base offset (not covered by the CRC), zeroed
    tail, garbage after the last batch: one partition each. After a crash recovery finds them;
    after a clean stop the check of the active segment's tail does."""
    data, start = damaged
    ends = {topic: damage(data, topic) for topic, damage in zip(TOPICS, SEGMENT_DAMAGE, strict=False)}
    if crashed:
        (data / CLEAN_SHUTDOWN).unlink()
    server = start()
    for topic, end in ends.items():
        assert repair_lines(server, rf"{topic}-0.*(truncat|recover|cut)"), f"{topic}:\n{server.log_text()[-3000:]}"
        check_served(server, end, topic=topic)
    finish(server)


# ------------------------------------------------------------------------------ indexes


def _flip_bits(path: Path, seed: int, flips: int = 1) -> None:
    raw = bytearray(path.read_bytes())
    if not raw:
        return
    rng = random.Random(seed)
    for _ in range(flips):
        raw[rng.randrange(len(raw))] ^= 1 << rng.randrange(8)
    path.write_bytes(bytes(raw))


def _entry_into_a_batch(path: Path) -> None:
    """An .index entry pointing one byte into its batch (or a .timeindex entry one offset off)."""
    raw = bytearray(path.read_bytes())
    size = 8 if path.suffix == ".index" else 12
    if len(raw) >= 2 * size:
        a, b = struct.unpack_from(">ii", raw, size + size - 8)
        struct.pack_into(">ii", raw, size + size - 8, a, b + 1)
        path.write_bytes(bytes(raw))


INDEX_DAMAGE: dict[str, Callable[[Path], None]] = {
    "bit-flip-1": lambda p: _flip_bits(p, 1),
    "bit-flip-2": lambda p: _flip_bits(p, 2),
    "bit-flips-many": lambda p: _flip_bits(p, 3, flips=6),
    "last-entry-flip": lambda p: p.write_bytes(p.read_bytes()[:-1] + bytes([p.read_bytes()[-1] ^ 0x40])) if p.stat().st_size else None,
    "entry-into-a-batch": _entry_into_a_batch,
    "torn": lambda p: p.write_bytes(p.read_bytes()[:-3]),
    "emptied": lambda p: p.write_bytes(b""),
    "zeroed": lambda p: p.write_bytes(bytes(len(p.read_bytes()))),
    "garbage": lambda p: p.write_bytes(random.Random(9).randbytes(len(p.read_bytes()) + 5)),
    "deleted": lambda p: p.unlink(),
}


@pytest.mark.parametrize("crashed", [False, True], ids=["clean-marker", "crashed"])
def test_damaged_indexes_are_rebuilt(damaged, crashed):
    """Each kind of damage (one partition each) to the first segment's .index, a middle segment's
    .timeindex and both indexes of the last segment. The server starts, rebuilds them (and says
    so), serves every batch right (a damaged index never sends a read into the middle of a
    batch), answers lookups by timestamp right, and after a clean stop every index matches its
    log again, byte for byte what Kafka's rule gives."""
    data, start = damaged
    for topic, how in zip(TOPICS, sorted(INDEX_DAMAGE), strict=True):
        logs = segment_logs(data, topic)
        for path in (logs[0].with_suffix(".index"), logs[len(logs) // 2].with_suffix(".timeindex"),
                     logs[-1].with_suffix(".index"), logs[-1].with_suffix(".timeindex")):
            INDEX_DAMAGE[how](path)
    if crashed:
        (data / CLEAN_SHUTDOWN).unlink()
    server = start()
    for topic in TOPICS:
        check_served(server, END, topic=topic)
    reported = {t for t in TOPICS if repair_lines(server, rf"{t}-0: .*(rebuilding the indexes|truncat)|rebuilding missing indexes of {t}-0")}
    # Emptied or zeroed indexes of the active segment are a normal state after a crash (nothing
    # written yet): only the others must be reported.
    assert reported >= {t for t, how in zip(TOPICS, sorted(INDEX_DAMAGE), strict=True) if how not in ("emptied", "zeroed")} - (set(TOPICS) if crashed else set()), server.log_text()[-4000:]
    finish(server)


# --------------------------------------------------------------------------- checkpoints


def _garbage(path: Path) -> None:
    path.write_bytes(random.Random(11).randbytes(max(20, path.stat().st_size)))


def _torn(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _flip(path: Path) -> None:
    _flip_bits(path, 21)


def _bad_count(path: Path) -> None:
    lines = path.read_text().split("\n")
    lines[1] = str(int(lines[1]) - 1)
    path.write_text("\n".join(lines))


CHECKPOINT_DAMAGE = {"garbage": _garbage, "torn": _torn, "bit-flip": _flip, "emptied": lambda p: p.write_bytes(b"")}


@pytest.mark.parametrize(("how", "crashed"), [("garbage", True), ("torn", False), ("bit-flip", True), ("emptied", False)])
def test_damaged_checkpoints_are_ignored(damaged, how, crashed):
    """recovery-point-offset-checkpoint, cleaner-offset-checkpoint and meta.properties damaged at
    once: ignored (said in the log), recovery from the start of each log if it crashed."""
    data, start = damaged
    for name in ("recovery-point-offset-checkpoint", "cleaner-offset-checkpoint", "meta.properties"):
        CHECKPOINT_DAMAGE[how](data / name)
    if crashed:
        (data / CLEAN_SHUTDOWN).unlink()
    server = start()
    if how in ("garbage", "torn"):
        assert repair_lines(server, r"ignoring (malformed|unreadable) checkpoint file .*recovery-point-offset-checkpoint")
    check_served(server, END)
    check_served(server, END, topic=TOPICS[-1])
    finish(server)


@pytest.mark.parametrize("how", ["garbage", "bad-count", "bit-flip"])
def test_damaged_log_start_offset_checkpoint(damaged, how):
    """Kafka's checkpoint format has no checksum: a damaged file that no longer parses is ignored
    (logged), and the start falls back to the first segment; one that still parses (a flipped
    digit) is taken as it is, within [first segment, log end]. Nothing is ever served wrong."""
    data, start = damaged
    path = data / "log-start-offset-checkpoint"
    (_bad_count if how == "bad-count" else CHECKPOINT_DAMAGE[how])(path)
    server = start()
    client = RawClient(server.port)
    starts = {t: list_offset(client, t, 0, -2) for t in TOPICS}
    client.close()
    if how in ("garbage", "bad-count"):
        assert set(starts.values()) == {0}
        assert repair_lines(server, r"ignoring (malformed|unreadable) checkpoint file .*log-start-offset-checkpoint")
    for topic, lso in starts.items():
        assert 0 <= lso <= END
        check_served(server, END, start=lso, topic=topic)
    finish(server)


def test_damaged_producer_snapshot_is_rebuilt_from_the_log(damaged):
    data, start = damaged
    snapshots = sorted((data / f"{DATA}-0").glob("*.snapshot"))
    for s in snapshots:
        _flip_bits(s, 5)
    server = start()
    assert repair_lines(server, r"ignoring producer snapshot"), server.log_text()[-3000:]
    # The idempotent producer's state came back from the log: a retry of its last batch is
    # answered with the original offsets and not written again.
    client = RawClient(server.port)
    r = partition_results(client.request(produce_request(DATA, {0: data_batch(BATCHES - 1)})))[0]
    assert (r.error_code, r.base_offset) == (NONE, END - PER_BATCH)
    assert list_offset(client, DATA, 0, -1) == END
    client.close()
    check_served(server, END)
    finish(server)


def test_damaged_partition_metadata_is_rewritten(damaged, template):
    data, start = damaged
    topics = dict(zip(TOPICS, sorted(CHECKPOINT_DAMAGE), strict=False))
    for topic, how in topics.items():
        CHECKPOINT_DAMAGE[how](data / f"{topic}-0" / "partition.metadata")
    server = start()
    saved = json.loads((data / "sidecar-topics.json").read_text())["topics"]
    for topic in topics:
        assert f"topic_id: {saved[topic]['topic_id']}" in (data / f"{topic}-0" / "partition.metadata").read_text()
        assert repair_lines(server, rf"{topic}-0/partition\.metadata .*rewritten"), server.log_text()[-3000:]
    assert saved[DATA]["topic_id"] == template.topic_id
    check_served(server, END)
    finish(server)


@pytest.mark.parametrize("how", ["bit-flip", "torn"])
def test_damaged_topics_file_is_restored_from_its_copy(damaged, template, how):
    data, start = damaged
    CHECKPOINT_DAMAGE[how](data / "sidecar-topics.json")
    server = start()
    assert repair_lines(server, r"sidecar-topics\.json is damaged .*restored from sidecar-topics\.json\.bak"), server.log_text()[-3000:]
    saved = json.loads((data / "sidecar-topics.json").read_text())["topics"]
    assert saved[COMPACT]["configs"]["cleanup.policy"] == "compact"
    assert saved[DATA]["topic_id"] == template.topic_id
    check_served(server, END)
    finish(server)


def test_topics_file_and_copy_both_damaged(damaged):
    data, start = damaged
    _flip(data / "sidecar-topics.json")
    _garbage(data / "sidecar-topics.json.bak")
    server = start()
    assert repair_lines(server, r"ignoring unreadable topics file .*kept as sidecar-topics\.json\.damaged")
    assert (data / "sidecar-topics.json.damaged").exists()
    check_served(server, END)  # the data is all there; only topic configs fell back to defaults
    finish(server)


def test_damaged_producer_id_file_never_reuses_an_id(damaged):
    data, start = damaged
    (data / "sidecar-producer-id").write_bytes(b"\x00\x07garbage")
    server = start()
    admin = KafkaClient(server.bootstrap, client_id="pid")
    _, body = admin.bootstrap.request(22, {"transactional_id": None, "transaction_timeout": 60000, "producer_id": -1, "producer_epoch": -1}, max_version=4)
    admin.close()
    assert body.error_code.value == 0
    assert body.producer_id >= PRODUCER_ID + len(TOPICS)  # ids 4242.. are in the logs
    assert repair_lines(server, r"sidecar-producer-id")
    finish(server)


def test_everything_damaged_at_once_still_starts(damaged):
    """Every checkpoint garbage, an index torn, the last batch torn, no clean-shutdown marker."""
    data, start = damaged
    for name in ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint", "cleaner-offset-checkpoint",
                 "meta.properties", "sidecar-topics.json", "sidecar-topics.json.bak", "sidecar-producer-id"):
        if (data / name).exists():
            _garbage(data / name)
    for part in data.iterdir():
        if part.is_dir():
            _garbage(part / "partition.metadata")
            for s in part.glob("*.snapshot"):
                _garbage(s)
    segment_logs(data)[2].with_suffix(".timeindex").write_bytes(b"\x01\x02\x03")
    end = _tear(data, DATA)
    (data / CLEAN_SHUTDOWN).unlink()
    server = start()
    check_served(server, end, start=0)
    finish(server)
