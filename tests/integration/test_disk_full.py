"""Disk full and read-only data dirs, for real: a small tmpfs mounted for the test (root only).

When the disk fills, Produce answers KAFKA_STORAGE_ERROR (56) for the partition, nothing
already stored is damaged (a partly written batch is cut off again), the server keeps
serving reads, and produce works again as soon as space returns. A data dir on a
read-only file system is refused at start with one line (exit 2).
(Read-only *during* a run cannot be staged here: Linux refuses to remount a file system
read-only while the server holds files open for writing. tests/unit/test_storage_errors.py
injects EROFS into the writes instead.)
"""

from __future__ import annotations

import os
import re
import subprocess
import uuid
from pathlib import Path

import pytest
from kafka_sidecar.protocol.records import Record, encode_batch
from kafka_sidecar.storage.verify import problems, verify_data_dir

from tests.integration.test_bad_input import (
    NONE,
    RawClient,
    create_topic,
    fetch_all,
    list_offset,
    partition_results,
    produce_request,
)
from tests.support import RECENT_TS, SidecarProcess, sidecar_command

KAFKA_STORAGE_ERROR = 56


def _mount_tmpfs(path: Path, size: str, *options: str) -> None:
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    opts = ",".join([f"size={size}", *options])
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(path)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip() or r.returncode}")


def _umount(path: Path) -> None:
    r = subprocess.run(["umount", str(path)], capture_output=True)
    if r.returncode != 0:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


@pytest.fixture
def small_disk(tmp_path):
    mnt = tmp_path / "disk"
    _mount_tmpfs(mnt, "3m")
    yield mnt
    _umount(mnt)


def _batch(i: int) -> bytes:
    # ~40 KiB of incompressible-looking values per batch
    return encode_batch([Record(j, RECENT_TS + i, b"k%d" % j, os.urandom(2000) + b"|%d-%d" % (i, j)) for j in range(20)])


def test_disk_full_answers_storage_error_and_recovers(small_disk, tmp_path):
    ballast = small_disk / "ballast"
    server = SidecarProcess(small_disk / "data", {
        "log.segment.bytes": "262144", "log.index.size.max.bytes": "4096", "log.flush.interval.ms": "200",
    })
    server.log_path = tmp_path / "server.log"  # not on the full disk
    server.start()
    try:
        topic = f"full-{uuid.uuid4().hex[:8]}"
        create_topic(server.port, topic)
        ballast.write_bytes(b"\1" * (1 << 20))  # freed later: "space returns"
        client = RawClient(server.port, client_id="filler")
        stored: list[bytes] = []
        result = None
        for i in range(200):
            batch = _batch(i)
            result = partition_results(client.request(produce_request(topic, {0: batch})))[0]
            if result.error_code != NONE:
                break
            stored.append(batch)
        assert result is not None and result.error_code == KAFKA_STORAGE_ERROR, "the disk never filled"
        assert result.base_offset == -1
        assert result.error_message is None  # as Kafka: KAFKA_STORAGE_ERROR carries no message...
        assert re.search(rf"produce to {topic}-0 .*failed: .*(No space left|ENOSPC)", server.log_text())  # ...the log says why
        assert len(stored) >= 5
        end = len(stored) * 20
        # Everything acknowledged is there, whole; nothing of the failed batch.
        assert list_offset(client, topic, 0, -1) == end
        assert [r.offset for r in fetch_all(client, topic, 0)] == list(range(end))
        assert not problems({k: v for k, v in verify_data_dir(server.data_dir).items() if k.startswith(topic)})
        # Still full: still refused, still nothing damaged.
        again = partition_results(client.request(produce_request(topic, {0: _batch(999)})))[0]
        assert again.error_code == KAFKA_STORAGE_ERROR
        assert list_offset(client, topic, 0, -1) == end
        assert any("produce to" in line and "failed" in line for line in server.log_text().splitlines())
        # Space returns: produce works again, at the next offset.
        ballast.unlink()
        ok = partition_results(client.request(produce_request(topic, {0: _batch(1000)})))[0]
        assert (ok.error_code, ok.base_offset) == (NONE, end)
        client.close()
        assert server.stop() == 0
        server.start()
        client = RawClient(server.port, client_id="after")
        assert [r.offset for r in fetch_all(client, topic, 0)] == list(range(end + 20))
        client.close()
        assert server.stop() == 0
        assert not problems(verify_data_dir(server.data_dir, strict=True))
        assert "Traceback" not in server.log_text(), server.log_text()[-3000:]
    finally:
        if server.proc is not None and server.proc.poll() is None:
            server.kill()


def test_read_only_data_dir_is_refused_at_start(tmp_path):
    mnt = tmp_path / "ro"
    _mount_tmpfs(mnt, "1m", "ro")
    try:
        r = subprocess.run([*sidecar_command(), "serve", "--data-dir", str(mnt / "data"), "--listen", "127.0.0.1:0"],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 2
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("kafka-sidecar: error:"), r.stderr
        assert "read-only" in lines[0].lower() or "not writable" in lines[0], lines[0]
    finally:
        _umount(mnt)
