"""Share group APIs (KIP-932): ShareGroupHeartbeat (76), ShareGroupDescribe (77), ShareFetch (78),
ShareAcknowledge (79); the request/response side of ``server/share``.

ShareFetch follows KafkaApis.handleShareFetchRequest: the share session first (epoch 0 opens,
-1 closes, otherwise the session's next epoch), then the piggy-backed acknowledgements, then
the fetch: per session partition, the log is read from the share-partition's next fetch offset
and the records found are acquired for the member under an acquisition lock. The response
carries the batches read and the acquired ranges; the client hands out only acquired records.
"""

from __future__ import annotations

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
from ..share.session import FINAL_EPOCH, INITIAL_EPOCH, ShareSession
from .groups import _client_host

if TYPE_CHECKING:
    from ..broker import Broker
    from ..connection import Connection

# ShareFetch's share_acquire_mode: 0 batch_optimized (max_records a soft limit), 1 record_limit.
RECORD_LIMIT_MODE = 1
_ATTRIBUTES = struct.Struct(">h")
_PRODUCER_ID = struct.Struct(">q")


def _coordinator(broker: Broker) -> ShareCoordinator:
    return broker.share_coordinator


# While share.version is 0 (kafka-features.sh downgrade --feature share.version=0) Kafka 4.3 keeps
# the share APIs in ApiVersions and answers each UNSUPPORTED_VERSION (KafkaApis'
# isShareGroupProtocolEnabled check, made before authorization).
UNSUPPORTED_VERSION = 35
_UNSUPPORTED_MESSAGE = "The version of API is not supported."


def _share_disabled(broker: Broker) -> bool:
    return not share_groups_enabled(broker)


def _may_read_group(broker: Broker, conn: Connection, header: RequestHeader, group_id: str) -> bool:
    return broker.authorizer.authorize(conn, header, AclOperation.READ, ResourceType.GROUP, group_id)


# ---- ShareGroupHeartbeat (76), ShareGroupDescribe (77) ---------------------------------------


async def handle_share_group_heartbeat(broker: Broker, conn: Connection, header: RequestHeader, request: Any) -> dict[str, Any]:
    if _share_disabled(broker):
        return {"throttle_time": 0, "error_code": UNSUPPORTED_VERSION, "error_message": None, "member_epoch": 0,
                "heartbeat_interval": 0}
    if not _may_read_group(broker, conn, header, request.group_id):
        return {"throttle_time": 0, "error_code": GROUP_AUTHORIZATION_FAILED, "member_epoch": 0, "heartbeat_interval": 0}
    topics = request.subscribed_topic_names
    await _coordinator(broker).persister.ensure_topic()
    await broker.group_coordinator.ensure_offsets_topic()  # the group's records (server/share/group_records.py)
    return _coordinator(broker).heartbeat(
        request.group_id, request.member_id, request.member_epoch, request.rack_id,
        None if topics is None else list(topics), header.client_id or "", _client_host(conn))


