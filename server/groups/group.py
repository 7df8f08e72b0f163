"""A classic consumer group and its members (Kafka's ClassicGroup / ClassicGroupMember).

Pure state, no I/O: the coordinator drives it. Member iteration follows the
order of Kafka's ``java.util.HashMap`` of member ids (``javaorder.JavaHashMap``), so
the leader chosen after a leader leaves, the protocol chosen on a tie and the
order of the member list sent to the leader are the ones Kafka produces.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from kafka_sidecar.protocol import errors

from ..coordinator.clock import now_ms
from .javaorder import JavaHashMap
from .records import consumer_protocol_topics

CONSUMER_PROTOCOL_TYPE = "consumer"
UNKNOWN_MEMBER_ID = ""
MEMBER_ID_DELIMITER = "-"
EMPTY_ASSIGNMENT = b""


class GroupState(Enum):
    """Kafka's ClassicGroupState: value = the name Kafka reports (DescribeGroups, ListGroups)."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS = {
    GroupState.PREPARING_REBALANCE: {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY},
    GroupState.COMPLETING_REBALANCE: {GroupState.PREPARING_REBALANCE},
    GroupState.STABLE: {GroupState.COMPLETING_REBALANCE},
    GroupState.DEAD: set(GroupState),
    GroupState.EMPTY: {GroupState.PREPARING_REBALANCE},
}


