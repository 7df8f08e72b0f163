"""Share sessions (Kafka's ShareSessionCache): the partitions a member fetches, by epoch.

A ShareFetch with epoch 0 opens a session (the partitions it names), later requests carry the
next epoch and add or forget partitions, epoch -1 closes it. A session is keyed by group and
member id, as Kafka's ShareSessionKey.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
SHARE_SESSION_NOT_FOUND = 122
INVALID_SHARE_SESSION_EPOCH = 123
INVALID_REQUEST = 42

SharePartitionKey = tuple[uuid.UUID, int]


@dataclass
class ShareSession:
    group_id: str
    member_id: str
    epoch: int
    # Insertion-ordered: the order partitions are fetched in.
    partitions: dict[SharePartitionKey, None] = field(default_factory=dict)


def next_epoch(epoch: int) -> int:
    """Kafka's ShareRequestMetadata.nextEpoch: wraps to 1 after Integer.MAX_VALUE."""
    return 1 if epoch == 2**31 - 1 else epoch + 1


class ShareSessionCache:
    def __init__(self) -> None:
        self.sessions: dict[tuple[str, str], ShareSession] = {}

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        return self.sessions.get((group_id, member_id))

    def open(self, group_id: str, member_id: str) -> ShareSession:
        """Epoch 0: a new session, replacing any earlier one of the member."""
        session = ShareSession(group_id, member_id, next_epoch(INITIAL_EPOCH))
        self.sessions[(group_id, member_id)] = session
        return session

    def check(self, group_id: str, member_id: str, epoch: int) -> tuple[int, ShareSession | None]:
        """A request of an existing session: (error, session). The session's expected epoch
        moves on only when the epoch matched."""
        session = self.sessions.get((group_id, member_id))
        if session is None:
            return SHARE_SESSION_NOT_FOUND, None
        if epoch == FINAL_EPOCH:
            return 0, session
        if epoch != session.epoch:
            return INVALID_SHARE_SESSION_EPOCH, None
        session.epoch = next_epoch(epoch)
        return 0, session

    def close(self, group_id: str, member_id: str) -> ShareSession | None:
        return self.sessions.pop((group_id, member_id), None)

    def remove_member(self, group_id: str, member_id: str) -> None:
        self.sessions.pop((group_id, member_id), None)