async def handle_share_group_describe(broker: Broker, conn: Connection, header: RequestHeader, request: Any) -> dict[str, Any]:
    if _share_disabled(broker):
        return {"throttle_time": 0, "groups": [
            {"error_code": UNSUPPORTED_VERSION, "error_message": None, "group_id": group_id, "group_state": "",
             "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "", "members": []} for group_id in request.group_ids]}
    groups = []
    for group_id in request.group_ids:
        if not broker.authorizer.authorize(conn, header, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            groups.append({"error_code": GROUP_AUTHORIZATION_FAILED, "group_id": group_id, "group_state": "",
                           "group_epoch": -1, "assignment_epoch": -1, "assignor_name": "", "members": []})
            continue
        groups.append(_coordinator(broker).describe(group_id, request.include_authorized_operations, 0))
    return {"throttle_time": 0, "groups": groups}


# ---- ShareFetch (78), ShareAcknowledge (79) ----------------------------------------------------


def _session_error(code: int) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": code, "acquisition_lock_timeout": 0, "responses": [], "node_endpoints": []}


def _acknowledge(coordinator: ShareCoordinator, group_id: str, member_id: str, topics: Any) -> dict[tuple[uuid.UUID, int], int]:
    """The acknowledgement batches of a request, applied: error per (topic id, partition)."""
    out: dict[tuple[uuid.UUID, int], int] = {}
    for t in topics:
        for p in t.partitions:
            if not p.acknowledgement_batches:
                continue
            batches = [(b.first_offset, b.last_offset, [int(x) for x in b.acknowledge_types]) for b in p.acknowledgement_batches]
            out[(t.topic_id, p.partition_index)] = coordinator.acknowledge(group_id, member_id, t.topic_id, p.partition_index, batches)
    return out


def _partition_answer(partition: int, error: int = 0, ack_error: int = 0, records: bytes | None = None,
                      acquired: list[Any] | None = None) -> dict[str, Any]:
    return {"partition_index": partition, "error_code": error, "acknowledge_error_code": ack_error,
            "current_leader": {"leader_id": 1, "leader_epoch": 0},
            # kio's Records here is not nullable: an answer without records (acknowledgements only) carries none.
            "records": b"" if records is None else records,
            "acquired_records": [{"first_offset": a.first_offset, "last_offset": a.last_offset, "delivery_count": a.delivery_count}
                                 for a in acquired or []]}


def _fetch_once(broker: Broker, session: ShareSession, max_records: int, max_bytes: int,
                record_limit: bool) -> dict[tuple[uuid.UUID, int], dict[str, Any]]:
    """One pass over the session's partitions: read and acquire. Answers only for partitions
    with acquired records or an error."""
    coordinator = _coordinator(broker)
    coordinator.expire_locks()
    out: dict[tuple[uuid.UUID, int], dict[str, Any]] = {}
    for topic_id, partition in session.partitions:
        if max_records <= 0 or max_bytes <= 0:
            break
        info = broker.metadata.topics_by_id.get(topic_id)
        lg = broker.replica_manager.get_log(info.name, partition) if info is not None else None
        if lg is None:
            code = errors.UNKNOWN_TOPIC_ID if info is None else errors.UNKNOWN_TOPIC_OR_PARTITION
            out[(topic_id, partition)] = _partition_answer(partition, code)
            continue
        sp = coordinator.share_partition(session.group_id, topic_id, partition)
        if sp is None or not sp.can_acquire():
            continue
        offset = max(sp.next_fetch_offset(), lg.log_start_offset)
        aborted: list[Any] = []
        if coordinator.read_committed(session.group_id):
            # share.isolation.level=read_committed: up to the last stable offset; records of
            # aborted transactions are archived, never delivered (Kafka's ShareFetchUtils).
            if offset >= lg.last_stable_offset:
                continue
            _, data, aborted = broker.replica_manager.read_committed(lg, offset, max_bytes, True)
        else:
            if offset >= lg.high_watermark:
                continue
            data = broker.replica_manager.read(lg, offset, max_bytes, True)
        if data is None:
            continue
        raw = data.read()
        batches = _batches(raw)
        now = int(time.time() * 1000)
        if aborted:
            sp.archive(_aborted_ranges(raw, batches, aborted))
        acquired = sp.acquire(session.member_id, [(b, last) for b, last, _, _ in batches], max_records, now,
                              record_limit=record_limit)
        # Archived gaps are written; an acquisition, or a start offset just resolved, is not (as Kafka).
        coordinator.persister.write((session.group_id, topic_id, partition), sp, states_only=True)
        if not acquired:
            continue
        first, last = acquired[0].first_offset, acquired[-1].last_offset
        kept = [(s, e) for b, lst, s, e in batches if lst >= first and b <= last]
        records = raw[kept[0][0]:kept[-1][1]]
        max_records -= sum(a.last_offset - a.first_offset + 1 for a in acquired)
        max_bytes -= len(records)
        out[(topic_id, partition)] = _partition_answer(partition, records=records, acquired=acquired)
    return out


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


async def _check_share_request(broker: Broker, conn: Connection, header: RequestHeader,
                               group_id: str | None, member_id: str | None) -> dict[str, Any] | None:
    """What ShareFetch and ShareAcknowledge check first: the ids given, READ on the group, then
    the share-state topic ready. The error answer, or None to go on."""
    if _share_disabled(broker):
        return _session_error(UNSUPPORTED_VERSION)
    if not group_id or not member_id:
        return _session_error(errors.INVALID_REQUEST)
    if not _may_read_group(broker, conn, header, group_id):
        return _session_error(GROUP_AUTHORIZATION_FAILED)
    await _coordinator(broker).persister.ensure_topic()
    return None


async def handle_share_fetch(broker: Broker, conn: Connection, header: RequestHeader, request: Any) -> dict[str, Any]:
    coordinator = _coordinator(broker)
    group_id, member_id, epoch = request.group_id, request.member_id, request.share_session_epoch
    refused = await _check_share_request(broker, conn, header, group_id, member_id)
    if refused is not None:
        return refused
    has_acks = any(p.acknowledgement_batches for t in request.topics for p in t.partitions)
    if epoch == INITIAL_EPOCH:
        if has_acks:
            return _session_error(errors.INVALID_REQUEST)
        session = coordinator.sessions.open(group_id, member_id)
    else:
        code, found = coordinator.sessions.check(group_id, member_id, epoch)
        if found is None:
            return _session_error(code)
        session = found
    ack_errors = _acknowledge(coordinator, group_id, member_id, request.topics)
    answers: dict[tuple[uuid.UUID, int], dict[str, Any]] = {}
    if epoch == FINAL_EPOCH:
        coordinator.release_session(group_id, member_id)
    else:
        for t in request.forgotten_topics_data:
            for p in t.partitions:
                session.partitions.pop((t.topic_id, p), None)
        for t in request.topics:
            for p in t.partitions:
                session.partitions[(t.topic_id, p.partition_index)] = None
        max_records = request.max_records if request.max_records > 0 else 500
        record_limit = getattr(request, "share_acquire_mode", 0) == RECORD_LIMIT_MODE
        answers = _fetch_once(broker, session, max_records, request.max_bytes, record_limit)
        wait_ms = ms(request.max_wait)
        if not answers and wait_ms > 0 and session.partitions:
            # Wait for an append, or until the next acquisition lock expires, then try again.
            deadline = coordinator.next_lock_deadline(group_id)
            if deadline is not None:
                wait_ms = max(0, min(wait_ms, deadline - int(time.time() * 1000) + 1))
            tps = [(broker.metadata.topics_by_id[t].name, p) for t, p in session.partitions if t in broker.metadata.topics_by_id]
            await broker.replica_manager.wait_for_data(tps, wait_ms / 1000)
            if coordinator.sessions.get(group_id, member_id) is session:
                answers = _fetch_once(broker, session, max_records, request.max_bytes, record_limit)
    for key, code in ack_errors.items():
        answers.setdefault(key, _partition_answer(key[1]))["acknowledge_error_code"] = code
    by_topic: dict[uuid.UUID, list[dict[str, Any]]] = {}
    for (topic_id, _), answer in answers.items():
        by_topic.setdefault(topic_id, []).append(answer)
    return {"throttle_time": 0, "error_code": errors.NONE, "acquisition_lock_timeout": coordinator.lock_duration_ms(group_id),
            "responses": [{"topic_id": t, "partitions": ps} for t, ps in by_topic.items()], "node_endpoints": []}


async def handle_share_acknowledge(broker: Broker, conn: Connection, header: RequestHeader, request: Any) -> dict[str, Any]:
    coordinator = _coordinator(broker)
    group_id, member_id, epoch = request.group_id, request.member_id, request.share_session_epoch
    refused = await _check_share_request(broker, conn, header, group_id, member_id)
    if refused is not None:
        return refused
    if epoch == INITIAL_EPOCH:
        # ShareAcknowledge never opens a session (Kafka: INVALID_SHARE_SESSION_EPOCH).
        return _session_error(123)
    code, session = coordinator.sessions.check(group_id, member_id, epoch)
    if session is None:
        return _session_error(code)
    ack_errors = _acknowledge(coordinator, group_id, member_id, request.topics)
    if epoch == FINAL_EPOCH:
        coordinator.release_session(group_id, member_id)
    by_topic: dict[uuid.UUID, list[dict[str, Any]]] = {}
    for (topic_id, partition), err in ack_errors.items():
        by_topic.setdefault(topic_id, []).append({"partition_index": partition, "error_code": err,
                                                  "current_leader": {"leader_id": 1, "leader_epoch": 0}})
    return {"throttle_time": 0, "error_code": errors.NONE, "acquisition_lock_timeout": coordinator.lock_duration_ms(group_id),
            "responses": [{"topic_id": t, "partitions": ps} for t, ps in by_topic.items()], "node_endpoints": []}


# ---- DescribeShareGroupOffsets (90), AlterShareGroupOffsets (91), DeleteShareGroupOffsets (92) --


async def handle_describe_share_group_offsets(broker: Broker, conn: Connection, header: RequestHeader, request: Any) -> dict[str, Any]:
    if _share_disabled(broker):
        return {"throttle_time": 0, "groups": [{"group_id": g.group_id, "topics": [], "error_code": UNSUPPORTED_VERSION,
                                                "error_message": None} for g in request.groups]}
    groups = []
    for g in request.groups:
        if not broker.authorizer.authorize(conn, header, AclOperation.DESCRIBE, ResourceType.GROUP, g.group_id):
            groups.append({"group_id": g.group_id, "topics": [], "error_code": GROUP_AUTHORIZATION_FAILED, "error_message": None})
            continue
        topics = None if g.topics is None else [(t.topic_name, [int(p) for p in t.partitions]) for t in g.topics]
        groups.append(share_offsets.describe_offsets(_coordinator(broker), g.group_id, topics))
    return {"throttle_time": 0, "groups": groups}


def _offsets_unsupported() -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": UNSUPPORTED_VERSION, "error_message": _UNSUPPORTED_MESSAGE, "responses": []}


async def handle_alter_share_group_offsets(broker: Broker, conn: Connection, header: RequestHeader, request: Any) -> dict[str, Any]:
    if _share_disabled(broker):
        return _offsets_unsupported()
    if not _may_read_group(broker, conn, header, request.group_id):
        return {"throttle_time": 0, "error_code": GROUP_AUTHORIZATION_FAILED, "error_message": None, "responses": []}
    topics = [(t.topic_name, [(p.partition_index, p.start_offset) for p in t.partitions]) for t in request.topics]
    await _coordinator(broker).persister.ensure_topic()
    await broker.group_coordinator.ensure_offsets_topic()
    return share_offsets.alter_offsets(_coordinator(broker), request.group_id, topics)


async def handle_delete_share_group_offsets(broker: Broker, conn: Connection, header: RequestHeader, request: Any) -> dict[str, Any]:
    if _share_disabled(broker):
        return _offsets_unsupported()
    if not broker.authorizer.authorize(conn, header, AclOperation.DELETE, ResourceType.GROUP, request.group_id):
        return {"throttle_time": 0, "error_code": GROUP_AUTHORIZATION_FAILED, "error_message": None, "responses": []}
    return share_offsets.delete_offsets(_coordinator(broker), request.group_id, [t.topic_name for t in request.topics])
