"""Groups of every type, described and measured as Kafka's tools do.

ListGroups names every group with its type (``group_type``: classic, consumer, share, streams).
Each type has a ``GroupType`` here that knows the API describing it (DescribeGroups,
ConsumerGroupDescribe, ShareGroupDescribe, StreamsGroupDescribe) and where its offsets come from
(OffsetFetch for groups that commit offsets, DescribeShareGroupOffsets for share groups).
Adding a type is one class with ``api`` and ``members`` and a line in ``GROUP_TYPES``; a type
the console does not know yet is still listed, with its state, and no detail.

Lag is ``kafka-consumer-groups.sh --describe``'s: per partition, the latest offset
(ListOffsets, read_uncommitted) minus the committed offset, for the partitions with a committed
offset or an assigned member.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from ..groups.consumer_protocol import decode_assignment
from ..metrics import error_name
from ..security.acls import AclOperation, ResourceType
from .api import ConsoleSession, call
from .cluster import LATEST, list_offsets

if TYPE_CHECKING:
    from ..broker import Broker

LIST_GROUPS, OFFSET_FETCH, DESCRIBE_SHARE_GROUP_OFFSETS = 16, 9, 90


@dataclass
class Member:
    member_id: str
    client_id: str
    host: str
    instance_id: str | None = None
    epoch: int | None = None
    assignment: dict[str, list[int]] = field(default_factory=dict)


@dataclass
class OffsetRow:
    """One line of ``kafka-consumer-groups.sh --describe`` (or ``kafka-share-groups.sh``)."""

    topic: str
    partition: int
    committed: int | None  # share groups: the share-partition start offset
    end: int | None
    lag: int | None
    member: Member | None = None


@dataclass
class Group:
    group_id: str
    type: str
    state: str
    protocol_type: str = ""
    error: str | None = None
    members: list[Member] = field(default_factory=list)
    facts: list[tuple[str, object]] = field(default_factory=list)
    offsets: list[OffsetRow] = field(default_factory=list)

    @property
    def total_lag(self) -> int | None:
        lags = [r.lag for r in self.offsets if r.lag is not None]
        return sum(lags) if lags else None


def _error_text(code: int, message: str | None) -> str:
    return message or f"{error_name(code)} ({code})"


class GroupType:
    """A group type: ``describe`` (members, state) and ``fill_offsets`` (per-partition rows)."""

    name: ClassVar[str]
    api: ClassVar[tuple[int, int]]  # the describe API and version

    def request(self, ids: list[str]) -> dict[str, Any]:
        return {"group_ids": ids, "include_authorized_operations": False}

    def members(self, g: dict[str, Any]) -> list[Member]:
        return [Member(m["member_id"], m["client_id"], m["client_host"], m.get("instance_id"), m.get("member_epoch"),
                       {t["topic_name"]: sorted(t["partitions"]) for t in (m.get("assignment") or {}).get("topic_partitions", [])})
                for m in g["members"]]

    def facts(self, g: dict[str, Any]) -> list[tuple[str, object]]:
        return [("group epoch", g.get("group_epoch")), ("assignment epoch", g.get("assignment_epoch")), ("assignor", g.get("assignor_name"))]

    async def describe(self, broker: Broker, session: ConsoleSession, ids: list[str]) -> list[Group]:
        key, version = self.api
        answer = await call(broker, session, key, version, self.request(ids))
        out = []
        for g in answer["groups"]:
            group = Group(g["group_id"], self.name, g.get("group_state") or "")
            if g["error_code"]:
                group.error = _error_text(g["error_code"], g.get("error_message"))
            else:
                group.members = sorted(self.members(g), key=lambda m: m.member_id)
                group.facts = self.facts(g)
                group.protocol_type = g.get("protocol_type", "")
            out.append(group)
        return out

    async def fill_offsets(self, broker: Broker, session: ConsoleSession, groups: list[Group]) -> None:
        """Committed offsets (OffsetFetch of every group at once), latest offsets and lag."""
        live = [g for g in groups if g.error is None]
        if not live:
            return
        answer = await call(broker, session, OFFSET_FETCH, 9, {"require_stable": False, "groups": [
            {"group_id": g.group_id, "member_id": None, "member_epoch": -1, "topics": None} for g in live]})
        committed: dict[str, dict[tuple[str, int], int]] = {}
        for ag in answer["groups"]:
            committed[ag["group_id"]] = {(t["name"], p["partition_index"]): p["committed_offset"]
                                         for t in ag["topics"] for p in t["partitions"]
                                         if not p["error_code"] and p["committed_offset"] >= 0}
        wanted: dict[str, set[int]] = {}
        for g in live:
            for t, p in committed.get(g.group_id, {}):
                wanted.setdefault(t, set()).add(p)
            for m in g.members:
                for t, parts in m.assignment.items():
                    wanted.setdefault(t, set()).update(parts)
        allowed = _describable(broker, session, list(wanted))
        ends = await list_offsets(broker, session, {t: sorted(ps) for t, ps in wanted.items() if t in allowed}, LATEST)
        for g in live:
            owner = {(t, p): m for m in g.members for t, parts in m.assignment.items() for p in parts}
            mine = committed.get(g.group_id, {})
            rows = []
            for tp in sorted(set(mine) | set(owner)):
                if tp[0] not in allowed:
                    continue
                end_answer = ends.get(tp)
                end = end_answer[1] if end_answer and not end_answer[0] else None
                offset = mine.get(tp)
                lag = end - offset if end is not None and offset is not None else None
                rows.append(OffsetRow(tp[0], tp[1], offset, end, lag, owner.get(tp)))
            g.offsets = rows


def _describable(broker: Broker, session: ConsoleSession, topics: list[str]) -> set[str]:
    az = broker.authorizer
    return az.filter(session, None, AclOperation.DESCRIBE, ResourceType.TOPIC, topics, log_denied=False) if az.enabled else set(topics)


class ClassicGroups(GroupType):
    name = "classic"
    api = (15, 5)  # DescribeGroups

    def request(self, ids: list[str]) -> dict[str, Any]:
        return {"groups": ids, "include_authorized_operations": False}

    def members(self, g: dict[str, Any]) -> list[Member]:
        out = []
        for m in g["members"]:
            assignment: dict[str, list[int]] = {}
            if g.get("protocol_type") == "consumer" and m.get("member_assignment"):
                try:
                    assignment = {t: sorted(ps) for t, ps in decode_assignment(m["member_assignment"])[0].items()}
                except Exception:  # not the consumer protocol's bytes after all: shown without an assignment
                    assignment = {}
            out.append(Member(m["member_id"], m["client_id"], m["client_host"], m.get("group_instance_id"), None, assignment))
        return out

    def facts(self, g: dict[str, Any]) -> list[tuple[str, object]]:
        return [("protocol type", g.get("protocol_type")), ("protocol", g.get("protocol_data"))]


class ConsumerGroups(GroupType):
    name = "consumer"
    api = (69, 1)  # ConsumerGroupDescribe


class ShareGroups(GroupType):
    name = "share"
    api = (77, 1)  # ShareGroupDescribe

    async def fill_offsets(self, broker: Broker, session: ConsoleSession, groups: list[Group]) -> None:
        """DescribeShareGroupOffsets (``kafka-share-groups.sh --describe``): start offset and lag."""
        live = [g for g in groups if g.error is None]
        if not live:
            return
        answer = await call(broker, session, DESCRIBE_SHARE_GROUP_OFFSETS, 1, {"groups": [
            {"group_id": g.group_id, "topics": None} for g in live]})
        by_id = {ag["group_id"]: ag for ag in answer["groups"]}
        for g in live:
            ag = by_id.get(g.group_id)
            if ag is None or ag["error_code"]:
                continue
            topics = [t["topic_name"] for t in ag["topics"]]
            allowed = _describable(broker, session, topics)
            wanted = {t["topic_name"]: [p["partition_index"] for p in t["partitions"]] for t in ag["topics"] if t["topic_name"] in allowed}
            ends = await list_offsets(broker, session, wanted, LATEST)
            owner = {(t, p): m for m in g.members for t, parts in m.assignment.items() for p in parts}
            rows = []
            for t in ag["topics"]:
                if t["topic_name"] not in allowed:
                    continue
                for p in t["partitions"]:
                    tp = (t["topic_name"], p["partition_index"])
                    end = ends.get(tp)
                    start = p["start_offset"] if p["start_offset"] >= 0 else None
                    lag = p["lag"] if p["lag"] >= 0 else None
                    rows.append(OffsetRow(tp[0], tp[1], start, end[1] if end and not end[0] else None, lag, owner.get(tp)))
            g.offsets = sorted(rows, key=lambda r: (r.topic, r.partition))


class StreamsGroups(GroupType):
    """KIP-1071 groups: a member owns tasks (subtopology, partition); an active task reads that
    partition of each of its subtopology's source topics, which is the assignment shown (as
    ``kafka-streams-groups.sh --describe --members`` lists tasks, ``--offsets`` their topics)."""

    name = "streams"
    api = (89, 0)  # StreamsGroupDescribe

    def members(self, g: dict[str, Any]) -> list[Member]:
        sources: dict[str, list[str]] = {}
        for s in (g.get("topology") or {}).get("subtopologies") or []:
            sources[s["subtopology_id"]] = list(s["source_topics"]) + [t["name"] for t in s.get("repartition_source_topics") or []]
        out = []
        for m in g["members"]:
            assignment: dict[str, set[int]] = {}
            for task in (m.get("assignment") or {}).get("active_tasks") or []:
                for topic in sources.get(task["subtopology_id"], []):
                    assignment.setdefault(topic, set()).update(task["partitions"])
            out.append(Member(m["member_id"], m["client_id"], m["client_host"], m.get("instance_id"), m.get("member_epoch"),
                              {t: sorted(ps) for t, ps in assignment.items()}))
        return out

    def facts(self, g: dict[str, Any]) -> list[tuple[str, object]]:
        topology = g.get("topology") or {}
        return [("group epoch", g.get("group_epoch")), ("assignment epoch", g.get("assignment_epoch")),
                ("topology epoch", topology.get("epoch")), ("subtopologies", len(topology.get("subtopologies") or []))]


# group_type as ListGroups names it -> how to describe it. A new type: one class and one line.
GROUP_TYPES: dict[str, GroupType] = {t.name: t for t in (ClassicGroups(), ConsumerGroups(), ShareGroups(), StreamsGroups())}


async def list_groups(broker: Broker, session: ConsoleSession) -> list[dict[str, Any]]:
    """ListGroups v5: the groups the principal may describe, with type and state."""
    answer = await call(broker, session, LIST_GROUPS, 5, {"states_filter": [], "types_filter": []})
    return sorted(answer["groups"], key=lambda g: g["group_id"])


async def describe(broker: Broker, session: ConsoleSession, listed: list[dict[str, Any]], *, offsets: bool = True) -> list[Group]:
    """Every listed group described by its type's API (and its offsets and lag)."""
    by_type: dict[str, list[str]] = {}
    for g in listed:
        by_type.setdefault(g.get("group_type") or "classic", []).append(g["group_id"])
    out: list[Group] = []
    for type_name, ids in by_type.items():
        kind = GROUP_TYPES.get(type_name)
        if kind is None:  # a type the console does not know yet: listed as ListGroups says
            out += [Group(g["group_id"], type_name, g.get("group_state", ""), g.get("protocol_type", "")) for g in listed
                    if (g.get("group_type") or "classic") == type_name]
            continue
        groups = await kind.describe(broker, session, ids)
        if offsets:
            await kind.fill_offsets(broker, session, groups)
        out += groups
    return sorted(out, key=lambda g: g.group_id)
