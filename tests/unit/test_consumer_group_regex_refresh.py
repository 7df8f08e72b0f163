"""When a consumer group's regexes are resolved again (server/groups/consumer_regex.py): a new regex,
topics created since the last refresh, or the refresh interval, as Kafka 4.3.1's
maybeUpdateRegularExpressions; not on every heartbeat, so members with different ACLs do not flip
the resolution back and forth."""

from __future__ import annotations

from kafka_sidecar.server.coordinator.clock import ManualClock
from kafka_sidecar.server.groups.consumer_group import ConsumerGroup, ConsumerGroupMember
from kafka_sidecar.server.groups.consumer_records import decode_consumer_key, decode_regex_value
from kafka_sidecar.server.groups.consumer_regex import RegexResolver

TOPICS = {"t-a", "t-b", "other"}


class World:
    """The broker's topics (the resolver's inputs) and a group whose records are applied."""

    def __init__(self, refresh_interval_ms: int = 600_000) -> None:
        self.topics = set(TOPICS)
        self.version = 1
        self.clock = ManualClock()
        self.resolver = RegexResolver(self.matching, lambda: self.version, refresh_interval_ms, self.clock)
        self.group = ConsumerGroup("g")

    def matching(self, regex: str) -> set[str]:
        prefix = regex.removesuffix(".*")
        return {t for t in self.topics if t.startswith(prefix)}

    def heartbeat(self, members: dict[str, str | None], may_describe: set[str] | None = None) -> list[tuple[str, frozenset[str] | None]]:
        """One heartbeat's regex records as (regex, topics or None for a tombstone), applied to the group."""
        ms = {mid: ConsumerGroupMember(mid, subscribed_topic_regex=regex) for mid, regex in members.items()}
        records: list = []
        authorized = None if may_describe is None else may_describe.__contains__
        self.group.resolved_regexes = self.resolver.update("g", self.group, ms, authorized, records)
        self.group.members = ms
        out = []
        for key, value in records:
            k = decode_consumer_key(key)
            assert k is not None and k.regex is not None
            out.append((k.regex, None if value is None else decode_regex_value(value).topics))
        return out


def test_members_with_different_acls_do_not_flip_the_resolution() -> None:
    w = World()
    assert w.heartbeat({"a": "t-.*"}) == [("t-.*", frozenset({"t-a", "t-b"}))]
    # b may only DESCRIBE t-a: the group keeps its resolution (no record) until a refresh is due
    for _ in range(3):
        assert w.heartbeat({"a": "t-.*", "b": "t-.*"}, may_describe={"t-a"}) == []
        assert w.heartbeat({"a": "t-.*", "b": "t-.*"}) == []
    assert w.group.resolved_regexes["t-.*"].topics == {"t-a", "t-b"} and w.group.resolved_regexes["t-.*"].version == 1


def test_new_topics_refresh_with_the_triggering_members_acls() -> None:
    w = World()
    w.heartbeat({"a": "t-.*"})
    w.topics.add("t-c")
    assert w.heartbeat({"a": "t-.*"}) == []  # not noticed until the metadata version moves
    w.version += 1
    assert w.heartbeat({"a": "t-.*"}) == [("t-.*", frozenset({"t-a", "t-b", "t-c"}))]
    assert w.group.resolved_regexes["t-.*"].version == 2
    w.version += 1
    # the refresh happens in b's heartbeat: b's authorization decides (as Kafka's request context)
    assert w.heartbeat({"a": "t-.*", "b": "t-.*"}, may_describe={"t-a"}) == [("t-.*", frozenset({"t-a"}))]
    w.version += 1
    assert w.heartbeat({"a": "t-.*", "b": "t-.*"}) == [("t-.*", frozenset({"t-a", "t-b", "t-c"}))]
    w.version += 1
    assert w.heartbeat({"a": "t-.*", "b": "t-.*"}) == []  # refreshed, same topics: no record


def test_a_new_regex_refreshes_every_regex_and_an_unused_one_is_removed() -> None:
    w = World()
    w.heartbeat({"a": "t-.*"})
    w.topics.add("t-c")  # not yet seen by the group's regex
    assert w.heartbeat({"a": "t-.*", "b": "oth.*"}) == [("oth.*", frozenset({"other"})), ("t-.*", frozenset({"t-a", "t-b", "t-c"}))]
    assert w.heartbeat({"a": "t-.*"}) == [("oth.*", None)]
    assert set(w.group.resolved_regexes) == {"t-.*"}
    assert w.heartbeat({}) == [("t-.*", None)] and w.resolver.last_refresh == {}


def test_the_refresh_interval() -> None:
    w = World(refresh_interval_ms=20)
    w.heartbeat({"a": "t-.*"})
    w.topics.add("t-c")
    assert w.heartbeat({"a": "t-.*"}) == []
    w.clock.advance(20)
    assert w.heartbeat({"a": "t-.*"}) == []  # due only once the interval has passed (Kafka's >)
    w.clock.advance(1)
    assert w.heartbeat({"a": "t-.*"}) == [("t-.*", frozenset({"t-a", "t-b", "t-c"}))]
    # a restart forgets when the last refresh was: the first heartbeat refreshes
    w.resolver = RegexResolver(w.matching, lambda: w.version, clock=w.clock)
    w.topics.add("t-d")
    assert w.heartbeat({"a": "t-.*"}) == [("t-.*", frozenset({"t-a", "t-b", "t-c", "t-d"}))]
