"""Regex subscriptions of KIP-848 consumer groups: a group's regexes resolved to topic names, each
resolution a ConsumerGroupRegularExpression record (Kafka 4.3.1's TopicRegexResolver and
GroupMetadataManager.maybeUpdateRegularExpressions / handleRegularExpressionsResult).

As in Kafka, a group's regexes are not resolved again on every heartbeat: only when a member
brings a regex the group has not resolved yet, when topics were created since the last resolution
(Kafka's lastMetadataImageWithNewTopics), or when ``group.consumer.regex.refresh.interval.ms``
(an internal config, 10 minutes) has passed. A refresh resolves every regex of the group with the
authorization of the member whose heartbeat triggered it, so members with different ACLs do not
flip the group's resolution (and epoch) back and forth.

Differences from Kafka 4.3.1 (kept because the behaviour is relied upon): the resolution runs
within the triggering heartbeat rather than on the coordinator's executor, so a member's first
heartbeat already has its regex resolved; and Kafka's 10 s floor between two refreshes
(REGEX_BATCH_REFRESH_MIN_INTERVAL_MS) is not applied, so a new matching topic is picked up at the
next heartbeat; a refresh writes a record only for a regex whose topics changed (its version
counting its resolutions), the time of the last refresh being kept in memory.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..coordinator.clock import SYSTEM_CLOCK, Clock
from .consumer_group import ConsumerGroup, ConsumerGroupMember, ResolvedRegularExpression
from .consumer_records import regex_key, regex_value

if TYPE_CHECKING:
    from .store import Record

# RE2J regex -> the topic names it matches; raises ValueError for a regex RE2J refuses
RegexTopics = Callable[[str], "set[str]"]
# a number that grows whenever topics are created (Kafka: the metadata image version with new topics)
TopicsVersion = Callable[[], int]

# group.consumer.regex.refresh.interval.ms (internal in Kafka 4.3.1)
REGEX_REFRESH_INTERVAL_MS_DEFAULT = 600_000


class RegexResolver:
    """When and how a consumer group's regexes are resolved."""

    def __init__(self, regex_topics: RegexTopics, topics_version: TopicsVersion | None = None,
                 refresh_interval_ms: int = REGEX_REFRESH_INTERVAL_MS_DEFAULT, clock: Clock = SYSTEM_CLOCK) -> None:
        self.regex_topics = regex_topics
        self.clock = clock
        self.topics_version: TopicsVersion = topics_version or (lambda: 0)
        self.refresh_interval_ms = refresh_interval_ms
        # group id -> (topics version, time in ms) of its last refresh; empty after a restart, so
        # a group's first heartbeat refreshes (as Kafka's first metadata image counts as new topics)
        self.last_refresh: dict[str, tuple[int, int]] = {}

    def update(self, gid: str, group: ConsumerGroup | None, members: dict[str, ConsumerGroupMember],
               authorized: Callable[[str], bool] | None, records: list[Record]) -> dict[str, ResolvedRegularExpression]:
        """The group's resolved regexes once ``members`` are its members: regexes no member uses
        any more get their tombstone; all are resolved again when a refresh is due, a record for
        each whose topics changed."""
        old = group.resolved_regexes if group else {}
        wanted = {m.subscribed_topic_regex for m in members.values() if m.subscribed_topic_regex}
        records.extend((regex_key(gid, regex), None) for regex in sorted(old.keys() - wanted))
        kept = {regex: r for regex, r in old.items() if regex in wanted}
        if not wanted:
            self.last_refresh.pop(gid, None)
            return kept
        now = self.clock.now_ms()
        version = self.topics_version()
        if wanted <= kept.keys() and not self.refresh_due(gid, version, now):
            return kept
        self.last_refresh[gid] = (version, now)
        out: dict[str, ResolvedRegularExpression] = {}
        for regex in sorted(wanted):
            try:
                topics = frozenset(t for t in self.regex_topics(regex) if authorized is None or authorized(t))
            except ValueError:
                topics = frozenset()
            prev = old.get(regex)
            if prev is not None and prev.topics == topics:
                out[regex] = prev
                continue
            out[regex] = ResolvedRegularExpression(topics, prev.version + 1 if prev else 1, now)
            records.append((regex_key(gid, regex), regex_value(out[regex])))
        return out

    def refresh_due(self, gid: str, version: int, now: int) -> bool:
        """Kafka's conditions 3.2 and 3.3: topics created since the last refresh, or the refresh interval passed."""
        last = self.last_refresh.get(gid)
        return last is None or last[0] < version or now > last[1] + self.refresh_interval_ms
