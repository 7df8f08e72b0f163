"""Loading ``__consumer_offsets`` at start-up (Kafka's CoordinatorLoaderImpl): every partition is
read in log order and each record or transaction marker is handed to the coordinator's replay."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from kafka_sidecar.storage.log_manager import LogManager
from kafka_sidecar.storage.topic_registry import TopicInfo

from ..coordinator.runtime import CoordinatorRuntime
from ..share.group_records import is_share_group_record
from ..transactions.records import COMMIT_MARKER
from .records import OFFSETS_TOPIC


class ReplayTarget(Protocol):
    """What the loader replays into (Kafka's CoordinatorPlayback: the shard's replay methods)."""

    def replay(self, key_bytes: bytes, value: bytes | None, record_offset: int) -> None: ...

    def replay_transactional(self, producer_id: int, key_bytes: bytes, value: bytes | None, record_offset: int) -> None: ...

    def complete_transaction(self, producer_id: int, commit: bool, partition: int) -> None: ...


def load_offsets_topic(log_manager: LogManager, info: TopicInfo, target: ReplayTarget) -> int:
    """Read every partition of the offsets topic and replay its records (storage thread, before
    serving). Returns the number of records replayed."""
    count = 0
    share_replay = _share_replay(target)
    for p in range(info.partitions):
        lg = log_manager.get_log(OFFSETS_TOPIC, p)
        if lg is None:
            continue

        def apply(record_offset: int, producer_id: int, _epoch: int, key: bytes | None, value: bytes | None,
                  marker: int | None, p: int = p) -> bool:
            if marker is not None:
                target.complete_transaction(producer_id, marker == COMMIT_MARKER, p)
                return False
            if key is None:
                return False
            if share_replay is not None and is_share_group_record(key):
                share_replay(key, value)  # share groups' records (server/share/group_records.py)
            elif producer_id != -1:
                target.replay_transactional(producer_id, key, value, record_offset)
            else:
                target.replay(key, value, record_offset)
            return True

        count += CoordinatorRuntime.load([lg], apply)
    return count


def _share_replay(target: Any) -> Callable[[bytes, bytes | None], None] | None:
    """The share coordinator's replay of share group records, if the target's broker has one."""
    share = getattr(getattr(target, "broker", None), "share_coordinator", None)
    return getattr(share, "replay_group_record", None)
