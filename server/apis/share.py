"""Share group APIs (KIP-932): ShareGroupHeartbeat (76), ShareGroupDescribe (77), ShareFetch (78),
ShareAcknowledge (79); the request/response side of ``server/share``.

ShareFetch follows KafkaApis.handleShareFetchRequest: the share session first (epoch 0 opens,
-1 closes, otherwise the session's next epoch), then the piggy-backed acknowledgements, then
the fetch: per session partition, the log is read from the share-partition's next fetch offset
and the records found are acquired for the member under an acquisition lock. The response
carries the batches read and the acquired ranges; the client hands out only acquired records.
"""

from __future__ import annotations

import asyncio
import struct
import time
import uuid
from typing import TYPE_CHECKING, Any

from kafka_sidecar.protocol import errors
from kafka_sidecar.protocol.framing import RequestHeader
from kafka_sidecar.protocol.messages import ms
from kafka_sidecar.protocol.record_batch import batch_extents as _batches

from ..features import share_groups_enabled
from ..security.acls import AclOperation, ResourceType
from ..security.authorizer import GROUP_AUTHORIZATION_FAILED
from ..share import offsets as share_offsets
from ..share.coordinator import ShareCoordinator
from ..share.session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_SHARE_SESSION_EPOCH,
    SHARE_SESSION_LIMIT_REACHED,
    ShareSession,
    ShareSessionError,
)
from .groups import _client_host
from .leader_hints import LEADER_EPOCH, node_endpoints

if TYPE_CHECKING:
    from ..request_context import RequestContext
    from ..services import BrokerServices

# ShareFetch's share_acquire_mode: 0 batch_optimized (max_records a soft limit), 1 record_limit.
RECORD_LIMIT_MODE = 1
_ATTRIBUTES = struct.Struct(">h")
_PRODUCER_ID = struct.Struct(">q")


def _coordinator(services: BrokerServices) -> ShareCoordinator:
    return services.share_coordinator


# While share.version is 0 (kafka-features.sh downgrade --feature share.version=0) Kafka 4.3 keeps
# the share APIs in ApiVersions and answers each UNSUPPORTED_VERSION (KafkaApis'
# isShareGroupProtocolEnabled check, made before authorization).
UNSUPPORTED_VERSION = 35
_UNSUPPORTED_MESSAGE = "The version of API is not supported."


def _share_disabled(services: BrokerServices) -> bool:
    return not share_groups_enabled(services.features)


def _may_read_group(services: BrokerServices, context: RequestContext, header: RequestHeader, group_id: str) -> bool:
    return services.authorizer.authorize(context, header, AclOperation.READ, ResourceType.GROUP, group_id)


# ---- ShareGroupHeartbeat (76), ShareGroupDescribe (77) ---------------------------------------


