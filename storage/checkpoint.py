"""Kafka's offset checkpoint files, written the way Kafka writes them.

Format (``OffsetCheckpointFile``): ``0\\n<count>\\n<topic> <partition> <offset>\\n...``.
Writes go to ``<file>.tmp``, are fsynced, then renamed over the file and the
directory is fsynced, so a crash leaves either the old or the new file whole.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from . import failpoints

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
CHECKPOINT_VERSION = 0


def atomic_write(path: Path, data: bytes, *, sync: bool = True) -> None:
    """Replace ``path`` with ``data`` via tmp + fsync + rename + dir fsync (no fsyncs unless ``sync``)."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        try:
            view = memoryview(data)
            while view:  # a write may be short (disk filling up)
                view = view[os.write(fd, view):]
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        failpoints.hit("checkpoint.before_rename")
        os.replace(tmp, path)
    except BaseException:
        # Disk full or read-only: the old file stays as it was; no half-written .tmp is left.
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        raise
    if sync:
        fsync_dir(path.parent)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_offsets(path: Path, offsets: dict[TopicPartition, int]) -> None:
    lines = [str(CHECKPOINT_VERSION), str(len(offsets))]
    lines += [f"{topic} {partition} {offset}" for (topic, partition), offset in offsets.items()]
    atomic_write(path, ("\n".join(lines) + "\n").encode())


def read_offsets(path: Path) -> dict[TopicPartition, int]:
    """Read a checkpoint; a missing file is empty, a malformed one is logged and ignored.

    Kafka refuses to start on a malformed checkpoint; we recover instead (the
    checkpoint only saves work: recovery points and start offsets are rebuilt
    conservatively without it), and say so.
    """
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as e:  # unreadable, or not UTF-8
        log.warning("ignoring unreadable checkpoint file %s: %s", path, e)
        return {}
    try:
        lines = text.split("\n")
        if int(lines[0]) != CHECKPOINT_VERSION:
            raise ValueError(f"unknown version {lines[0]!r}")
        count = int(lines[1])
        if count < 0:
            raise ValueError(f"negative count {count}")
        result: dict[TopicPartition, int] = {}
        for line in lines[2 : 2 + count]:
            topic, partition, offset = line.split(" ")
            if not topic or int(partition) < 0 or int(offset) < 0:
                raise ValueError(f"bad entry {line!r}")
            result[(topic, int(partition))] = int(offset)
        if len(result) != count:
            raise ValueError(f"expected {count} entries, found {len(result)}")
        if any(line.strip() for line in lines[2 + count :]):
            # As Kafka: more lines than the count says (a damaged count) makes the file malformed.
            raise ValueError(f"more than {count} entries")
        return result
    except (ValueError, IndexError) as e:
        log.warning("ignoring malformed checkpoint file %s: %s", path, e)
        return {}
