"""serve's malloc settings (server/malloc_tuning.py) seen from outside: the real server, one
confluent-kafka producer of ~1 MB requests over TCP, the server's minor page faults counted from
/proc. With glibc's defaults left in place (a user's MALLOC_TOP_PAD_ makes tune_malloc step
aside) each freed request buffer goes back to the kernel and the next one faults its pages in
again; tuned, the buffers are reused. Same load, same run: the tuned server faults far less."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support import SidecarProcess, running

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

GLIBC = bool(os.confstr("CS_GNU_LIBC_VERSION")) if "CS_GNU_LIBC_VERSION" in os.confstr_names else False
RECORDS, VALUE = 50_000, 1024  # ~50 MB in ~1 MB requests


def _minflt(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[7])


def _faults_for_large_batches(data_dir: Path, env: dict[str, str]) -> int:
    with running(SidecarProcess(data_dir, env=env)) as server:
        assert server.proc is not None
        admin = AdminClient({"bootstrap.servers": server.bootstrap, "log_level": 3})
        admin.create_topics([NewTopic("big", 1, 1)])["big"].result(30)
        producer = Producer({"bootstrap.servers": server.bootstrap, "linger.ms": 5, "batch.size": 1_000_000,
                             "batch.num.messages": 100_000, "queue.buffering.max.kbytes": 1_048_576,
                             "enable.idempotence": False, "log_level": 3})
        producer.produce("big", b"warm")
        assert producer.flush(30) == 0
        value = os.urandom(VALUE)
        before = _minflt(server.proc.pid)
        for _ in range(RECORDS):
            while True:
                try:
                    producer.produce("big", value)
                    break
                except BufferError:
                    producer.poll(0.005)
        assert producer.flush(60) == 0
        return _minflt(server.proc.pid) - before


@pytest.mark.skipif(not GLIBC, reason="mallopt is glibc's; other C libraries keep their own defaults")
def test_large_requests_reuse_their_buffers(tmp_path: Path) -> None:
    tuned = _faults_for_large_batches(tmp_path / "tuned", {})
    untuned = _faults_for_large_batches(tmp_path / "untuned", {"MALLOC_TOP_PAD_": "131072"})
    # Measured: ~100-400 faults per 50 MB tuned, thousands untuned.
    assert tuned * 5 < untuned, (tuned, untuned)
    print(f"minor faults over ~50 MB of ~1 MB requests: tuned {tuned}, glibc defaults {untuned}")