@dataclass
class Member:
    """One member of a classic group (Kafka's ClassicGroupMember)."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]  # (name, metadata) in the member's order of preference
    assignment: bytes = EMPTY_ASSIGNMENT
    awaiting_join: asyncio.Future[dict[str, Any]] | None = None
    awaiting_sync: asyncio.Future[dict[str, Any]] | None = None
    is_new: bool = False

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.awaiting_join is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.awaiting_sync is not None

    def metadata(self, protocol: str | None) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        raise ValueError(f"member {self.member_id} does not support protocol {protocol}")

    def has_satisfied_heartbeat(self) -> bool:
        if self.is_new:
            return False  # new members can expire even while awaiting join
        return self.is_awaiting_join or self.is_awaiting_sync

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return protocols == self.protocols

    def vote(self, candidates: set[str]) -> str:
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} does not support any of {candidates}")

    def protocol_names(self) -> set[str]:
        return {name for name, _ in self.protocols}

    def describe(self, protocol: str | None) -> dict[str, Any]:
        return {
            "member_id": self.member_id,
            "group_instance_id": self.group_instance_id,
            "client_id": self.client_id,
            "client_host": self.client_host,
            "member_metadata": self.metadata(protocol),
            "member_assignment": self.assignment,
        }

    def describe_no_metadata(self) -> dict[str, Any]:
        return {
            "member_id": self.member_id,
            "group_instance_id": self.group_instance_id,
            "client_id": self.client_id,
            "client_host": self.client_host,
            "member_metadata": b"",
            "member_assignment": b"",
        }


def _complete(fut: asyncio.Future[dict[str, Any]] | None, response: dict[str, Any]) -> bool:
    if fut is None:
        return False
    if not fut.done():
        fut.set_result(response)
    return True


@dataclass
class ClassicGroup:
    """Kafka's ClassicGroup state machine (membership, generation, protocol, assignment)."""

    group_id: str
    state: GroupState = GroupState.EMPTY
    previous_state: GroupState = GroupState.DEAD
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    current_state_timestamp: int | None = field(default_factory=now_ms)
    members: JavaHashMap[str, Member] = field(default_factory=JavaHashMap)
    static_members: dict[str, str] = field(default_factory=dict)
    pending_join_members: set[str] = field(default_factory=set)
    pending_sync_members: set[str] = field(default_factory=set)
    num_awaiting_join: int = 0
    supported_protocols: dict[str, int] = field(default_factory=dict)
    new_member_added: bool = False
    subscribed_topics: set[str] | None = None

    # ---- state ---------------------------------------------------------------------

    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    def transition_to(self, target: GroupState) -> None:
        if self.state not in _VALID_PREVIOUS[target]:
            raise RuntimeError(f"group {self.group_id} should be in one of {_VALID_PREVIOUS[target]} before moving to {target}, not {self.state}")
        self.previous_state = self.state
        self.state = target
        self.current_state_timestamp = now_ms()

    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    @property
    def is_empty(self) -> bool:
        return self.state is GroupState.EMPTY

    def current_state_timestamp_or_default(self) -> int:
        return -1 if self.current_state_timestamp is None else self.current_state_timestamp

    # ---- members -------------------------------------------------------------------

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def member(self, member_id: str) -> Member:
        return self.members[member_id]

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def all_members(self) -> list[Member]:
        return self.members.values()

    def num_members(self) -> int:
        return len(self.members)

    def add(self, member: Member, future: asyncio.Future[dict[str, Any]] | None = None) -> None:
        if member.group_instance_id is not None:
            if member.group_instance_id in self.static_members:
                raise RuntimeError(f"static member {member.group_instance_id} is already in group {self.group_id}")
            self.static_members[member.group_instance_id] = member.member_id
        if not len(self.members):
            self.protocol_type = member.protocol_type
        if self.protocol_type != member.protocol_type:
            raise RuntimeError("the group and member's protocol type must be the same")
        if not self.supports_protocols(member.protocol_type, member.protocol_names()):
            raise RuntimeError("none of the member's protocols can be supported")
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self._count_protocols(member, 1)
        member.awaiting_join = future
        if future is not None:
            self.num_awaiting_join += 1
        self.pending_join_members.discard(member.member_id)

    def remove(self, member_id: str) -> None:
        removed = self.members.pop(member_id)
        if removed is not None:
            self._count_protocols(removed, -1)
            if removed.is_awaiting_join:
                self.num_awaiting_join -= 1
            if removed.group_instance_id is not None:
                self.static_members.pop(removed.group_instance_id, None)
        if self.is_leader(member_id):
            keys = self.members.keys()
            self.leader_id = keys[0] if keys else None
        self.pending_join_members.discard(member_id)
        self.pending_sync_members.discard(member_id)

    def _count_protocols(self, member: Member, delta: int) -> None:
        for name, _ in member.protocols:
            self.supported_protocols[name] = self.supported_protocols.get(name, 0) + delta

    def maybe_elect_new_joined_leader(self) -> bool:
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and not leader.is_awaiting_join:
            for m in self.all_members():
                if m.is_awaiting_join:
                    self.leader_id = m.member_id
                    return True
            return False
        return True

    def replace_static_member(self, instance_id: str, old_member_id: str, new_member_id: str, fenced_join: dict[str, Any], fenced_sync: dict[str, Any]) -> Member:
        removed = self.members.pop(old_member_id)
        if removed is None:
            raise RuntimeError(f"cannot replace non-existing member id {old_member_id}")
        # Fence a duplicate member immediately if it awaits a join or sync answer.
        self.complete_join(removed, fenced_join)
        self.complete_sync(removed, fenced_sync)
        new = Member(
            new_member_id, removed.group_instance_id, removed.client_id, removed.client_host,
            removed.rebalance_timeout_ms, removed.session_timeout_ms, removed.protocol_type,
            list(removed.protocols), removed.assignment,
        )
        self.members[new_member_id] = new
        if self.is_leader(old_member_id):
            self.leader_id = new_member_id
        self.static_members[instance_id] = new_member_id
        return new

    def update_member(self, member: Member, protocols: list[tuple[str, bytes]], rebalance_timeout_ms: int, session_timeout_ms: int, future: asyncio.Future[dict[str, Any]] | None) -> None:
        self._count_protocols(member, -1)
        member.protocols = list(protocols)
        self._count_protocols(member, 1)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if future is not None and not member.is_awaiting_join:
            self.num_awaiting_join += 1
        elif future is None and member.is_awaiting_join:
            self.num_awaiting_join -= 1
        member.awaiting_join = future

    def complete_join(self, member: Member, response: dict[str, Any]) -> bool:
        if member.is_awaiting_join:
            _complete(member.awaiting_join, response)
            member.awaiting_join = None
            self.num_awaiting_join -= 1
            return True
        return False

    def complete_sync(self, member: Member, response: dict[str, Any]) -> bool:
        if member.is_awaiting_sync:
            _complete(member.awaiting_sync, response)
            member.awaiting_sync = None
            return True
        return False

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self.pending_join_members

    def add_pending_member(self, member_id: str) -> None:
        self.pending_join_members.add(member_id)

    def has_static_member(self, instance_id: str | None) -> bool:
        return instance_id is not None and instance_id in self.static_members

    def static_member_id(self, instance_id: str) -> str | None:
        return self.static_members.get(instance_id)

    def not_yet_rejoined_members(self) -> list[Member]:
        return [m for m in self.all_members() if not m.is_awaiting_join]

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_awaiting_join and not self.pending_join_members

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    @staticmethod
    def generate_member_id(client_id: str | None, instance_id: str | None) -> str:
        prefix = instance_id if instance_id is not None else (client_id or "")
        return f"{prefix}{MEMBER_ID_DELIMITER}{uuid.uuid4()}"

    def validate_member(self, member_id: str, instance_id: str | None) -> int:
        """0, or the error code Kafka's validateMember raises (UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID)."""
        if instance_id is not None:
            existing = self.static_member_id(instance_id)
            if existing is None:
                return errors.UNKNOWN_MEMBER_ID
            if existing != member_id:
                return errors.FENCED_INSTANCE_ID
        if not self.has_member(member_id):
            return errors.UNKNOWN_MEMBER_ID
        return errors.NONE

    # ---- protocols -----------------------------------------------------------------

    def supports_protocols(self, protocol_type: str, protocol_names: set[str]) -> bool:
        if self.is_empty:
            return bool(protocol_type) and bool(protocol_names)
        n = len(self.members)
        return self.protocol_type == protocol_type and any(self.supported_protocols.get(p, 0) == n for p in protocol_names)

    def _candidate_protocols(self) -> set[str]:
        n = len(self.members)
        return {p for p, count in self.supported_protocols.items() if count == n}

    def select_protocol(self) -> str:
        """Each member votes for its most preferred candidate; most votes wins (Kafka's tie-break order)."""
        if not len(self.members):
            raise RuntimeError("cannot select a protocol for an empty group")
        candidates = self._candidate_protocols()
        votes: JavaHashMap[str, int] = JavaHashMap()
        for m in self.all_members():
            p = m.vote(candidates)
            votes[p] = (votes.get(p) or 0) + 1
        best: str | None = None
        for p, count in votes.items():  # Stream.max keeps the first of equal maxima
            if best is None or count > votes[best]:
                best = p
        assert best is not None
        return best

    def uses_consumer_protocol(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    def compute_subscribed_topics(self) -> set[str] | None:
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not len(self.members):
            return set()
        if self.protocol_name is not None:
            try:
                topics: set[str] = set()
                for m in self.all_members():
                    topics |= consumer_protocol_topics(m.metadata(self.protocol_name))
                return topics
            except (ValueError, UnicodeDecodeError):
                return None
        return None

    def is_subscribed_to_topic(self, topic: str) -> bool:
        if self.subscribed_topics is not None:
            return topic in self.subscribed_topics
        return self.uses_consumer_protocol()

    def init_next_generation(self) -> None:
        self.generation_id += 1
        if len(self.members):
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.EMPTY)
        self.pending_sync_members.clear()

    def current_members_for_leader(self) -> list[dict[str, Any]]:
        return [
            {"member_id": m.member_id, "group_instance_id": m.group_instance_id, "metadata": m.metadata(self.protocol_name)}
            for m in self.all_members()
        ]

    def group_assignment(self) -> dict[str, bytes]:
        return {m.member_id: m.assignment for m in self.all_members()}
