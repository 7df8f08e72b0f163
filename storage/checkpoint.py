"""Kafka's offset checkpoint files, written the way Kafka writes them.

Format (``OffsetCheckpointFile``): ``0\\n<count>\\n<topic> <partition> <offset>\\n...``.
Writes go to ``<file>.tmp``, are fsynced, then renamed over the file and the
directory is fsynced, so a crash leaves either the old or the new file whole.
"""

from __future__ import annotations

import json
import logging
import os
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from . import failpoints

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
CHECKPOINT_VERSION = 0
T = TypeVar("T")


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


# ---- JSON state files with a copy (topics, ACLs): ours, not Kafka's ------------------------------


def json_checksum(payload: Any) -> int:
    """CRC-32 of a JSON payload in canonical form: what a state file stores beside its payload."""
    return zlib.crc32(json.dumps(payload, sort_keys=True, separators=(",", ":")).encode())


def backup_path(path: Path) -> Path:
    return path.with_name(path.name + ".bak")


def write_with_copy(path: Path, document: dict[str, Any]) -> None:
    """Write a JSON state file (tmp + fsync + rename), then its ``.bak`` copy. The copy needs no
    fsync: after a power loss a torn copy fails its checksum. OSError if the file itself cannot
    be written (the old one stays as it was); a copy that cannot be written is only logged."""
    text = (json.dumps(document, indent=1, sort_keys=True) + "\n").encode()
    atomic_write(path, text)
    try:
        atomic_write(backup_path(path), text, sync=False)
    except OSError as e:
        log.warning("cannot write %s: %s", backup_path(path).name, e)


def read_with_copy(path: Path, parse: Callable[[str], T], what: str) -> tuple[T | None, list[str]]:
    """The first of ``path`` and its copy that ``parse`` accepts (ValueError: damaged), and the
    problems met on the way; (None, []) if neither exists. Restoring from the copy is logged;
    what to do when both are damaged is the caller's policy."""
    problems: list[str] = []
    for i, candidate in enumerate((path, backup_path(path))):
        try:
            value = parse(candidate.read_text())
        except FileNotFoundError:
            continue
        except (OSError, ValueError) as e:
            problems.append(f"{candidate.name}: {e}")
            continue
        if problems:
            log.warning("%s is damaged (%s): %s restored from %s", path.name, problems[0], what, candidate.name)
        elif i == 1:
            log.warning("%s is missing: %s restored from %s", path.name, what, candidate.name)
        return value, problems
    return None, problems
