"""Open index descriptors are bounded (storage/index.py IndexFilePool; INDEX_FILES outside a LogManager): written indexes past
the cap close the least recently used one, which reopens at its next write with nothing lost."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from kafka_sidecar.storage import index as index_module
from kafka_sidecar.storage.index import OffsetIndex


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.fixture
def small_cap():
    saved = index_module.INDEX_FILES.cap
    index_module.INDEX_FILES.cap = 8
    try:
        yield 8
    finally:
        index_module.INDEX_FILES.cap = saved


def test_written_indexes_keep_at_most_the_cap_open(tmp_path: Path, small_cap: int) -> None:
    before = _open_fds()
    indexes = [OffsetIndex(tmp_path / f"{i:020d}.index", 0, 4096, writable=True) for i in range(40)]
    try:
        for round_ in range(3):
            for i, idx in enumerate(indexes):
                idx.append(round_ * 10 + 1, (round_ + 1) * 100 + i)
                assert _open_fds() - before <= small_cap
        for i, idx in enumerate(indexes):
            idx.flush()  # a closed one is reopened to fsync what it wrote
            assert idx.keys == [1, 11, 21] and idx.values == [100 + i, 200 + i, 300 + i]
    finally:
        for idx in indexes:
            idx.close()
    for i in range(40):  # what reached the files, read back by a fresh index
        again = OffsetIndex(tmp_path / f"{i:020d}.index", 0, 4096, writable=False)
        assert again.keys == [1, 11, 21] and again.values == [100 + i, 200 + i, 300 + i]
        again.close()
    assert _open_fds() == before


def test_a_pinned_descriptor_is_not_closed(tmp_path: Path, small_cap: int) -> None:
    first = OffsetIndex(tmp_path / "first.index", 0, 4096, writable=True)
    first.append(1, 10)
    fd = first._open(pin=True)  # in use by another thread, say
    others = [OffsetIndex(tmp_path / f"o{i}.index", 0, 4096, writable=True) for i in range(20)]
    try:
        for i, idx in enumerate(others):
            idx.append(1, i)
        assert first._fd == fd and os.fstat(fd).st_size >= 8  # still open: it was pinned
    finally:
        first._unpin()
        for idx in [first, *others]:
            idx.close()
