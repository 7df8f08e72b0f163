"""Share sessions (Kafka's ShareSessionCache, ShareSession, CachedSharePartition): the partitions
a member fetches, by epoch.

A ShareFetch with epoch 0 opens a session (the partitions it names), later requests carry the
next epoch and update it (Kafka's ShareSession.update: the request's partitions are added first,
then the forgotten ones removed, so a partition named in both leaves the session), epoch -1
closes it. A session is keyed by group and member id, as Kafka's ShareSessionKey, and belongs to
the connection that opened it: when that connection closes the session goes and the member's
acquired records on its partitions are released (Kafka's ClientConnectionDisconnectListener and
ShareGroupListener.onMemberLeave); a member leaving its group by heartbeat does not touch it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
SHARE_SESSION_NOT_FOUND = 122
INVALID_SHARE_SESSION_EPOCH = 123
SHARE_SESSION_LIMIT_REACHED = 133
INVALID_REQUEST = 42

SharePartitionKey = tuple[uuid.UUID, int]
SessionKey = tuple[str, str]


@dataclass
class CachedSharePartition:
    """One partition of a session: the topic name it had when it was added (None: the topic id
    was unknown then, answered UNKNOWN_TOPIC_ID), and whether the next answer must carry it."""

    topic: str | None
    requires_update: bool = False

    def must_respond(self, has_records: bool, error: int) -> bool:
        """Kafka's CachedSharePartition.maybeUpdateResponseData: a partition is in a subsequent
        session's answer when it has records, an error, or was just added (or erred last time)."""
        respond = has_records or self.requires_update
        self.requires_update = False
        if error:
            self.requires_update = respond = True
        return respond


@dataclass
class ShareSession:
    group_id: str
    member_id: str
    epoch: int
    connection: object | None = None
    # Insertion-ordered: the order partitions are fetched in (those that returned records move
    # to the end, as Kafka's ShareSessionContext does).
    partitions: dict[SharePartitionKey, CachedSharePartition] = field(default_factory=dict)

    @property
    def key(self) -> SessionKey:
        return self.group_id, self.member_id

    def update(self, fetch: list[tuple[SharePartitionKey, str | None]], forget: list[SharePartitionKey]) -> None:
        """Kafka's ShareSession.update: add the request's partitions, then remove the forgotten."""
        for key, topic in fetch:
            if key not in self.partitions:
                self.partitions[key] = CachedSharePartition(topic, requires_update=True)
        for key in forget:
            self.partitions.pop(key, None)

    def move_to_end(self, key: SharePartitionKey) -> None:
        if key in self.partitions:
            self.partitions[key] = self.partitions.pop(key)


def next_epoch(epoch: int) -> int:
    """Kafka's ShareRequestMetadata.nextEpoch: wraps to 1 after Integer.MAX_VALUE."""
    return 1 if epoch == 2**31 - 1 else epoch + 1


class ShareSessionError(Exception):
    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


class ShareSessionCache:
    def __init__(self) -> None:
        self.sessions: dict[SessionKey, ShareSession] = {}
        # The session each connection opened last, and whether it is stale (removed since).
        self.by_connection: dict[object, tuple[SessionKey, bool]] = {}

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        return self.sessions.get((group_id, member_id))

    def create(self, group_id: str, member_id: str, fetch: list[tuple[SharePartitionKey, str | None]],
               connection: object | None, max_entries: int) -> ShareSession:
        """Epoch 0: a new session replacing any earlier one of the member (Kafka's newContext and
        maybeCreateSession); SHARE_SESSION_LIMIT_REACHED when ``max_entries`` are open."""
        self.remove(group_id, member_id)
        if len(self.sessions) >= max_entries:
            raise ShareSessionError(SHARE_SESSION_LIMIT_REACHED)
        session = ShareSession(group_id, member_id, next_epoch(INITIAL_EPOCH), connection,
                               {key: CachedSharePartition(topic) for key, topic in fetch})
        self.sessions[session.key] = session
        if connection is not None:
            self.by_connection[connection] = (session.key, False)
        return session

    def subsequent(self, group_id: str, member_id: str, epoch: int) -> ShareSession:
        """A request of an existing session at its expected epoch; the epoch moves on."""
        session = self.sessions.get((group_id, member_id))
        if session is None:
            raise ShareSessionError(SHARE_SESSION_NOT_FOUND)
        if epoch != session.epoch:
            raise ShareSessionError(INVALID_SHARE_SESSION_EPOCH)
        session.epoch = next_epoch(epoch)
        return session

    def existing(self, group_id: str, member_id: str) -> ShareSession:
        """Epoch -1 (Kafka's FinalContext): the session must exist; its epoch is not checked."""
        session = self.sessions.get((group_id, member_id))
        if session is None:
            raise ShareSessionError(SHARE_SESSION_NOT_FOUND)
        return session

    def remove(self, group_id: str, member_id: str) -> ShareSession | None:
        session = self.sessions.pop((group_id, member_id), None)
        if session is not None and session.connection is not None:
            entry = self.by_connection.get(session.connection)
            if entry is not None and entry[0] == session.key:
                self.by_connection[session.connection] = (entry[0], True)
        return session

    def disconnected(self, connection: object) -> tuple[SessionKey | None, str | None]:
        """A connection closed: (the session key it still owned, to be released as a member
        leaving, or None; the group to check for emptiness, or None)."""
        entry = self.by_connection.pop(connection, None)
        if entry is None:
            return None, None
        key, stale = entry
        return (None if stale else key), key[0]

    def group_has_sessions(self, group_id: str) -> bool:
        return any(g == group_id for g, _ in self.sessions)

    def remove_all(self) -> None:
        self.sessions.clear()
