"""LogManager: the data directory, every partition's Log, checkpoints and shutdown.

The directory is laid out as Kafka lays out one ``log.dirs`` entry, so Kafka's
tools read it: ``meta.properties``, offset checkpoints, ``.kafka_cleanshutdown``,
and one ``<topic>-<partition>`` directory per partition holding segments and
``partition.metadata``. What Kafka keeps in its KRaft metadata log is kept beside
them by other modules: topics and their configs (``topic_registry.py``, consulted
here for a topic's id and configs), producer ids (``producer_id_manager.py``) and
dynamic broker configs (``dynamic_broker_config.py``, which hands the log defaults
they imply to ``reconfigure_default_log_config``).
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import json
import logging
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from . import checkpoint, failpoints
from .cleaner import LogCleaner
from .log import Log, parse_partition_dir
from .log_config import LogConfig
from .log_segment import LogSegment, OpenFilePools
from .metadata_files import check_partition_metadata, load_meta_properties, write_partition_metadata
from .topic_registry import TopicInfo, TopicJournal, TopicRegistry

log = logging.getLogger(__name__)
_T = TypeVar("_T")

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
LOCK_FILE = ".lock"
DELETE_DIR_SUFFIX = "-delete"
# Kafka's own internal dirs that a sidecar never serves.
IGNORED_DIRS = {"__cluster_metadata-0"}


class DataDirError(Exception):
    """The data directory cannot be used (missing permission, locked by another process...)."""


@dataclass
class CleanerConfig:
    """The ``log.cleaner.*`` broker settings (Kafka's defaults)."""

    enabled: bool = True
    threads: int = 1
    backoff_ms: int = 15000
    dedupe_buffer_size: int = 134217728
    io_buffer_load_factor: float = 0.9
    io_buffer_size: int = 524288
    max_io_bytes_per_second: float = 1.7976931348623157e308


def list_dirs(data_dir: Path) -> list[str]:
    """The names of the directories in ``data_dir``, sorted (scandir: the entry type comes with
    the listing, no stat per partition directory)."""
    with os.scandir(data_dir) as it:
        return sorted(e.name for e in it if e.is_dir())


def scan_partition_dirs(data_dir: Path, dirs: list[str] | None = None) -> list[tuple[tuple[str, int], Path]]:
    """The partition directories of a data dir, in name order; the ``-delete`` directories an
    unfinished topic deletion left are removed on the way. ``dirs``: ``list_dirs(data_dir)``,
    when the caller has listed it already."""
    out: list[tuple[tuple[str, int], Path]] = []
    for entry in list_dirs(data_dir) if dirs is None else dirs:
        if entry in IGNORED_DIRS:
            continue
        path = data_dir / entry
        if entry.endswith(DELETE_DIR_SUFFIX):
            log.info("removing %s left by an unfinished topic deletion", entry)
            shutil.rmtree(path, ignore_errors=True)
            continue
        tp = parse_partition_dir(entry)
        if tp is not None:
            out.append((tp, path))
    return out


def load_logs(items: list[_T], load: Callable[[_T], Log], threads: int) -> list[Log]:
    """Kafka's LogManager.loadLogs: the logs of a data dir loaded (and recovered) on a pool of
    ``num.recovery.threads.per.data.dir`` threads; the results in the order of ``items``."""
    with gc_paused():
        if threads <= 1 or len(items) <= 1:
            return [load(item) for item in items]
        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="log-recovery") as pool:
            return list(pool.map(load, items))


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector off while the logs load, and what they left frozen after.

    Loading makes objects that live as long as the broker (every log, segment and index) and
    almost no garbage; each collection meanwhile walks all of them again (10,000 partitions:
    ~0.15-0.3 s of a ~1.1 s load), and the first full collection after it does too. Frozen
    (gc.freeze) they are left out of every later collection; ``LogManager.shutdown`` and topic
    deletion unfreeze, so cycles among what is dropped are collected again.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