async def handle_share_group_heartbeat(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    header = context.header
    if _share_disabled(services):
        return {"throttle_time": 0, "error_code": UNSUPPORTED_VERSION, "error_message": None, "member_epoch": 0,
                "heartbeat_interval": 0}
    if not _may_read_group(services, context, header, request.group_id):
        return {"throttle_time": 0, "error_code": GROUP_AUTHORIZATION_FAILED, "member_epoch": 0, "heartbeat_interval": 0}
    if not _coordinator(services).coordinates_group(request.group_id):  # another node of the cluster's group
        return {"throttle_time": 0, "error_code": errors.NOT_COORDINATOR, "member_epoch": 0, "heartbeat_interval": 0}
    topics = request.subscribed_topic_names
    await _coordinator(services).persister.ensure_topic()
    await services.group_coordinator.ensure_offsets_topic()  # the group's records (server/share/group_records.py)
    return _coordinator(services).heartbeat(
        request.group_id, request.member_id, request.member_epoch, request.rack_id,
        None if topics is None else list(topics), header.client_id or "", _client_host(context))


async def handle_share_group_describe(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    header = context.header
    if _share_disabled(services):
        return {"throttle_time": 0, "groups": [
            {"error_code": UNSUPPORTED_VERSION, "error_message": None, "group_id": group_id, "group_state": "",
             "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "", "members": []} for group_id in request.group_ids]}
    groups = []
    for group_id in request.group_ids:
        if not services.authorizer.authorize(context, header, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            groups.append({"error_code": GROUP_AUTHORIZATION_FAILED, "group_id": group_id, "group_state": "",
                           "group_epoch": -1, "assignment_epoch": -1, "assignor_name": "", "members": []})
            continue
        if not _coordinator(services).coordinates_group(group_id):
            groups.append({"error_code": errors.NOT_COORDINATOR, "group_id": group_id, "group_state": "",
                           "group_epoch": -1, "assignment_epoch": -1, "assignor_name": "", "members": []})
            continue
        groups.append(_coordinator(services).describe(group_id, request.include_authorized_operations, 0))
    return {"throttle_time": 0, "groups": groups}


# ---- ShareFetch (78), ShareAcknowledge (79) ----------------------------------------------------


def _session_error(code: int, message: str | None = None) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": code, "error_message": message, "acquisition_lock_timeout": 0,
            "responses": [], "node_endpoints": []}


_Key = tuple[uuid.UUID, int]


class _TopicReadCheck:
    """READ on each topic, asked once per topic name and request (Kafka's filterByAuthorized)."""

    def __init__(self, services: BrokerServices, context: RequestContext, header: RequestHeader) -> None:
        self.services, self.context, self.header = services, context, header
        self.seen: dict[str, bool] = {}

    def __call__(self, topic: str) -> bool:
        ok = self.seen.get(topic)
        if ok is None:
            ok = self.seen[topic] = self.services.authorizer.authorize(self.context, self.header, AclOperation.READ,
                                                                     ResourceType.TOPIC, topic)
        return ok


def _partition_exists(services: BrokerServices, topic_id: uuid.UUID, partition: int) -> bool:
    info = services.metadata.topics_by_id.get(topic_id)
    return info is not None and 0 <= partition < info.partitions


def _led_elsewhere(services: BrokerServices, topic_id: uuid.UUID, partition: int) -> int | None:
    """In a cluster: the node leading the partition when it is not this one (the partition is
    answered NOT_LEADER_OR_FOLLOWER, as Kafka's other brokers do); else None."""
    cluster = services.cluster
    if cluster is None:
        return None
    info = services.metadata.topics_by_id.get(topic_id)
    if info is None or cluster.placement.is_local(info.name, partition):
        return None
    return cluster.placement.leader(info.name, partition)


def _leaders(services: BrokerServices, context: RequestContext, answers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """In a cluster: each partition's current leader (this node, or for NOT_LEADER_OR_FOLLOWER the
    one leading it), and the endpoints of those others (ShareFetch/ShareAcknowledge's NodeEndpoints)."""
    cluster = services.cluster
    if cluster is None:
        return []
    others: set[int] = set()
    for a in answers:
        leader = a.pop("_leader", None)
        if leader is not None:
            others.add(leader)
        a["current_leader"] = {"leader_id": services.node_id if leader is None else leader, "leader_epoch": LEADER_EPOCH}
    return node_endpoints(services, context.listener, others)


def _valid_batches(batches: list[tuple[int, int, list[int]]], version: int, is_renew_ack: bool) -> bool:
    """Kafka's KafkaApis.validateAcknowledgementBatches: ordered ranges, one type per range or
    per offset, known types (RENEW from v2, and only in a renew request)."""
    previous = -1
    max_type = 4 if version >= 2 else 3
    for first, last, types in batches:
        if first > last or first < previous or not types:
            return False
        if len(types) > 1 and last - first != len(types) - 1:
            return False
        if any(t < 0 or t > max_type for t in types) or (not is_renew_ack and 4 in types):
            return False
        previous = last
    return True


def _acknowledge(services: BrokerServices, group_id: str, member_id: str, topics: Any, version: int, is_renew_ack: bool,
                 may_read: _TopicReadCheck) -> dict[_Key, int]:
    """Every partition of the request's topics, its acknowledgements applied: error per
    (topic id, partition), checked in Kafka's order (KafkaApis.handleAcknowledgements): an
    unknown topic id (a deleted topic) UNKNOWN_TOPIC_ID, malformed batches INVALID_REQUEST, no
    READ TOPIC_AUTHORIZATION_FAILED, no such partition UNKNOWN_TOPIC_OR_PARTITION, no batches
    NONE, else the share-partition's answer."""
    coordinator = _coordinator(services)
    by_id = services.metadata.topics_by_id
    out: dict[_Key, int] = {}
    for t in topics:
        info = by_id.get(t.topic_id)
        for p in t.partitions:
            key = (t.topic_id, p.partition_index)
            if info is None:
                out[key] = errors.UNKNOWN_TOPIC_ID
                continue
            batches = [(b.first_offset, b.last_offset, [int(x) for x in b.acknowledge_types]) for b in p.acknowledgement_batches]
            if not _valid_batches(batches, version, is_renew_ack):
                out[key] = errors.INVALID_REQUEST
            elif not may_read(info.name):
                out[key] = errors.TOPIC_AUTHORIZATION_FAILED
            elif not _partition_exists(services, t.topic_id, p.partition_index):
                out[key] = errors.UNKNOWN_TOPIC_OR_PARTITION
            elif _led_elsewhere(services, t.topic_id, p.partition_index) is not None:
                out[key] = errors.NOT_LEADER_OR_FOLLOWER
            elif not batches:
                out[key] = errors.NONE
            else:
                out[key] = coordinator.acknowledge(group_id, member_id, t.topic_id, p.partition_index, batches)
    return out


def _partition_answer(partition: int, error: int = 0, ack_error: int = 0, records: bytes | None = None,
                      acquired: list[Any] | None = None) -> dict[str, Any]:
    return {"partition_index": partition, "error_code": error, "acknowledge_error_code": ack_error,
            "current_leader": {"leader_id": 1, "leader_epoch": 0},
            # kio's Records here is not nullable: an answer without records (acknowledgements only) carries none.
            "records": b"" if records is None else records,
            "acquired_records": [{"first_offset": a.first_offset, "last_offset": a.last_offset, "delivery_count": a.delivery_count}
                                 for a in acquired or []]}


def _fetch_pass(services: BrokerServices, session: ShareSession, keys: list[_Key], budget: list[int],
                record_limit: bool) -> dict[_Key, dict[str, Any]]:
    """Read and acquire on ``keys`` (Kafka's DelayedShareFetch over the partitions whose fetch
    lock it got): an answer for each partition that may acquire more, with the records acquired
    (none when there were none to acquire). ``budget`` is [records left, bytes]: the records are
    counted down over the partitions (ShareFetchUtils.processFetchResponse), the bytes shared
    evenly between them (PartitionMaxBytesStrategy UNIFORM)."""
    coordinator = _coordinator(services)
    out: dict[_Key, dict[str, Any]] = {}
    lockable = []
    for topic_id, partition in keys:
        sp = coordinator.share_partition(session.group_id, topic_id, partition)
        if sp is not None and sp.can_acquire():
            lockable.append((topic_id, partition, sp))
    if not lockable:
        return out
    per_partition = max(1, budget[1] // len(lockable))
    for topic_id, partition, sp in lockable:
        answer = out[(topic_id, partition)] = _partition_answer(partition)
        if budget[0] <= 0:
            continue
        info = services.metadata.topics_by_id.get(topic_id)
        lg = services.replica_manager.get_log(info.name, partition) if info is not None else None
        if lg is None:
            continue
        offset = max(sp.next_fetch_offset(), lg.log_start_offset)
        aborted: list[Any] = []
        if coordinator.read_committed(session.group_id):
            # share.isolation.level=read_committed: up to the last stable offset; records of
            # aborted transactions are archived, never delivered (Kafka's ShareFetchUtils).
            if offset >= lg.last_stable_offset:
                continue
            _, data, aborted = services.replica_manager.read_committed(lg, offset, per_partition, True)
        else:
            if offset >= lg.high_watermark:
                continue
            data = services.replica_manager.read(lg, offset, per_partition, True)
        if data is None:
            continue
        raw = data.read()
        batches = _batches(raw)
        now = int(time.time() * 1000)
        acquired = coordinator.acquire(session.group_id, session.member_id, topic_id, partition, sp,
                                       [(b, last) for b, last, _, _ in batches], budget[0], now,
                                       aborted=_aborted_ranges(raw, batches, aborted) if aborted else None,
                                       record_limit=record_limit)
        if not acquired:
            continue
        first, last = acquired[0].first_offset, acquired[-1].last_offset
        kept = [(s, e) for b, lst, s, e in batches if lst >= first and b <= last]
        answer["records"] = raw[kept[0][0]:kept[-1][1]]
        answer["acquired_records"] = _partition_answer(partition, acquired=acquired)["acquired_records"]
        budget[0] -= sum(a.last_offset - a.first_offset + 1 for a in acquired)
    return out


def _has_records(answers: dict[_Key, dict[str, Any]]) -> bool:
    return any(a["acquired_records"] for a in answers.values())


def _fetch_once(services: BrokerServices, session: ShareSession, keys: list[_Key], max_records: int, max_bytes: int,
                record_limit: bool) -> dict[_Key, dict[str, Any]]:
    """One attempt at the fetch. Share-partitions not loaded yet are loaded now, and as in Kafka
    (SharePartition.maybeInitialize completes one partition at a time, and the delayed fetch
    completes as soon as a loaded partition has data) the answer then carries the partitions
    loaded before this request and those loaded up to the first that had records."""
    coordinator = _coordinator(services)
    coordinator.expire_locks()
    group = session.group_id
    loaded = [k for k in keys if (group, *k) in coordinator.loaded]
    loading = [k for k in keys if (group, *k) not in coordinator.loaded]
    coordinator.loaded.update((group, *k) for k in loading)
    budget = [max_records, max_bytes]
    answers = _fetch_pass(services, session, loaded, budget, record_limit)
    for key in loading:
        if _has_records(answers):
            break
        answers.update(_fetch_pass(services, session, [key], budget, record_limit))
    return answers


def _aborted_ranges(raw: bytes, batches: list[tuple[int, int, int, int]], aborted: list[Any]) -> list[tuple[int, int]]:
    """(first, last) offsets of the transactional batches in ``raw`` that belong to an aborted
    transaction (Kafka's filterAbortedTransactions: a producer's batches from its aborted
    transaction's first offset until its abort marker)."""
    out = []
    pending = sorted(aborted, key=lambda a: a.first_offset)
    active: set[int] = set()
    for base, last, start, _ in batches:
        while pending and pending[0].first_offset <= last:
            active.add(pending.pop(0).producer_id)
        attributes, producer_id = _ATTRIBUTES.unpack_from(raw, start + 21)[0], _PRODUCER_ID.unpack_from(raw, start + 43)[0]
        if not attributes & 0x10 or producer_id not in active:
            continue
        if attributes & 0x20:  # the abort marker ends the transaction
            active.discard(producer_id)
            continue
        out.append((base, last))
    return out


async def _check_share_request(services: BrokerServices, context: RequestContext, header: RequestHeader,
                               group_id: str | None, member_id: str | None) -> dict[str, Any] | None:
    """What ShareFetch and ShareAcknowledge check first: the ids given, READ on the group, then
    the share-state topic ready. The error answer, or None to go on."""
    if _share_disabled(services):
        return _session_error(UNSUPPORTED_VERSION)
    if not group_id or not member_id:
        return _session_error(errors.INVALID_REQUEST)
    if not _may_read_group(services, context, header, group_id):
        return _session_error(GROUP_AUTHORIZATION_FAILED)
    await _coordinator(services).persister.ensure_topic()
    return None


def _rotated(keys: list[_Key], epoch: int) -> list[_Key]:
    """Kafka's PartitionRotateStrategy ROUND_ROBIN: the session's partitions start at
    epoch % count, so each fetch begins at another partition."""
    if len(keys) <= 1 or epoch < 1:
        return keys
    at = epoch % len(keys)
    return keys[at:] + keys[:at]


def _renew_problem(request: Any) -> str | None:
    """A renew-acknowledgement ShareFetch (v2 is_renew_ack) must not ask for records."""
    message = "".join(f"{name} must be set to 0, " for name, value in (
        ("maxBytes", request.max_bytes), ("minBytes", request.min_bytes), ("maxRecords", request.max_records),
        ("maxWaitMs", ms(request.max_wait))) if value != 0)
    return message + "if isRenewAck is true." if message else None


def _connection_watch(coordinator: ShareCoordinator, context: RequestContext) -> object:
    """The connection's identity for share sessions; its closing releases them."""
    client = context.client
    client.close_callbacks["share-sessions"] = lambda: coordinator.connection_closed(client)
    return client


async def handle_share_fetch(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    """KafkaApis.handleShareFetchRequest: the share session (newContext), the piggy-backed
    acknowledgements, the fetch over the session's partitions, and with epoch -1 the session
    released after the acknowledgements."""
    header = context.header
    coordinator = _coordinator(services)
    group_id, member_id, epoch = request.group_id, request.member_id, request.share_session_epoch
    refused = await _check_share_request(services, context, header, group_id, member_id)
    if refused is not None:
        return refused
    renew = header.api_version >= 2 and bool(getattr(request, "is_renew_ack", False))
    if renew and (problem := _renew_problem(request)) is not None:
        return _session_error(errors.INVALID_REQUEST, problem)
    has_acks = any(p.acknowledgement_batches for t in request.topics for p in t.partitions)
    by_id = services.metadata.topics_by_id
    fetch_data = [((t.topic_id, p.partition_index), by_id[t.topic_id].name if t.topic_id in by_id else None)
                  for t in request.topics for p in t.partitions]
    forget = [(t.topic_id, p) for t in request.forgotten_topics_data for p in t.partitions]
    try:
        if epoch == FINAL_EPOCH:
            session = coordinator.sessions.existing(group_id, member_id)
        elif epoch == INITIAL_EPOCH:
            if has_acks:
                return _session_error(errors.INVALID_REQUEST)
            session = coordinator.sessions.create(group_id, member_id, fetch_data, _connection_watch(coordinator, context),
                                                  coordinator.max_share_sessions())
        else:
            session = coordinator.sessions.subsequent(group_id, member_id, epoch)
            session.update(fetch_data, forget)
    except ShareSessionError as e:
        if e.code == SHARE_SESSION_LIMIT_REACHED:
            await asyncio.sleep(ms(request.max_wait) / 1000)
        return _session_error(e.code)
    unreadable: dict[_Key, int] = {}
    remote = coordinator.persister.remote
    if remote is not None:  # share-partitions whose state another node keeps (server/cluster/share_state.py)
        unreadable = await remote.load_missing(coordinator, group_id, list(session.partitions))
    may_read = _TopicReadCheck(services, context, header)
    ack_errors = _acknowledge(services, group_id, member_id, request.topics, header.api_version, renew, may_read) \
        if has_acks else {}
    if remote is not None and ack_errors:
        ack_errors.update(await remote.settle(group_id, [k for k, e in ack_errors.items() if e == errors.NONE]))
    answers: dict[_Key, dict[str, Any]] = {}
    if epoch != FINAL_EPOCH and not renew:
        # The partitions fetched: the request's (a new session) or the session's, rotated.
        keys = [k for k, _ in fetch_data] if epoch == INITIAL_EPOCH else _rotated(list(session.partitions), epoch)
        interested = []
        for key in keys:
            topic = session.partitions[key].topic if key in session.partitions else None
            if topic is None:
                answers[key] = _partition_answer(key[1], errors.UNKNOWN_TOPIC_ID)
            elif not may_read(topic):
                answers[key] = _partition_answer(key[1], errors.TOPIC_AUTHORIZATION_FAILED)
            elif not _partition_exists(services, *key):
                answers[key] = _partition_answer(key[1], errors.UNKNOWN_TOPIC_OR_PARTITION)
            elif (leader := _led_elsewhere(services, *key)) is not None:
                answers[key] = {**_partition_answer(key[1], errors.NOT_LEADER_OR_FOLLOWER), "_leader": leader}
            elif key in unreadable:
                answers[key] = _partition_answer(key[1], unreadable[key])
            else:
                interested.append(key)
        max_records, max_bytes = request.max_records, request.max_bytes
        record_limit = getattr(request, "share_acquire_mode", 0) == RECORD_LIMIT_MODE
        if interested and max_records > 0 and max_bytes > 0:
            found = _fetch_once(services, session, interested, max_records, max_bytes, record_limit)
            wait_ms = ms(request.max_wait)
            if not _has_records(found) and wait_ms > 0:
                # Wait for an append, or until the next acquisition lock expires, then try again.
                deadline = coordinator.next_lock_deadline(group_id)
                if deadline is not None:
                    wait_ms = max(0, min(wait_ms, deadline - int(time.time() * 1000) + 1))
                tps = [(by_id[t].name, p) for t, p in interested if t in by_id]
                await services.replica_manager.wait_for_data(tps, wait_ms / 1000)
                if coordinator.sessions.get(group_id, member_id) is session:
                    found = _fetch_once(services, session, interested, max_records, max_bytes, record_limit)
            answers.update(found)
        if epoch != INITIAL_EPOCH:
            # A subsequent session's answer: only what changed (ShareSessionContext's iterator);
            # a partition that returned records moves to the end of the session.
            for key in list(answers):
                cached = session.partitions.get(key)
                has_records = bool(answers[key]["acquired_records"])
                if cached is not None and not cached.must_respond(has_records, answers[key]["error_code"]):
                    del answers[key]
                elif has_records:
                    session.move_to_end(key)
    for key, code in ack_errors.items():
        answers.setdefault(key, _partition_answer(key[1]))["acknowledge_error_code"] = code
    if any(topic_id not in services.metadata.topics_by_id for topic_id, _ in answers):
        # Kafka 4.3.1 counts the bytes out of every topic of the answer by name, and a topic id
        # it no longer knows (a deleted topic still in the session, or acknowledged) has none:
        # the whole ShareFetch fails with UNKNOWN_SERVER_ERROR (after the session update and the
        # acknowledgements, before a final epoch's release), until the client's session forgets
        # the partition. Clients (librdkafka's 0181) expect that answer.
        return _session_error(errors.UNKNOWN_SERVER_ERROR)
    if epoch == FINAL_EPOCH:
        coordinator.release_session(group_id, member_id)
    by_topic: dict[uuid.UUID, list[dict[str, Any]]] = {}
    for (topic_id, _), answer in answers.items():
        by_topic.setdefault(topic_id, []).append(answer)
    return {"throttle_time": 0, "error_code": errors.NONE, "acquisition_lock_timeout": coordinator.lock_duration_ms(group_id),
            "responses": [{"topic_id": t, "partitions": ps} for t, ps in by_topic.items()],
            "node_endpoints": _leaders(services, context, list(answers.values()))}


async def handle_share_acknowledge(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    """KafkaApis.handleShareAcknowledgeRequest: the session's epoch (acknowledgeSessionUpdate:
    0 is INVALID_SHARE_SESSION_EPOCH, -1 needs only the session), the acknowledgements, then with
    epoch -1 the session released: the acknowledgements of a closing consumer are kept."""
    header = context.header
    coordinator = _coordinator(services)
    group_id, member_id, epoch = request.group_id, request.member_id, request.share_session_epoch
    refused = await _check_share_request(services, context, header, group_id, member_id)
    if refused is not None:
        return refused
    try:
        if epoch == INITIAL_EPOCH:
            raise ShareSessionError(INVALID_SHARE_SESSION_EPOCH)
        if epoch == FINAL_EPOCH:
            coordinator.sessions.existing(group_id, member_id)
        else:
            coordinator.sessions.subsequent(group_id, member_id, epoch)
    except ShareSessionError as e:
        return _session_error(e.code)
    renew = header.api_version >= 2 and bool(getattr(request, "is_renew_ack", False))
    ack_errors = _acknowledge(services, group_id, member_id, request.topics, header.api_version, renew,
                              _TopicReadCheck(services, context, header))
    remote = coordinator.persister.remote
    if remote is not None and ack_errors:  # acknowledgements written on another node (server/cluster/share_state.py)
        ack_errors.update(await remote.settle(group_id, [k for k, e in ack_errors.items() if e == errors.NONE]))
    if epoch == FINAL_EPOCH:
        coordinator.release_session(group_id, member_id)
    by_topic: dict[uuid.UUID, list[dict[str, Any]]] = {}
    rows = []
    for (topic_id, partition), err in ack_errors.items():
        row: dict[str, Any] = {"partition_index": partition, "error_code": err, "current_leader": {"leader_id": 1, "leader_epoch": 0}}
        if err == errors.NOT_LEADER_OR_FOLLOWER:
            row["_leader"] = _led_elsewhere(services, topic_id, partition)
        rows.append(row)
        by_topic.setdefault(topic_id, []).append(row)
    return {"throttle_time": 0, "error_code": errors.NONE, "acquisition_lock_timeout": coordinator.lock_duration_ms(group_id),
            "responses": [{"topic_id": t, "partitions": ps} for t, ps in by_topic.items()],
            "node_endpoints": _leaders(services, context, rows)}


# ---- DescribeShareGroupOffsets (90), AlterShareGroupOffsets (91), DeleteShareGroupOffsets (92) --


async def handle_describe_share_group_offsets(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    header = context.header
    if _share_disabled(services):
        return {"throttle_time": 0, "groups": [{"group_id": g.group_id, "topics": [], "error_code": UNSUPPORTED_VERSION,
                                                "error_message": None} for g in request.groups]}
    groups = []
    for g in request.groups:
        if not services.authorizer.authorize(context, header, AclOperation.DESCRIBE, ResourceType.GROUP, g.group_id):
            groups.append({"group_id": g.group_id, "topics": [], "error_code": GROUP_AUTHORIZATION_FAILED, "error_message": None})
            continue
        coordinator = _coordinator(services)
        if not coordinator.coordinates_group(g.group_id):
            groups.append({"group_id": g.group_id, "topics": [], "error_code": errors.NOT_COORDINATOR, "error_message": None})
            continue
        topics = None if g.topics is None else [(t.topic_name, [int(p) for p in t.partitions]) for t in g.topics]
        elsewhere = None
        if coordinator.persister.remote is not None:  # state or partitions on other nodes (server/cluster/share_state.py)
            names = share_offsets.initialized_topics(coordinator, g.group_id) if topics is None else topics
            by_name = services.metadata.topics
            elsewhere = await coordinator.persister.remote.describe(coordinator, g.group_id, [
                (name, by_name[name].topic_id, p) for name, ps in names if name in by_name for p in ps])
        groups.append(share_offsets.describe_offsets(coordinator, g.group_id, topics, elsewhere))
    return {"throttle_time": 0, "groups": groups}


def _offsets_unsupported() -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": UNSUPPORTED_VERSION, "error_message": _UNSUPPORTED_MESSAGE, "responses": []}


async def handle_alter_share_group_offsets(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    header = context.header
    if _share_disabled(services):
        return _offsets_unsupported()
    if not _may_read_group(services, context, header, request.group_id):
        return {"throttle_time": 0, "error_code": GROUP_AUTHORIZATION_FAILED, "error_message": None, "responses": []}
    if not _coordinator(services).coordinates_group(request.group_id):
        return {"throttle_time": 0, "error_code": errors.NOT_COORDINATOR, "error_message": None, "responses": []}
    topics = [(t.topic_name, [(p.partition_index, p.start_offset) for p in t.partitions]) for t in request.topics]
    await _coordinator(services).persister.ensure_topic()
    await services.group_coordinator.ensure_offsets_topic()
    return share_offsets.alter_offsets(_coordinator(services), request.group_id, topics)


async def handle_delete_share_group_offsets(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    header = context.header
    if _share_disabled(services):
        return _offsets_unsupported()
    if not services.authorizer.authorize(context, header, AclOperation.DELETE, ResourceType.GROUP, request.group_id):
        return {"throttle_time": 0, "error_code": GROUP_AUTHORIZATION_FAILED, "error_message": None, "responses": []}
    if not _coordinator(services).coordinates_group(request.group_id):
        return {"throttle_time": 0, "error_code": errors.NOT_COORDINATOR, "error_message": None, "responses": []}
    return share_offsets.delete_offsets(_coordinator(services), request.group_id, [t.topic_name for t in request.topics])
