"""Kafka's Topic (org.apache.kafka.common.internals.Topic): the internal topics' names and the
rules for a topic name, defined once for the server, its tools and the storage layer."""

from __future__ import annotations

import re

OFFSETS_TOPIC = "__consumer_offsets"  # Topic.GROUP_METADATA_TOPIC_NAME
TRANSACTION_STATE_TOPIC = "__transaction_state"
SHARE_GROUP_STATE_TOPIC = "__share_group_state"
# Topic.isInternal: reported is_internal in Metadata, never matched by a regex subscription,
# never a transaction's partition.
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, SHARE_GROUP_STATE_TOPIC})

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")


class InvalidTopicError(ValueError):
    pass


def validate_topic_name(name: str) -> None:
    """Kafka 4's Topic.validate, with its messages."""
    if not name:
        raise InvalidTopicError("Topic name is invalid: the empty string is not allowed")
    if name in (".", ".."):
        raise InvalidTopicError(f"Topic name is invalid: '{name}' is not allowed")
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise InvalidTopicError(
            f"Topic name is invalid: the length of '{name}' is longer than the max allowed length {MAX_TOPIC_NAME_LENGTH}"
        )
    if not _LEGAL_TOPIC.match(name):
        raise InvalidTopicError(
            f"Topic name is invalid: '{name}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"
        )
