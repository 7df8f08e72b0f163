"""Regex subscriptions of KIP-848 consumer groups: a group's regexes resolved to topic names, each
resolution a ConsumerGroupRegularExpression record (Kafka's TopicRegexResolver and
GroupMetadataManager.maybeUpdateRegularExpressions)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from .consumer_group import ConsumerGroup, ConsumerGroupMember, ResolvedRegularExpression
from .consumer_records import regex_key, regex_value

if TYPE_CHECKING:
    from .store import Record

# RE2J regex -> the topic names it matches; raises ValueError for a regex RE2J refuses
RegexTopics = Callable[[str], "set[str]"]


def resolve_regexes(gid: str, group: ConsumerGroup | None, members: dict[str, ConsumerGroupMember], regex_topics: RegexTopics,
                    authorized: Callable[[str], bool] | None, records: list[Record]) -> dict[str, ResolvedRegularExpression]:
    """The group's regexes resolved against the topics now, keeping only those the heartbeating
    member may DESCRIBE (Kafka resolves with the request's context); a changed resolution is a
    ConsumerGroupRegularExpression record, a regex no member uses any more its tombstone."""
    old = group.resolved_regexes if group else {}
    wanted = {m.subscribed_topic_regex for m in members.values() if m.subscribed_topic_regex}
    out: dict[str, ResolvedRegularExpression] = {}
    for regex in sorted(wanted):
        try:
            topics = frozenset(t for t in regex_topics(regex) if authorized is None or authorized(t))
        except ValueError:
            topics = frozenset()
        prev = old.get(regex)
        if prev is not None and prev.topics == topics:
            out[regex] = prev
            continue
        out[regex] = ResolvedRegularExpression(topics, prev.version + 1 if prev else 1, int(time.time() * 1000))
        records.append((regex_key(gid, regex), regex_value(out[regex])))
    records.extend((regex_key(gid, regex), None) for regex in sorted(old.keys() - wanted))
    return out
