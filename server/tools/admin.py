"""Shared helpers of the admin tools (topics, groups): requests pinned to versions that both
kafka-sidecar and Apache Kafka 4.x accept, so the tools work against either."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from kafka_sidecar.client import KafkaClient, KafkaClientError
from kafka_sidecar.client.blocking import _BrokerConnection

CREATE_TOPICS, DELETE_TOPICS, DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS, CREATE_PARTITIONS = 19, 20, 32, 44, 37
LIST_GROUPS, DESCRIBE_GROUPS, OFFSET_FETCH, OFFSET_COMMIT, FIND_COORDINATOR, LIST_OFFSETS = 16, 15, 9, 8, 10, 2
TOPIC_RESOURCE = 2
DEFAULT_CONFIG_SOURCE = 5
EARLIEST, LATEST = -2, -1

# Kafka's exception class and default message per error code (what its tools print).
ERRORS: dict[int, tuple[str, str]] = {
    1: ("OffsetOutOfRangeException", "The requested offset is not within the range of offsets maintained by the server."),
    3: ("UnknownTopicOrPartitionException", "This server does not host this topic-partition."),
    7: ("TimeoutException", "The request timed out."),
    15: ("CoordinatorNotAvailableException", "The coordinator is not available."),
    16: ("NotCoordinatorException", "This is not the correct coordinator."),
    17: ("InvalidTopicException", "The request attempted to perform an operation on an invalid topic."),
    24: ("InvalidGroupIdException", "The configured groupId is invalid."),
    25: ("UnknownMemberIdException", "The coordinator is not aware of this member."),
    27: ("RebalanceInProgressException", "The group is rebalancing, so a rejoin is needed."),
    35: ("UnsupportedVersionException", "The version of API is not supported."),
    36: ("TopicExistsException", "Topic with this name already exists."),
    37: ("InvalidPartitionsException", "Number of partitions is below 1."),
    38: ("InvalidReplicationFactorException", "Replication factor is below 1 or larger than the number of available brokers."),
    40: ("InvalidConfigurationException", "Configuration is invalid."),
    41: ("NotControllerException", "This is not the correct controller for this cluster."),
    42: ("InvalidRequestException", "This most likely occurs because of a request being malformed by the client library or the message was sent to an incompatible broker. See the broker logs for more details."),
    44: ("PolicyViolationException", "Request parameters do not satisfy the configured policy."),
    68: ("NonEmptyGroupException", "The group is not empty."),
    69: ("GroupIdNotFoundException", "The group id does not exist."),
    73: ("TopicDeletionDisabledException", "Topic deletion is disabled."),
}


def error_message(code: int, message: str | None = None) -> str:
    """The text Kafka's tools show for an error: the broker's message, else Kafka's default."""
    if message:
        return message
    return ERRORS.get(code, ("ApiException", f"error code {code}"))[1]


def java_exception(code: int, message: str | None = None) -> str:
    cls = ERRORS.get(code, ("ApiException", ""))[0]
    return f"org.apache.kafka.common.errors.{cls}: {error_message(code, message)}"


def kafka_uuid(u: Any) -> str:
    from kafka_sidecar.storage.metadata_files import kafka_uuid_str

    if isinstance(u, uuid.UUID):
        return kafka_uuid_str(u)
    return str(u)


def request(conn: _BrokerConnection, api_key: int, version: int, data: dict[str, Any]) -> Any:
    """Send at exactly ``version`` (the dict's fields are that version's)."""
    _, body = conn.request(api_key, data, max_version=version, min_version=version)
    return body


def all_topics(client: KafkaClient) -> Any:
    return client.metadata(None)


def leaders(client: KafkaClient, topics: list[str]) -> dict[tuple[str, int], int]:
    meta = client.metadata(topics)
    return {(t.name, p.partition_index): p.leader_id for t in meta.topics if not t.error_code.value for p in t.partitions}


def list_offsets(client: KafkaClient, partitions: list[tuple[str, int]], timestamp: int | dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
    """Offsets by timestamp (-1 latest, -2 earliest, or a time) from each partition's leader;
    partitions without a leader or with an error are left out."""
    if not partitions:
        return {}
    lead = leaders(client, sorted({t for t, _ in partitions}))
    by_leader: dict[int, list[tuple[str, int]]] = {}
    for tp in partitions:
        node = lead.get(tp, -1)
        if node >= 0:
            by_leader.setdefault(node, []).append(tp)
    out: dict[tuple[str, int], int] = {}
    for node, tps in by_leader.items():
        topics: dict[str, list[dict[str, Any]]] = {}
        for t, p in tps:
            ts = timestamp[(t, p)] if isinstance(timestamp, dict) else timestamp
            topics.setdefault(t, []).append({"partition_index": p, "current_leader_epoch": -1, "timestamp": ts})
        body = request(client.node(node), LIST_OFFSETS, 7, {
            "replica_id": -1, "isolation_level": 0,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
        })
        for t in body.topics:
            for p in t.partitions:
                if not p.error_code.value:
                    out[(t.name, p.partition_index)] = p.offset
    return out


# Errors Kafka's admin client retries (coordinator moving or loading) until its timeout.
RETRIABLE = {14, 15, 16}  # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR
RETRY_TIMEOUT_S = 30.0


def retrying(fn: Callable[[], Any], error_of: Callable[[Any], int], timeout: float = RETRY_TIMEOUT_S) -> Any:
    """Call ``fn`` until its answer's error is not retriable (bounded by ``timeout``)."""
    deadline = time.monotonic() + timeout
    while True:
        answer = fn()
        if error_of(answer) not in RETRIABLE or time.monotonic() > deadline:
            return answer
        time.sleep(0.2)


def coordinator_address(client: KafkaClient, group: str) -> tuple[int, str, int]:
    """The group coordinator (FindCoordinator v4, key type 0), retried while it is loading."""
    body = retrying(
        lambda: request(client.bootstrap, FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [group]}),
        lambda b: b.coordinators[0].error_code.value,
    )
    (c,) = body.coordinators
    if c.error_code.value:
        raise KafkaClientError(java_exception(c.error_code.value, c.error_message))
    return c.node_id, c.host, c.port


def coordinator(client: KafkaClient, group: str) -> _BrokerConnection:
    """The group coordinator's connection."""
    node, host, port = coordinator_address(client, group)
    if node not in client._nodes:
        client._nodes[node] = (host, port)
    return client.node(node)


def commit_offsets(client: KafkaClient, group: str, offsets: dict[tuple[str, int], int]) -> int:
    """OffsetCommit v8 as a consumer without a generation (Kafka's tools and assigned-partition
    consumers do this): every offset in ``offsets``. Returns the first error code, else 0."""
    topics: dict[str, list[dict[str, Any]]] = {}
    for (t, p), off in sorted(offsets.items()):
        topics.setdefault(t, []).append({"partition_index": p, "committed_offset": off, "committed_leader_epoch": -1, "committed_metadata": ""})
    data = {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}

    def first_error(body: Any) -> int:
        return next((p.error_code.value for t in body.topics for p in t.partitions if p.error_code.value), 0)

    # Retried while the coordinator loads or moves, as Kafka's clients do.
    return first_error(retrying(lambda: request(coordinator(client, group), OFFSET_COMMIT, 8, data), first_error))
