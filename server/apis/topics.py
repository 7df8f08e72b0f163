"""CreateTopics (API 19), DeleteTopics (API 20), CreatePartitions (API 37), and auto-creation."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafka_sidecar.protocol import errors
from kafka_sidecar.protocol.topic import InvalidTopicError, validate_topic_name
from kafka_sidecar.storage.log_config import (
    TOPIC_CONFIGS,
    ConfigError,
    LogConfig,
    validate_topic_configs,
)
from kafka_sidecar.storage.metadata_files import new_kafka_uuid

from ..groups.javaorder import JavaHashMap
from ..security.acls import AclOperation, ResourceType
from ..security.authorizer import ERROR_MESSAGES, TOPIC_AUTHORIZATION_FAILED

if TYPE_CHECKING:
    from ..request_context import RequestContext
    from ..services import BrokerServices

log = logging.getLogger(__name__)

# DescribeConfigs/CreateTopics config source ids.
SOURCE_IDS = {"DYNAMIC_TOPIC_CONFIG": 1, "STATIC_BROKER_CONFIG": 4, "DEFAULT_CONFIG": 5}


async def auto_create_topic(services: BrokerServices, name: str) -> int:
    """Create ``name`` with broker defaults; the error code a Metadata answer carries for it."""
    try:
        validate_topic_name(name)
    except InvalidTopicError:
        return errors.INVALID_TOPIC_EXCEPTION
    if name not in services.metadata.topics:
        try:
            await services.run_blocking(services.log_manager.create_topic, name, services.config.get("num.partitions"), {})
        except FileExistsError:
            pass  # another request created it meanwhile (two clients auto-creating at once)
    return errors.UNKNOWN_TOPIC_OR_PARTITION


def _config_entries(config: LogConfig) -> list[dict[str, Any]]:
    """Every topic config with its effective value and source, sorted by name (as Kafka does)."""
    out = []
    for name in sorted(TOPIC_CONFIGS):
        value = config.values[name]
        text = str(value).lower() if isinstance(value, bool) else str(value)
        out.append({
            "name": name,
            "value": text,
            "read_only": False,
            "config_source": SOURCE_IDS[config.source_of(name)],
            "is_sensitive": False,
        })
    return out


def _has_collision_chars(name: str) -> bool:
    return "_" in name or "." in name


def _manual_assignment_error(services: BrokerServices, t: Any) -> tuple[int, str] | None:
    """Kafka's checks of a manual partition assignment (ReplicationControlManager.createTopic)."""
    if t.replication_factor != -1:
        return errors.INVALID_REQUEST, "A manual partition assignment was specified, but replication factor was not set to -1."
    if t.num_partitions != -1:
        return errors.INVALID_REQUEST, "A manual partition assignment was specified, but numPartitions was not set to -1."
    seen: set[int] = set()
    replication_factor: int | None = None
    for a in t.assignments:
        if a.partition_index in seen:
            return errors.INVALID_REPLICA_ASSIGNMENT, f"Found multiple manual partition assignments for partition {a.partition_index}"
        seen.add(a.partition_index)
        replicas = sorted(a.broker_ids)
        if not replicas:
            return errors.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes an empty replica list."
        previous = None
        for broker_id in replicas:
            if broker_id != services.node_id:
                return errors.INVALID_REPLICA_ASSIGNMENT, f"The manual partition assignment includes broker {broker_id}, but no such broker is registered."
            if broker_id == previous:
                return errors.INVALID_REPLICA_ASSIGNMENT, f"The manual partition assignment includes the broker {previous} more than once."
            previous = broker_id
        if replication_factor is not None and len(replicas) != replication_factor:
            return errors.INVALID_REPLICA_ASSIGNMENT, (
                f"The manual partition assignment includes a partition with {len(replicas)} replica(s), but this is not "
                f"consistent with previous partitions, which have {replication_factor} replica(s)."
            )
        replication_factor = len(replicas)
    if seen != set(range(len(seen))):
        return errors.INVALID_REPLICA_ASSIGNMENT, "partitions should be a consecutive 0-based integer sequence"
    return None


