"""Transaction APIs: AddPartitionsToTxn (24), AddOffsetsToTxn (25), EndTxn (26),
TxnOffsetCommit (28), DescribeTransactions (65), ListTransactions (66).

The request side of ``server/transactions`` (and, for TxnOffsetCommit, of the group
coordinator), with KafkaApis' authorization checks in its order and its error mapping:
PRODUCER_FENCED is answered INVALID_PRODUCER_EPOCH to clients older than the version that
introduced it (v2 of AddPartitionsToTxn, AddOffsetsToTxn and EndTxn).
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

from kafka_sidecar.protocol import errors
from kafka_sidecar.protocol.framing import RequestHeader
from kafka_sidecar.protocol.topic import INTERNAL_TOPICS, OFFSETS_TOPIC

from ..security.acls import AclOperation, ResourceType
from ..security.authorizer import (
    CLUSTER_AUTHORIZATION_FAILED,
    GROUP_AUTHORIZATION_FAILED,
    TOPIC_AUTHORIZATION_FAILED,
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
)
from ..transactions.state import INVALID_PRODUCER_EPOCH, OPERATION_NOT_ATTEMPTED, PRODUCER_FENCED
from .groups import not_coordinator
from .re2j import Re2jSyntaxError, compile_re2j

if TYPE_CHECKING:
    from ..request_context import RequestContext
    from ..services import BrokerServices


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def _timestamp(ms: int) -> datetime.datetime:
    """A datetime_i64 field's value for ``ms``, -1 included (kio writes None as nothing)."""
    return _EPOCH + datetime.timedelta(milliseconds=ms)



def _fenced_error(code: int, version: int, since: int = 2) -> int:
    return INVALID_PRODUCER_EPOCH if code == PRODUCER_FENCED and version < since else code


def _partition_exists(services: BrokerServices, topic: str, partition: int) -> bool:
    info = services.metadata.topics.get(topic)
    return info is not None and 0 <= partition < info.partitions


def _may_write_txn(services: BrokerServices, context: RequestContext, header: RequestHeader, transactional_id: str) -> bool:
    return services.authorizer.authorize(context, header, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id)


# ---- AddPartitionsToTxn (24) ---------------------------------------------------------------


def _topic_results(results: dict[str, dict[int, int]]) -> list[dict[str, Any]]:
    return [{"name": t, "results_by_partition": [{"partition_index": p, "partition_error_code": e} for p, e in parts.items()]}
            for t, parts in results.items()]


