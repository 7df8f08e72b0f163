"""Write errors in the storage engine (disk full, read-only file system, short writes).

An append that fails leaves the log exactly as it was: the bytes already written and
the index entries added are removed again, StorageError says what failed (the produce
handler answers KAFKA_STORAGE_ERROR), and the next append once the disk is back goes to
the same offset. Faults are injected by replacing the ``os`` module seen by one storage
module with a proxy whose chosen calls fail.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from kafka_sidecar.protocol.record_batch import validate_batches
from kafka_sidecar.protocol.records import Record, decode_batches, encode_batch
from kafka_sidecar.storage import index as index_module
from kafka_sidecar.storage import log_segment
from kafka_sidecar.storage import producer_state as producer_state_module
from kafka_sidecar.storage.log import Log, StorageError
from kafka_sidecar.storage.log_config import LogConfig
from kafka_sidecar.storage.verify import problems, verify_partition

TS0 = 1_700_000_000_000


class FaultyOS:
    """``os`` with some calls failing: ``plan[name]`` is a list of actions, one per call
    ("ok", "short" for half a write, or an errno to raise); calls past the plan succeed."""

    def __init__(self, plan: dict[str, list[object]]) -> None:
        self.plan = {k: list(v) for k, v in plan.items()}

    def __getattr__(self, name: str):
        real = getattr(os, name)
        if name not in self.plan:
            return real

        def call(*args, **kwargs):
            actions = self.plan[name]
            action = actions.pop(0) if actions else "ok"
            if action == "short":
                fd, data = args[0], memoryview(args[1])
                return real(fd, data[: max(1, len(data) // 2)])
            if isinstance(action, int):
                raise OSError(action, os.strerror(action))
            return real(*args, **kwargs)

        return call


def new_log(path: Path, **configs) -> Log:
    return Log(path, "t", 0, LogConfig(None, {"index.interval.bytes": 100, **{k.replace("_", "."): v for k, v in configs.items()}}))


def append(lg: Log, n: int, start: int = 0):
    buf = bytearray(encode_batch([Record(i, TS0 + start + i, b"k%d" % i, b"value-%d-" % (start + i) + b"x" * 60) for i in range(n)]))
    return lg.append_as_leader(buf, validate_batches(buf))


def values(lg: Log) -> list[bytes]:
    out = []
    for seg in lg.segments:
        for b in decode_batches(seg.read_batch_bytes(0, seg.size)):
            out += [r.value for r in b.records]
    return out


def file_sizes(d: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in d.iterdir() if p.suffix == ".log"}


@pytest.mark.parametrize(
    "plan",
    [
        {"write": [errno.EROFS]},  # read-only file system: nothing written
        {"write": [errno.ENOSPC]},  # disk full before the first byte
        {"write": ["short", errno.ENOSPC]},  # half the batch written, then the disk is full
    ],
    ids=["read-only", "disk-full", "short-write-then-full"],
)
def test_failed_append_leaves_the_log_as_it_was(tmp_path, monkeypatch, plan):
    lg = new_log(tmp_path / "t-0")
    for i in range(5):
        append(lg, 5, start=i * 5)
    before = (lg.log_end_offset, file_sizes(lg.dir), list(lg.active_segment.offset_index.keys), values(lg))
    monkeypatch.setattr(log_segment, "os", FaultyOS(plan))
    with pytest.raises(StorageError) as e:
        append(lg, 5, start=25)
    assert e.value.errno in (errno.EROFS, errno.ENOSPC)
    monkeypatch.undo()
    assert (lg.log_end_offset, file_sizes(lg.dir), list(lg.active_segment.offset_index.keys), values(lg)) == before
    # Space is back: the next append takes the failed one's offsets.
    info = append(lg, 5, start=25)
    assert info.first_offset == 25
    assert values(lg) == [b"value-%d-" % i + b"x" * 60 for i in range(30)]
    lg.close()
    assert not problems(verify_partition(tmp_path / "t-0", strict=True))


def test_failed_index_write_undoes_the_data_write(tmp_path, monkeypatch):
    lg = new_log(tmp_path / "t-0")
    append(lg, 5)
    append(lg, 5, start=5)  # past index.interval.bytes: the next batch gets an index entry
    before = (lg.log_end_offset, file_sizes(lg.dir), list(lg.active_segment.offset_index.keys))
    monkeypatch.setattr(index_module, "os", FaultyOS({"pwrite": [errno.ENOSPC]}))
    with pytest.raises(StorageError):
        append(lg, 5, start=10)
    monkeypatch.undo()
    assert (lg.log_end_offset, file_sizes(lg.dir), list(lg.active_segment.offset_index.keys)) == before
    assert append(lg, 5, start=10).first_offset == 10
    lg.close()
    assert not problems(verify_partition(tmp_path / "t-0", strict=True))


def test_a_tail_that_cannot_be_cut_is_cut_before_the_next_write(tmp_path, monkeypatch):
    """Half a batch written, the disk fills, and cutting it off fails too (the file system went
    read-only): the next append cuts it first; a restart would cut it by recovery."""
    lg = new_log(tmp_path / "t-0")
    append(lg, 5)
    size = lg.active_segment.size
    monkeypatch.setattr(log_segment, "os", FaultyOS({"write": ["short", errno.ENOSPC], "ftruncate": [errno.EROFS]}))
    with pytest.raises(StorageError):
        append(lg, 5, start=5)
    monkeypatch.undo()
    assert os.path.getsize(lg.active_segment.log_path) > size  # the half batch is still on disk...
    assert lg.active_segment.size == size  # ...but not part of the log
    assert lg.read(0, 1 << 20, True).size == size  # and never served
    assert append(lg, 5, start=5).first_offset == 5
    assert values(lg) == [b"value-%d-" % i + b"x" * 60 for i in range(10)]
    lg.close()
    assert not problems(verify_partition(tmp_path / "t-0", strict=True))


def test_half_written_tail_is_recovered_after_a_crash(tmp_path, monkeypatch):
    lg = new_log(tmp_path / "t-0")
    append(lg, 5)
    monkeypatch.setattr(log_segment, "os", FaultyOS({"write": ["short", errno.ENOSPC], "ftruncate": [errno.EROFS]}))
    with pytest.raises(StorageError):
        append(lg, 5, start=5)
    monkeypatch.undo()
    for seg in lg.segments:  # crash: no clean close
        seg.close()
    lg = Log(tmp_path / "t-0", "t", 0, LogConfig(None, {"index.interval.bytes": 100}), clean_shutdown=False)
    assert lg.log_end_offset == 5
    assert values(lg) == [b"value-%d-" % i + b"x" * 60 for i in range(5)]
    lg.close()


def test_roll_goes_on_without_a_producer_snapshot_when_the_disk_is_full(tmp_path, monkeypatch, caplog):
    lg = new_log(tmp_path / "t-0", segment_bytes=600)
    append(lg, 5)
    monkeypatch.setattr(producer_state_module, "os", FaultyOS({"write": [errno.ENOSPC]}))
    append(lg, 5, start=5)  # rolls: the snapshot cannot be written
    monkeypatch.undo()
    assert len(lg.segments) == 2
    assert "cannot write producer snapshot" in caplog.text
    assert not list((tmp_path / "t-0").glob("*.tmp"))
    assert values(lg) == [b"value-%d-" % i + b"x" * 60 for i in range(10)]
    lg.close()
    assert not problems(verify_partition(tmp_path / "t-0", strict=True))


def test_roll_that_cannot_create_the_segment_leaves_no_files(tmp_path, monkeypatch):
    lg = new_log(tmp_path / "t-0", segment_bytes=600)
    append(lg, 5)
    names = sorted(p.name for p in (tmp_path / "t-0").iterdir() if not p.name.endswith(".snapshot"))
    real_open = os.open
    calls = {"n": 0}

    class OpenFails(FaultyOS):
        def __getattr__(self, name):
            if name != "open":
                return getattr(os, name)

            def failing_open(path, flags, mode=0o777):
                calls["n"] += 1
                if str(path).endswith(".timeindex"):  # the .log and .index are made first
                    raise OSError(errno.ENOSPC, "No space left on device")
                return real_open(path, flags, mode)

            return failing_open

    monkeypatch.setattr(log_segment, "os", OpenFails({}))
    monkeypatch.setattr(index_module, "os", OpenFails({}))
    with pytest.raises(StorageError):
        append(lg, 5, start=5)
    monkeypatch.undo()
    assert calls["n"] >= 1
    assert sorted(p.name for p in (tmp_path / "t-0").iterdir() if not p.name.endswith(".snapshot")) == names
    assert lg.log_end_offset == 5
    assert append(lg, 5, start=5).first_offset == 5
    lg.close()
    assert not problems(verify_partition(tmp_path / "t-0", strict=True))