async def _create_one(services: BrokerServices, t: Any, validate_only: bool, describable: bool = True) -> dict[str, Any]:
    """One topic of a CreateTopics request, checked in Kafka's order (ReplicationControlManager):
    name, collision, existence, null configs, config values, then partitions and replication.
    Without DESCRIBE_CONFIGS on the topic (``describable``) a created topic is answered without
    its configs, partitions and replication factor, and topic_config_error_code 29."""
    lm = services.log_manager
    result: dict[str, Any] = {
        "name": t.name, "topic_id": None, "error_code": errors.NONE, "error_message": None,
        "num_partitions": -1, "replication_factor": -1, "configs": [],
    }

    def fail(code: int, message: str) -> dict[str, Any]:
        result.update(error_code=code, error_message=message)
        return result

    if t.name in services.metadata.topics:
        return fail(errors.TOPIC_ALREADY_EXISTS, f"Topic '{t.name}' already exists.")
    if services.metadata.is_being_deleted(t.name):  # its dirs are being renamed by a DeleteTopics in progress
        return fail(errors.TOPIC_ALREADY_EXISTS, f"Topic '{t.name}' is marked for deletion.")
    try:
        validate_topic_name(t.name)
    except InvalidTopicError as e:
        return fail(errors.INVALID_TOPIC_EXCEPTION, str(e))
    if _has_collision_chars(t.name):
        normalized = t.name.replace(".", "_")
        colliding = next((n for n in services.metadata.topics if _has_collision_chars(n) and n.replace(".", "_") == normalized), None)
        if colliding is not None:
            return fail(errors.INVALID_TOPIC_EXCEPTION, f"Topic '{t.name}' collides with existing topic: {colliding}")
    null_configs = [c.name for c in t.configs if c.value is None]
    if null_configs:
        return fail(errors.INVALID_CONFIG, "Null value not supported for topic configs: " + ",".join(null_configs))
    try:
        configs = validate_topic_configs({c.name: c.value for c in t.configs})
    except ConfigError as e:
        return fail(errors.INVALID_CONFIG, str(e))
    if t.assignments:
        problem = _manual_assignment_error(services, t)
        if problem is not None:
            return fail(*problem)
        partitions, rf = len(t.assignments), 1
    elif t.replication_factor < -1 or t.replication_factor == 0:
        return fail(errors.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0, or -1 to use the default value.")
    elif t.num_partitions < -1 or t.num_partitions == 0:
        return fail(errors.INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value.")
    else:
        partitions = services.config.get("num.partitions") if t.num_partitions == -1 else t.num_partitions
        rf = services.config.get("default.replication.factor") if t.replication_factor == -1 else t.replication_factor
        if rf > 1:
            return fail(
                errors.INVALID_REPLICATION_FACTOR,
                f"Unable to replicate the partition {rf} time(s): The target replication factor of {rf} cannot be reached because only 1 broker(s) are registered or some brokers have all their log directories cordoned.",
            )
    if describable:
        config = LogConfig(lm.broker_log_defaults, configs)
        result.update(num_partitions=partitions, replication_factor=rf, configs=_config_entries(config))
    else:
        result["topic_config_error_code"] = TOPIC_AUTHORIZATION_FAILED
    if validate_only:
        # Kafka draws the new topic's id before it looks at validate_only, and answers with it.
        result["topic_id"] = new_kafka_uuid()
    else:
        # Directories, partition.metadata and the topics file's fsync: on the storage thread.
        try:
            info = await services.run_blocking(lm.create_topic, t.name, partitions, configs)
        except FileExistsError:  # created (or being deleted) by another request meanwhile
            return fail(errors.TOPIC_ALREADY_EXISTS, f"Topic '{t.name}' already exists.")
        result["topic_id"] = info.topic_id
    return result


# Kafka's ReplicationControlManager.MAX_PARTITIONS_PER_BATCH: more partitions than this in one
# CreateTopics request fails every topic of it with POLICY_VIOLATION (so one request cannot
# make the broker create millions of partitions).
MAX_PARTITIONS_PER_REQUEST = 10_000


def _requested_partitions(services: BrokerServices, request: Any) -> int:
    total = 0
    for t in request.topics:
        if t.assignments:
            total += len(t.assignments)
        elif t.num_partitions == -1:
            total += services.config.get("num.partitions")
        elif t.num_partitions > 0:
            total += t.num_partitions
    return total


async def handle_create_topics(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    header = context.header
    if _requested_partitions(services, request) > MAX_PARTITIONS_PER_REQUEST:
        log.info("CreateTopics from %s: %d partitions requested, more than %d", header.client_id, _requested_partitions(services, request), MAX_PARTITIONS_PER_REQUEST)
        return {"throttle_time": 0, "topics": [
            {"name": t.name, "topic_id": None, "error_code": errors.POLICY_VIOLATION,
             "error_message": "Excessively large number of partitions per request.",
             "num_partitions": -1, "replication_factor": -1, "configs": []}
            for t in request.topics
        ]}
    # A name given more than once is not created; it gets one error, after the other results
    # (Kafka's ControllerApis.createTopics). So do topics the client may not create (CREATE on
    # the cluster or the topic), after those, in the order of Kafka's HashSet of the names.
    counts = Counter(t.name for t in request.topics)
    unique = [name for name, n in counts.items() if n == 1]
    az = services.authorizer
    creatable = describable = set(unique)
    if az.enabled:
        if not az.authorize_cluster(context, header, AclOperation.CREATE, log_denied=False):
            creatable = az.filter(context, header, AclOperation.CREATE, ResourceType.TOPIC, unique)
        describable = az.filter(context, header, AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, unique, log_denied=False)
    results = [await _create_one(services, t, request.validate_only, t.name in describable)
               for t in request.topics if counts[t.name] == 1 and t.name in creatable]
    results += [
        {"name": name, "topic_id": None, "error_code": errors.INVALID_REQUEST, "error_message": "Duplicate topic name.",
         "num_partitions": -1, "replication_factor": -1, "configs": []}
        for name, n in counts.items() if n > 1
    ]
    if len(creatable) < len(unique):
        names: JavaHashMap[str, None] = JavaHashMap()
        for name in unique:
            names[name] = None
        results += [
            {"name": name, "topic_id": None, "error_code": TOPIC_AUTHORIZATION_FAILED, "error_message": "Authorization failed.",
             "num_partitions": -1, "replication_factor": -1, "configs": []}
            for name in names.keys() if name not in creatable
        ]
    for r in results:
        if r["error_code"]:
            log.info("CreateTopics %s from %s: error %d %s", r["name"], header.client_id, r["error_code"], r["error_message"])
    return {"throttle_time": 0, "topics": results}


async def handle_delete_topics(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    header = context.header
    if hasattr(request, "topic_names"):
        wanted = [(name, None) for name in request.topic_names]
    else:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    az = services.authorizer
    describable = deletable = None
    if az.enabled and not az.authorize_cluster(context, header, AclOperation.DELETE, log_denied=False):
        # ControllerApis.deleteTopics: DESCRIBE and DELETE on each topic (named, or named by its id).
        names = [n if n is not None else getattr(services.metadata.topics_by_id.get(i), "name", None) for n, i in wanted]
        names = [n for n in names if n is not None]
        describable = az.filter(context, header, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
        deletable = az.filter(context, header, AclOperation.DELETE, ResourceType.TOPIC, names)
    denied = ERROR_MESSAGES[TOPIC_AUTHORIZATION_FAILED]
    responses = []
    for name, topic_id in wanted:
        if name is None and topic_id is not None:
            info = services.metadata.topics_by_id.get(topic_id)
            if info is None:
                responses.append({"name": None, "topic_id": topic_id, "error_code": errors.UNKNOWN_TOPIC_ID, "error_message": "Topic id does not exist"})
                continue
            name = info.name
            if deletable is not None and describable is not None and name not in deletable:
                # Asked by id: the name is told only to a client that may describe the topic.
                responses.append({"name": name if name in describable else None, "topic_id": topic_id,
                                  "error_code": TOPIC_AUTHORIZATION_FAILED, "error_message": denied})
                continue
        elif describable is not None and name not in describable:
            # Asked by name: the topic's existence is not disclosed.
            responses.append({"name": name, "topic_id": None, "error_code": TOPIC_AUTHORIZATION_FAILED, "error_message": denied})
            continue
        info = services.metadata.topics.get(name)
        if info is not None and deletable is not None and name not in deletable:
            responses.append({"name": name, "topic_id": None, "error_code": TOPIC_AUTHORIZATION_FAILED, "error_message": denied})
            continue
        if info is None:
            responses.append({"name": name, "topic_id": topic_id, "error_code": errors.UNKNOWN_TOPIC_OR_PARTITION, "error_message": "This server does not host this topic-partition."})
            continue
        if not services.config.get("delete.topic.enable"):
            responses.append({"name": name, "topic_id": info.topic_id, "error_code": errors.TOPIC_DELETION_DISABLED, "error_message": "Topic deletion is disabled."})
            continue
        renamed = await services.replica_manager.delete_topic(name)
        _remove_later(services, renamed)
        services.group_coordinator.on_topic_deleted(name)
        responses.append({"name": name, "topic_id": info.topic_id, "error_code": errors.NONE, "error_message": None})
    return {"throttle_time": 0, "responses": responses}


def _remove_later(services: BrokerServices, renamed: list[Path]) -> None:
    """Kafka's kafka-delete-logs: a deleted partition's ``-delete`` dir is removed
    ``log.segment.delete.delay.ms`` (the broker's file.delete.delay.ms) after the deletion, on
    the storage thread; one left by a stop before that is removed at the next start."""
    if not renamed:
        return

    def remove() -> None:
        try:
            services.schedule_blocking(services.log_manager.remove_dirs, renamed)
        except RuntimeError:  # the broker stopped meanwhile: the next start removes them
            pass

    asyncio.get_running_loop().call_later(services.config.get("log.segment.delete.delay.ms") / 1000, remove)


# ---- CreatePartitions (37) -------------------------------------------------------------------

# Kafka's QuorumController.MAX_RECORDS_PER_USER_OP: one request adds at most this many partitions.
MAX_NEW_PARTITIONS_PER_REQUEST = 10_000


class _PartitionsError(Exception):
    def __init__(self, code: int, message: str | None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _check_new_partitions(services: BrokerServices, t: Any) -> int:
    """How many partitions topic ``t`` gains; Kafka's checks (ReplicationControlManager.createPartitions)
    in its order, raising with its error and message."""
    info = services.metadata.topics.get(t.name)
    if info is None:
        raise _PartitionsError(errors.UNKNOWN_TOPIC_OR_PARTITION, None)
    current = info.partitions
    if t.count == current:
        raise _PartitionsError(errors.INVALID_PARTITIONS, f"Topic already has {current} partition(s).")
    if t.count < current:
        raise _PartitionsError(
            errors.INVALID_PARTITIONS,
            f"The topic {t.name} currently has {current} partition(s); {t.count} would not be an increase.",
        )
    additional = t.count - current
    if t.assignments is not None:
        if len(t.assignments) != additional:
            raise _PartitionsError(
                errors.INVALID_REPLICA_ASSIGNMENT,
                f"Attempted to add {additional} additional partition(s), but only {len(t.assignments)} assignment(s) were specified.",
            )
        replication_factor = 1  # every partition here has one replica, on this broker
        for a in t.assignments:
            replicas = sorted(a.broker_ids)
            if not replicas:
                raise _PartitionsError(errors.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes an empty replica list.")
            previous = None
            for broker_id in replicas:
                if broker_id != services.node_id:
                    raise _PartitionsError(
                        errors.INVALID_REPLICA_ASSIGNMENT,
                        f"The manual partition assignment includes broker {broker_id}, but no such broker is registered.",
                    )
                if broker_id == previous:
                    raise _PartitionsError(
                        errors.INVALID_REPLICA_ASSIGNMENT,
                        f"The manual partition assignment includes the broker {previous} more than once.",
                    )
                previous = broker_id
            if len(replicas) != replication_factor:
                raise _PartitionsError(
                    errors.INVALID_REPLICA_ASSIGNMENT,
                    f"The manual partition assignment includes a partition with {len(replicas)} replica(s), but this is not "
                    f"consistent with previous partitions, which have {replication_factor} replica(s).",
                )
    return additional


def _create_partitions(services: BrokerServices, topics: list[Any], validate_only: bool) -> list[dict[str, Any]]:
    """The controller's part: check every topic, then (unless validate-only) grow the valid ones.
    Runs in the storage thread."""
    results = []
    budget = MAX_NEW_PARTITIONS_PER_REQUEST
    for t in topics:
        try:
            additional = _check_new_partitions(services, t)
            if additional > budget:
                # Kafka's bounded record list overflows: an unexpected error, reported without a message.
                raise _PartitionsError(errors.UNKNOWN_SERVER_ERROR, None)
            budget -= additional
            if not validate_only:
                services.log_manager.add_partitions(t.name, t.count)
            code, message = errors.NONE, None
        except _PartitionsError as e:
            code, message = e.code, e.message
            log.info("CreatePartitions %s: error %d %s", t.name, code, message)
        results.append({"name": t.name, "error_code": code, "error_message": message})
    return results


async def handle_create_partitions(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    """CreatePartitions as Kafka's ControllerApis.createPartitions answers it: names given more than
    once first (INVALID_REQUEST), then the other topics' results, both in the iteration order of the
    Java HashSets Kafka collects the names in."""
    header = context.header
    names: JavaHashMap[str, None] = JavaHashMap()
    duplicates: JavaHashMap[str, None] = JavaHashMap()
    for t in request.topics:
        if t.name in names:
            duplicates[t.name] = None
        names[t.name] = None
    results = [
        {"name": name, "error_code": errors.INVALID_REQUEST, "error_message": "Duplicate topic name."}
        for name in duplicates.keys()
    ]
    for name in duplicates.keys():
        names.pop(name)
    first = {}
    for t in request.topics:
        first.setdefault(t.name, t)
    wanted = [first[name] for name in names.keys()]
    az = services.authorizer
    if az.enabled:
        # ALTER on each topic (ControllerApis.createPartitions): the others fail first, in the same order.
        alterable = az.filter(context, header, AclOperation.ALTER, ResourceType.TOPIC, [t.name for t in wanted])
        results += [{"name": t.name, "error_code": TOPIC_AUTHORIZATION_FAILED, "error_message": None}
                    for t in wanted if t.name not in alterable]
        wanted = [t for t in wanted if t.name in alterable]
    if wanted:
        results += await services.run_blocking(_create_partitions, services, wanted, request.validate_only)
    return {"throttle_time": 0, "results": results}