async def _add_partitions(services: BrokerServices, context: RequestContext, header: RequestHeader, transactional_id: str, pid: int,
                          epoch: int, topics: Any, verify_only: bool, from_client: bool) -> dict[str, dict[int, int]]:
    """Per topic and partition, the error of adding them to (or verifying them in) the transaction."""
    wanted = [(t.name, int(p)) for t in topics for p in t.partitions]
    results: dict[str, dict[int, int]] = {}

    def fill(code_for) -> dict[str, dict[int, int]]:
        for t, p in wanted:
            results.setdefault(t, {})[p] = code_for(t, p)
        return results

    az = services.authorizer
    if from_client and not _may_write_txn(services, context, header, transactional_id):
        return fill(lambda t, p: TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    writable: set[str] | None = None
    if from_client:
        # KafkaApis: WRITE on each topic, internal topics never (TOPIC_AUTHORIZATION_FAILED, authorizer or not).
        external = {t for t, _ in wanted if t not in INTERNAL_TOPICS}
        writable = az.filter(context, header, AclOperation.WRITE, ResourceType.TOPIC, external) if az.enabled else external
    bad: dict[tuple[str, int], int] = {}
    for t, p in wanted:
        if writable is not None and t not in writable:
            bad[(t, p)] = TOPIC_AUTHORIZATION_FAILED
        elif not _partition_exists(services, t, p):
            bad[(t, p)] = errors.UNKNOWN_TOPIC_OR_PARTITION
    if bad:
        return fill(lambda t, p: bad.get((t, p), OPERATION_NOT_ATTEMPTED))
    tc = services.transaction_coordinator
    if verify_only:
        return fill(lambda t, p: tc.verify_partition(transactional_id, pid, epoch, t, p))
    error = tc.add_partitions(transactional_id, pid, epoch, wanted)
    return fill(lambda t, p: error)


async def handle_add_partitions_to_txn(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    header = context.header
    version = header.api_version
    if version < 4:
        results = await _add_partitions(
            services, context, header, request.v3_and_below_transactional_id, request.v3_and_below_producer_id,
            request.v3_and_below_producer_epoch, request.v3_and_below_topics, False, True)
        for parts in results.values():
            for p, e in parts.items():
                parts[p] = _fenced_error(e, version)
        return {"throttle_time": 0, "error_code": errors.NONE, "results_by_topic_v3_and_below": _topic_results(results)}
    # v4+: sent by brokers (produce-time verification), CLUSTER_ACTION on the cluster.
    if not services.authorizer.authorize_cluster(context, header, AclOperation.CLUSTER_ACTION):
        return {"throttle_time": 0, "error_code": CLUSTER_AUTHORIZATION_FAILED, "results_by_transaction": []}
    out = []
    for txn in request.transactions:
        results = await _add_partitions(services, context, header, txn.transactional_id, txn.producer_id, txn.producer_epoch,
                                        txn.topics, bool(txn.verify_only), False)
        out.append({"transactional_id": txn.transactional_id, "topic_results": _topic_results(results)})
    return {"throttle_time": 0, "error_code": errors.NONE, "results_by_transaction": out}


# ---- AddOffsetsToTxn (25), EndTxn (26) ----------------------------------------------------------


async def handle_add_offsets_to_txn(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    header = context.header
    if not _may_write_txn(services, context, header, request.transactional_id):
        return {"throttle_time": 0, "error_code": TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    if not services.authorizer.authorize(context, header, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return {"throttle_time": 0, "error_code": GROUP_AUTHORIZATION_FAILED}
    gc = services.group_coordinator
    await gc.ensure_offsets_topic()
    partition = gc.partition_for(request.group_id)
    error = services.transaction_coordinator.add_partitions(
        request.transactional_id, request.producer_id, request.producer_epoch, [(OFFSETS_TOPIC, partition)])
    return {"throttle_time": 0, "error_code": _fenced_error(error, header.api_version)}


async def handle_end_txn(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    header = context.header
    if not _may_write_txn(services, context, header, request.transactional_id):
        return {"throttle_time": 0, "error_code": TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "producer_id": -1, "producer_epoch": -1}
    error = services.transaction_coordinator.end_transaction(
        request.transactional_id, request.producer_id, request.producer_epoch, bool(request.committed))
    return {"throttle_time": 0, "error_code": _fenced_error(error, header.api_version), "producer_id": -1, "producer_epoch": -1}


# ---- TxnOffsetCommit (28) ------------------------------------------------------------------------


async def handle_txn_offset_commit(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    header = context.header
    wanted = [(t.name, p) for t in request.topics for p in t.partitions]

    def answer(code_for) -> dict[str, Any]:
        topics: dict[str, list[dict[str, Any]]] = {}
        for t, p in wanted:
            topics.setdefault(t, []).append({"partition_index": p.partition_index, "error_code": code_for(t, p.partition_index)})
        return {"throttle_time": 0, "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}

    if not _may_write_txn(services, context, header, request.transactional_id):
        return answer(lambda t, p: TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    az = services.authorizer
    if not az.authorize(context, header, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return answer(lambda t, p: GROUP_AUTHORIZATION_FAILED)
    readable = az.filter(context, header, AclOperation.READ, ResourceType.TOPIC, {t for t, _ in wanted}) if az.enabled else None
    errs: dict[tuple[str, int], int] = {}
    valid: dict[str, list[tuple[int, int, int, str | None]]] = {}
    for t, p in wanted:
        if readable is not None and t not in readable:
            errs[(t, p.partition_index)] = TOPIC_AUTHORIZATION_FAILED
        elif not _partition_exists(services, t, p.partition_index):
            errs[(t, p.partition_index)] = errors.UNKNOWN_TOPIC_OR_PARTITION
        else:
            valid.setdefault(t, []).append(
                (p.partition_index, p.committed_offset, getattr(p, "committed_leader_epoch", -1), p.committed_metadata))
    if valid and not_coordinator(services, request.group_id):  # serve --processes N: another node's group
        error, results = errors.NOT_COORDINATOR, []
    elif valid:
        gc = services.group_coordinator
        await gc.ensure_offsets_topic()
        error, results = gc.commit_transactional_offsets(
            request.group_id, request.producer_id, request.producer_epoch,
            getattr(request, "generation_id", -1), getattr(request, "member_id", ""),
            getattr(request, "group_instance_id", None), list(valid.items()))
        for t, parts in (results if not error else [(t, [(p[0], error) for p in ps]) for t, ps in valid.items()]):
            for partition, code in parts:
                errs[(t, partition)] = code
    return answer(lambda t, p: errs.get((t, p), errors.NONE))


# ---- DescribeTransactions (65), ListTransactions (66) ----------------------------------------------


async def handle_describe_transactions(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    header = context.header
    az = services.authorizer
    tc = services.transaction_coordinator
    out = []
    for tid in request.transactional_ids:
        if not az.authorize(context, header, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, tid):
            out.append({"error_code": TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "transactional_id": tid, "transaction_state": "",
                        "transaction_timeout": 0, "transaction_start_time": _timestamp(0), "producer_id": 0, "producer_epoch": 0, "topics": []})
            continue
        state = tc.describe(tid)
        state["transaction_start_time"] = _timestamp(state["transaction_start_time"])
        if az.enabled and state["topics"]:
            describable = az.filter(context, header, AclOperation.DESCRIBE, ResourceType.TOPIC, [t["topic"] for t in state["topics"]])
            state["topics"] = [t for t in state["topics"] if t["topic"] in describable]
        out.append(state)
    return {"throttle_time": 0, "transaction_states": out}


async def handle_list_transactions(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    header = context.header
    az = services.authorizer
    pattern = getattr(request, "transactional_id_pattern", None)  # v2 (KIP-1152): an RE2J regex, matches() the id
    if pattern:
        try:
            pattern = compile_re2j(pattern).pattern  # server/apis/re2j.py: RE2J's syntax as Python's
        except Re2jSyntaxError:
            return {"throttle_time": 0, "error_code": errors.INVALID_REGULAR_EXPRESSION, "unknown_state_filters": [],
                    "transaction_states": []}
    error, unknown, states = services.transaction_coordinator.list_transactions(
        list(request.state_filters), [int(p) for p in request.producer_id_filters],
        int(getattr(request, "duration_filter", -1)), pattern)
    if az.enabled:
        states = [s for s in states if az.authorize(context, header, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                                                      s["transactional_id"], log_denied=False)]
    return {"throttle_time": 0, "error_code": error, "unknown_state_filters": unknown, "transaction_states": states}