def load_summary(logs: list[Log]) -> str:
    """What the start-up summary line says of the loaded logs (segments, and those recovered)."""
    return f"{sum(len(lg.segments) for lg in logs)} segments, {sum(lg.recovered_at_load for lg in logs)} recovered"


class LogManager:
    def __init__(self, data_dir: Path, broker_log_defaults: dict[str, Any] | None = None, cleaner_config: CleanerConfig | None = None,
                 recovery_threads: int = 2, metadata: TopicRegistry | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.recovery_threads = max(1, recovery_threads)  # num.recovery.threads.per.data.dir: loadLogs' pool
        self.loaded_partitions = 0  # logs loaded so far by startup() (start-up progress)
        self.cleaner_config = cleaner_config or CleanerConfig()
        self.cleaner: LogCleaner | None = None
        # The topic defaults in effect: the static ones, overlaid by dynamic broker configs
        # (DynamicBrokerConfig calls reconfigure_default_log_config).
        self.broker_log_defaults = dict(broker_log_defaults or {})
        # The topics (ids, configs) whose logs these are; shares the lock below.
        self._lock = threading.RLock()  # guards the logs/topics maps against background threads
        self.metadata = metadata if metadata is not None else TopicRegistry(self.data_dir, self._lock)
        self._lock = self.metadata.lock
        self.logs: dict[tuple[str, int], Log] = {}
        # This manager's pools of open files (inactive segments' logs, index descriptors).
        self.pools = OpenFilePools()
        self.cluster_id = ""
        self.directory_id = ""
        self._lock_fd: int | None = None
        self.had_clean_shutdown = False
        # Which partitions have a log here: all (None), or those a cluster node leads
        # (server/cluster/placement.py); the topics list every partition either way.
        self.is_local: Callable[[str, int], bool] | None = None
        # A cluster's shared record of topic changes (None: this node alone decides).
        self.journal: TopicJournal | None = None
        # Segments renamed .deleted, waiting for file.delete.delay.ms: (due ms, segment).
        self._pending_deletes: list[tuple[int, LogSegment]] = []

    # ---- start-up ------------------------------------------------------------------

    def startup(self) -> None:
        """Lock the directory (unless ``lock_data_dir`` did), read the topics file, load every log."""
        if self._lock_fd is None:
            self.lock_data_dir()
        self.metadata.load()
        self._load_logs()

    def lock_data_dir(self) -> None:
        """Create and lock the directory, read or write meta.properties (DataDirError if it
        cannot be used): the first step of a start, before anything else reads the dir."""
        try:
            self.data_dir.mkdir(parents=True, exist_ok=True)
            self._lock_fd = os.open(self.data_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise DataDirError(f"cannot use data dir {self.data_dir}: {e.strerror}") from None
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise DataDirError(f"data dir {self.data_dir} is in use by another process (lock held on {LOCK_FILE})") from None
        if not os.access(self.data_dir, os.W_OK):
            raise DataDirError(f"data dir {self.data_dir} is not writable")
        self.cluster_id, self.directory_id = load_meta_properties(self.data_dir)

    def _load_logs(self) -> None:
        marker = self.data_dir / CLEAN_SHUTDOWN_FILE
        self.had_clean_shutdown = marker.exists()
        dirs = list_dirs(self.data_dir)
        fresh = not dirs
        recovery_points = checkpoint.read_offsets(self.data_dir / RECOVERY_POINT_CHECKPOINT)
        start_offsets = checkpoint.read_offsets(self.data_dir / LOG_START_OFFSET_CHECKPOINT)
        started = time.monotonic()
        to_load: list[tuple[tuple[str, int], Path, TopicInfo]] = []
        configs: dict[str, LogConfig] = {}  # one LogConfig per topic at start (the same for its partitions)
        with gc_paused():  # the scan makes objects that live as long as the broker, too
            for (topic, partition), path in scan_partition_dirs(self.data_dir, dirs):
                info = self.metadata.found_partition(topic, partition)
                to_load.append(((topic, partition), path, info))

        def load(item: tuple[tuple[str, int], Path, TopicInfo]) -> Log:
            (topic, partition), path, info = item
            config = configs.get(topic)
            if config is None:
                config = configs[topic] = self.log_config(info)
            lg = Log(path, topic, partition, config, recovery_point=recovery_points.get((topic, partition), 0),
                     log_start_offset=start_offsets.get((topic, partition)), clean_shutdown=self.had_clean_shutdown, pools=self.pools)
            self.loaded_partitions += 1  # for the progress report (racy, made exact below)
            return lg

        # Recovery threads only when there is recovery to do: loading logs a clean stop left is
        # Python work under the GIL, which a second thread only slows down (10,000 partitions:
        # 1.6-1.9 s of CPU on one thread, 2.1-3.3 s on two, and longer in wall time).
        threads = self.recovery_threads if not self.had_clean_shutdown else 1
        loaded = load_logs(to_load, load, threads)
        self.loaded_partitions = len(loaded)
        for (tp, path, info), lg in zip(to_load, loaded, strict=True):
            self.logs[tp] = lg
            check_partition_metadata(path, info.topic_id)
        load_ms = (time.monotonic() - started) * 1000
        # Partitions whose directory vanished stay declared by the topics file.
        for info, p in self.metadata.missing_partitions():
            if self.is_local is None or self.is_local(info.name, p):
                self._create_log(info, p)
        marker.unlink(missing_ok=True)
        cc = self.cleaner_config
        self.cleaner = LogCleaner(
            self.data_dir, self.all_logs, threads=cc.threads, dedupe_buffer_size=cc.dedupe_buffer_size,
            io_buffer_load_factor=cc.io_buffer_load_factor, backoff_ms=cc.backoff_ms, enabled=cc.enabled,
            io_buffer_size=cc.io_buffer_size, max_io_bytes_per_second=cc.max_io_bytes_per_second,
            on_segments_deleted=self._schedule_segment_deletion,
        )
        self.cleaner.start()
        log.info("loaded %d partitions of %d topics (%s) from %s in %.0f ms on %d threads (%s)", len(self.logs), len(self.metadata.topics),
                 load_summary(loaded), self.data_dir, load_ms, threads,
                 "new data dir" if fresh else "clean shutdown" if self.had_clean_shutdown else "unclean shutdown: recovered from recovery points")
        self.metadata.save()

    # ---- topics --------------------------------------------------------------------

    def log_config(self, info: TopicInfo) -> LogConfig:
        return LogConfig(self.broker_log_defaults, info.configs)

    def all_logs(self) -> list[Log]:
        with self._lock:
            return list(self.logs.values())

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self.logs.get((topic, partition))

    def create_topic(self, name: str, partitions: int, configs: dict[str, Any] | None = None) -> TopicInfo:
        """Create the logs of a new topic, then register it (FileExistsError if the name is taken)."""
        with self._journal_turn(), self._lock:
            info = self.metadata.new_topic(name, partitions, configs)
            if self.journal is not None:
                self.journal.record_topic(info)
            for p in range(partitions):
                if self.is_local is None or self.is_local(name, p):
                    self._create_log(info, p)
            self.metadata.add(info)
            log.info("created topic %s with %d partitions, configs %s", name, partitions, info.configs or "{}")
            return info

    def _journal_turn(self, journaled: bool = True) -> contextlib.AbstractContextManager[None]:
        """A cluster node's turn to change topics (before the lock: the journal's catch-up takes it)."""
        return self.journal.turn() if self.journal is not None and journaled else contextlib.nullcontext()

    def adopt_topic(self, name: str, topic_id: uuid.UUID, partitions: int, configs: dict[str, Any]) -> None:
        """Hold topic ``name`` as another node of the cluster made or changed it: its id,
        partition count and configs; the logs of the partitions this node leads created."""
        with self._lock:
            info = self.metadata.topics.get(name)
            if info is None:
                info = TopicInfo(name, topic_id, partitions, dict(configs))
                for p in range(partitions):
                    if self.is_local is None or self.is_local(name, p):
                        self._create_log(info, p)
                self.metadata.add(info)
                log.info("topic %s (%d partitions) made by another node", name, partitions)
                return
            for p in range(info.partitions, partitions):
                if self.is_local is None or self.is_local(name, p):
                    self._create_log(info, p)
            changed = info.partitions != partitions or info.configs != configs
            info.partitions = max(info.partitions, partitions)
            if info.configs != configs:
                info.configs = dict(configs)
                self._reconfigure_logs(name)
            if changed:
                self.metadata.save()

    def _create_log(self, info: TopicInfo, partition: int) -> Log:
        path = self.data_dir / f"{info.name}-{partition}"
        path.mkdir(parents=True, exist_ok=True)
        write_partition_metadata(path, info.topic_id)
        lg = Log(path, info.name, partition, self.log_config(info), pools=self.pools)
        self.logs[(info.name, partition)] = lg
        return lg

    def add_partitions(self, name: str, count: int) -> TopicInfo:
        """Grow topic ``name`` to ``count`` partitions (CreatePartitions): the new partitions'
        logs are created empty, then the new count is kept in the topics file."""
        with self._journal_turn(), self._lock:
            info = self.metadata.topics[name]
            if count <= info.partitions:
                raise ValueError(f"topic {name} has {info.partitions} partitions; {count} is not an increase")
            if self.journal is not None:
                self.journal.record_topic(TopicInfo(name, info.topic_id, count, info.configs))
            before = info.partitions
            for p in range(before, count):
                if self.is_local is None or self.is_local(name, p):
                    self._create_log(info, p)
            info.partitions = count
            self.metadata.save()
            log.info("topic %s grew from %d to %d partitions", name, before, count)
            return info

    def delete_topic(self, name: str, *, journaled: bool = True) -> list[Path]:
        """Delete a topic at once (both steps below); returns its renamed dirs for removal.
        ``journaled=False``: a deletion another node of the cluster made (not recorded again)."""
        info, logs = self.detach_topic(name, journaled=journaled)
        return self.finish_topic_deletion(info, logs)

    def detach_topic(self, name: str, *, journaled: bool = True) -> tuple[TopicInfo, list[Log]]:
        """First step of a deletion, cheap enough for the event loop: the topic and its logs
        leave the maps, so no new append or read reaches them; the name stays reserved
        (``is_being_deleted``) until ``finish_topic_deletion`` has renamed its dirs."""
        with self._journal_turn(journaled), self._lock:
            info = self.metadata.detach(name)
            if self.journal is not None and journaled:
                self.journal.record_deletion(info)
            logs = [lg for p in range(info.partitions) if (lg := self.logs.pop((name, p), None)) is not None]
            return info, logs

    def finish_topic_deletion(self, info: TopicInfo, logs: list[Log]) -> list[Path]:
        """Second step (blocking: the storage thread): stop cleaning, close the logs, rename
        their dirs ``<dir>.<uuid>-delete`` and write the topics file without the topic."""
        renamed: list[Path] = []
        try:
            for p in range(info.partitions):
                if self.cleaner is not None:
                    # Kafka aborts and pauses cleaning of a partition being deleted.
                    self.cleaner.manager.abort_and_pause(info.name, p)
                    self.cleaner.manager.remove(info.name, p)
                    self.cleaner.manager.resume(info.name, p)
            for lg in logs:
                lg.close(trim=False)
                target = lg.dir.with_name(f"{lg.dir.name}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}")
                os.rename(lg.dir, target)
                renamed.append(target)
            with self._lock:
                self.metadata.save()
        finally:
            self.metadata.deletion_done(info.name)
        gc.unfreeze()  # the dropped logs may be frozen since the start (gc_paused): collectable again
        log.info("deleted topic %s (%d partition dirs renamed for removal)", info.name, len(renamed))
        return renamed

    @staticmethod
    def remove_dirs(paths: list[Path]) -> None:
        for p in paths:
            shutil.rmtree(p, ignore_errors=True)

    def highest_producer_id(self, below: int = 2**63) -> int:
        """The highest producer id below ``below`` some log holds state for (-1 if none):
        ProducerIdManager never hands out one below it."""
        with self._lock:
            return max((pid for lg in self.logs.values() for pid in lg.producer_state.producers if pid < below), default=-1)

    # ---- config changes (AlterConfigs / IncrementalAlterConfigs) ----------------------------

    def alter_topic_configs(self, topic: str, configs: dict[str, Any]) -> TopicInfo:
        """Replace a topic's config overrides (parsed values): kept by the topic registry, and in
        effect at once in every partition's log (later appends, rolls, retention checks)."""
        with self._journal_turn(), self._lock:
            info = self.metadata.topics[topic]
            if self.journal is not None:
                self.journal.record_topic(TopicInfo(topic, info.topic_id, info.partitions, dict(configs)))
            info.configs = dict(configs)
            self.metadata.save()
            self._reconfigure_logs(topic)
            log.info("topic %s configs are now %s", topic, info.configs or "{}")
            return info

    def reconfigure_default_log_config(self, defaults: dict[str, Any]) -> None:
        """New topic defaults (Kafka's LogManager.reconfigureDefaultLogConfig): every log's
        LogConfig is rebuilt with them at once."""
        with self._lock:
            self.broker_log_defaults = dict(defaults)
            self._reconfigure_logs()

    def _reconfigure_logs(self, topic: str | None = None) -> None:
        """Give the logs of ``topic`` (or all) a LogConfig built from the current settings."""
        for (name, partition), lg in list(self.logs.items()):
            info = self.metadata.topics.get(name)
            if info is not None and (topic is None or name == topic):
                was_compact = lg.config.compact
                lg.config = self.log_config(info)
                if was_compact and not lg.config.compact and self.cleaner is not None:
                    # Kafka aborts the cleaning of a log that is no longer compacted.
                    self.cleaner.manager.abort_cleaning(name, partition)

    # ---- retention ---------------------------------------------------------------------

    def cleanup_logs(self, now_ms: int | None = None) -> int:
        """One retention pass (Kafka's kafka-log-retention task) over the non-compacted logs,
        paused in the cleaner meanwhile (compacted logs are the cleaner threads', see
        LogCleaner.delete_old_segments); returns the number of segments scheduled for deletion."""
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        with self._lock:
            logs = list(self.logs.values())
        count = 0
        selected = self.cleaner.retention_logs(logs) if self.cleaner is not None else contextlib.nullcontext(
            [lg for lg in logs if not lg.config.compact])
        with selected as deletable:
            for lg in deletable:
                removed = lg.delete_old_segments(now_ms)
                if removed:
                    count += len(removed)
                    self._schedule_segment_deletion(lg, removed, now_ms, write_checkpoint=False)
        if count:
            self.checkpoint_log_start_offsets()
        self.delete_due_segments(now_ms)
        return count

    def _schedule_segment_deletion(self, lg: Log, removed: list[LogSegment], now_ms: int, write_checkpoint: bool = True) -> None:
        """Segments retention took out of ``lg`` (renamed .deleted): deleted after file.delete.delay.ms."""
        due = now_ms + lg.config.file_delete_delay_ms
        with self._lock:
            self._pending_deletes += [(due, seg) for seg in removed]
        if write_checkpoint:
            self.checkpoint_log_start_offsets()

    def remove_expired_producers(self, now_ms: int, expiration_ms: int) -> int:
        """Forget idempotent producers idle for ``producer.id.expiration.ms``."""
        with self._lock:
            logs = list(self.logs.values())
        removed = 0
        for lg in logs:
            with lg.lock:
                removed += lg.producer_state.remove_expired(now_ms, expiration_ms)
        return removed

    def delete_due_segments(self, now_ms: int | None = None) -> int:
        """Close and remove ``.deleted`` segments whose file.delete.delay.ms has passed
        (those from retention, and those the cleaner replaced)."""
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        with self._lock:
            for lg in self.logs.values():
                if lg.retired_segments:
                    due_at = now_ms + lg.config.file_delete_delay_ms
                    self._pending_deletes += [(due_at, seg) for seg in lg.take_retired_segments()]
            due = [seg for t, seg in self._pending_deletes if t <= now_ms]
            self._pending_deletes = [(t, seg) for t, seg in self._pending_deletes if t > now_ms]
        for seg in due:
            seg.close()
            for p in seg.paths():
                p.unlink(missing_ok=True)
                failpoints.hit("manager.delete_due.between_files")
            log.info("deleted segment files of %s at base offset %d", seg.dir.name, seg.base_offset)
        return len(due)

    def delete_records(self, topic: str, partition: int, offset: int) -> int:
        """DeleteRecords for one partition: raise its log start offset (``-1`` = the
        high watermark), checkpoint it, and return the new low watermark."""
        lg = self.logs[(topic, partition)]
        target = lg.high_watermark if offset == -1 else offset
        if lg.maybe_increment_log_start_offset(target):
            self.checkpoint_log_start_offsets()
        return lg.log_start_offset

    # ---- checkpoints and shutdown -------------------------------------------------------

    # Each checkpoint file is read and written under the manager lock, so two writers
    # (periodic task, DeleteRecords, retention) never race on its .tmp file and the
    # last write always holds the newest offsets.

    def checkpoint_recovery_points(self) -> None:
        with self._lock:
            offsets = {tp: lg.recovery_point for tp, lg in self.logs.items()}
            checkpoint.write_offsets(self.data_dir / RECOVERY_POINT_CHECKPOINT, offsets)

    def checkpoint_log_start_offsets(self) -> None:
        with self._lock:
            offsets = {tp: lg.log_start_offset for tp, lg in self.logs.items() if lg.log_start_offset > lg.segments[0].base_offset}
            checkpoint.write_offsets(self.data_dir / LOG_START_OFFSET_CHECKPOINT, offsets)

    def flush_dirty_logs(self, now_ms: int) -> None:
        """Flush rolled segments (as Kafka does after a roll) and logs whose ``flush.ms`` has passed."""
        with self._lock:
            logs = list(self.logs.values())
        for lg in logs:
            if lg.recovery_point < lg.log_end_offset and now_ms - lg.last_flush_ms >= lg.config.flush_ms:
                lg.flush()
            elif lg.rolled_unflushed:
                lg.flush(lg.active_segment.base_offset)

    def shutdown(self) -> None:
        """Stop the cleaner, flush, close, write checkpoints and the clean-shutdown marker."""
        gc.unfreeze()  # what the start froze (gc_paused) is garbage after this
        if self.cleaner is not None:
            self.cleaner.stop()
        with self._lock:
            for lg in self.logs.values():
                self._pending_deletes += [(0, seg) for seg in lg.take_retired_segments()]
            for lg in self.logs.values():
                lg.flush()
            self.checkpoint_recovery_points()
            self.checkpoint_log_start_offsets()
            for lg in self.logs.values():
                lg.close()
            self.logs.clear()
            # Segments already renamed .deleted: remove them now (a restart would too).
            for _, seg in self._pending_deletes:
                seg.close()
                for p in seg.paths():
                    p.unlink(missing_ok=True)
            self._pending_deletes.clear()
            checkpoint.atomic_write(
                self.data_dir / CLEAN_SHUTDOWN_FILE,
                json.dumps({"version": 0, "brokerEpoch": int(time.time())}, separators=(",", ":")).encode(),
            )
            if self._lock_fd is not None:
                os.close(self._lock_fd)
                self._lock_fd = None
        log.info("log manager shut down cleanly")
