"""LogManager.startup on num.recovery.threads.per.data.dir threads: the same logs, offsets,
segments, indexes and producer state as one thread, after a clean stop and after a crash
(every segment past the recovery point recovered), and one summary line per start.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest
from kafka_sidecar.protocol.record_batch import validate_batches
from kafka_sidecar.protocol.records import Record, encode_batch
from kafka_sidecar.storage.log_manager import (
    CLEAN_SHUTDOWN_FILE,
    RECOVERY_POINT_CHECKPOINT,
    LogManager,
)

T0 = 1_700_000_000_000
DEFAULTS = {"log.segment.bytes": 700, "log.index.interval.bytes": 100}


def filled_data_dir(root: Path) -> Path:
    data = root / "data"
    lm = LogManager(data, DEFAULTS)
    lm.startup()
    for t in range(3):
        lm.create_topic(f"t{t}", 5)
    for (topic, partition), lg in sorted(lm.logs.items()):
        for i in range(3 + partition * 4):
            recs = [Record(j, T0 + i, b"%s-%d" % (topic.encode(), j), b"v" * 30) for j in range(3)]
            kw = {"producer_id": 100 + partition, "producer_epoch": 0, "base_sequence": 3 * i} if partition % 2 else {}
            data_ = bytearray(encode_batch(recs, **kw))
            lg.append_as_leader(data_, validate_batches(data_), now_ms=T0 + i)
    lm.shutdown()
    return data


def state(lm: LogManager) -> dict:
    out = {}
    for tp, lg in lm.logs.items():
        out[tp] = (
            lg.log_start_offset, lg.log_end_offset, lg.recovery_point,
            [(s.base_offset, s.size, s.offset_index.keys, s.offset_index.values, s.time_index.keys, s.time_index.values) for s in lg.segments],
            sorted((pid, e.last_seq, e.producer_epoch) for pid, e in lg.producer_state.producers.items()),
        )
    return out


def files(data: Path) -> dict[str, bytes]:
    return {str(p.relative_to(data)): p.read_bytes() for p in sorted(data.rglob("*")) if p.is_file() and p.name not in (".lock", CLEAN_SHUTDOWN_FILE)}


@pytest.mark.parametrize("crashed", [False, True], ids=["clean", "crashed"])
def test_parallel_load_is_the_serial_load(tmp_path, crashed, caplog):
    data = filled_data_dir(tmp_path)
    if crashed:
        (data / CLEAN_SHUTDOWN_FILE).unlink()
        (data / RECOVERY_POINT_CHECKPOINT).unlink()
    results = {}
    for threads in (1, 4):
        copy = tmp_path / f"copy{threads}"
        shutil.copytree(data, copy)
        lm = LogManager(copy, DEFAULTS, recovery_threads=threads)
        caplog.clear()
        with caplog.at_level(logging.DEBUG, logger="kafka_sidecar.storage"):
            lm.startup()
        assert list(lm.logs) == sorted(lm.logs)  # added in directory order
        assert lm.loaded_partitions == 15
        summary = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO and r.getMessage().startswith("loaded ")]
        assert len(summary) == 1 and summary[0].startswith("loaded 15 partitions of 3 topics (")
        # The recovery threads work only after a crash (a clean load is one thread's work).
        assert f"on {threads if crashed else 1} threads" in summary[0]
        recovered = int(summary[0].split("segments, ")[1].split(" recovered")[0])
        assert (recovered > 0) == crashed
        # Per-partition detail is DEBUG, never INFO.
        assert not [r for r in caplog.records if r.levelno >= logging.INFO and "recovered t" in r.getMessage()]
        results[threads] = state(lm)
        lm.shutdown()
        results[threads, "files"] = files(copy)
    assert results[1] == results[4]
    assert results[1, "files"] == results[4, "files"]
