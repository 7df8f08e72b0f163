"""DescribeClientQuotas (API 48) and AlterClientQuotas (API 49), as a one-node KRaft Kafka answers.

What ``kafka-configs.sh --entity-type users|clients|ips --alter --add-config 'producer_byte_rate=...'``
and ``--describe`` use. Describing needs DESCRIBE_CONFIGS on the cluster, altering ALTER_CONFIGS
(when an authorizer is configured). Validation and filters are Kafka's (server/quotas/store.py);
an alteration is written to the data dir before the answer and then enforced at once
(server/quotas/manager.py), so it survives a restart.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from typing import TYPE_CHECKING, Any

from kafka_sidecar.protocol.errors import (  # noqa: F401 (some re-exported)
    CLUSTER_AUTHORIZATION_FAILED,
    INVALID_REQUEST,
    UNKNOWN_SERVER_ERROR,
)
from kafka_sidecar.protocol.framing import RequestHeader

from ..quotas.connections import is_ip
from ..quotas.store import Alteration, Entity, QuotaError, java_order

if TYPE_CHECKING:
    from ..request_context import RequestContext
    from ..services import BrokerServices

log = logging.getLogger(__name__)

_CLUSTER_DENIED = "Cluster authorization failed."
_locks: dict[int, asyncio.Lock] = {}


def _authorized(services: BrokerServices, context: RequestContext, header: RequestHeader, operation: str) -> bool:
    az = services.authorizer
    if az is None:
        return True
    from ..security.acls import AclOperation

    return bool(az.authorize_cluster(context, header, getattr(AclOperation, operation)))


def _entity_data(entity: Entity, ordered: bool = False) -> list[dict[str, Any]]:
    """The components in ``entity``'s order if ``ordered``, else a default HashMap's."""
    d = dict(entity)
    return [{"entity_type": t, "entity_name": d[t]} for t in (list(d) if ordered else java_order(list(d)))]


async def handle_describe_client_quotas(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    header = context.header
    if not _authorized(services, context, header, "DESCRIBE_CONFIGS"):
        return _error(CLUSTER_AUTHORIZATION_FAILED, _CLUSTER_DENIED)
    components = [(c.entity_type, c.match_type, c.match) for c in request.components]
    try:
        found = services.client_quotas.store.describe(components, bool(getattr(request, "strict", False)))
    except QuotaError as e:
        return _error(e.code, e.message)
    entries = [{"entity": _entity_data(entity),
                "values": [{"key": k, "value": v} for k, v in values.items()]}
               for entity, values in found]
    return {"throttle_time": 0, "error_code": 0, "error_message": None, "entries": entries}


def _error(code: int, message: str) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": code, "error_message": message, "entries": None}


def _resolvable(host: str) -> bool:
    try:
        socket.getaddrinfo(host, None)
        return True
    except (OSError, UnicodeError):
        return False


async def handle_alter_client_quotas(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    header = context.header
    alterations = [
        Alteration([(e.entity_type, e.entity_name) for e in entry.entity],
                   [(op.key, None if op.remove else float(op.value)) for op in entry.ops])
        for entry in request.entries
    ]
    if not _authorized(services, context, header, "ALTER_CONFIGS"):
        return {"throttle_time": 0, "entries": [
            {"error_code": CLUSTER_AUTHORIZATION_FAILED, "error_message": _CLUSTER_DENIED,
             "entity": _entity_data(tuple(sorted(dict(a.components).items())))} for a in alterations]}
    # Host names of ip entities are resolved as InetAddress.getByName does, off the loop.
    hosts = {n for a in alterations for t, n in a.components if t == "ip" and n}
    resolved = {h: await services.run_blocking(_resolvable, h) for h in hosts if not is_ip(h)}
    quotas = services.client_quotas
    if services.cluster is not None and not request.validate_only:  # serve --processes N: through the cluster's log
        from ..cluster import quota_records

        def build() -> tuple[list[dict[str, Any]], list[tuple[Entity, QuotaError | None]]]:
            results, after = quotas.store.alter(alterations, False, lambda h: resolved.get(h, True))
            return quota_records.changed(quotas.store.quotas, after), results

        try:
            results = await services.cluster.admin.change(services, build)
        except OSError as e:
            log.error("cannot write client quotas to the cluster metadata log: %s", e)
            message = f"cannot write the client quotas: {e.strerror or e}"
            results, _ = quotas.store.alter(alterations, True, lambda h: resolved.get(h, True))
            results = [(entity, error or QuotaError(message, UNKNOWN_SERVER_ERROR)) for entity, error in results]
        return _alter_answer(results)
    lock = _locks.setdefault(id(services), asyncio.Lock())
    async with lock:
        results, after = quotas.store.alter(alterations, bool(request.validate_only), lambda h: resolved.get(h, True))
        if not request.validate_only and after != quotas.store.quotas:
            try:
                await services.run_blocking(quotas.store.write, quotas.store.snapshot(after))
            except OSError as e:
                log.error("cannot write client quotas %s: %s", quotas.store.path, e)
                message = f"cannot write the client quotas: {e.strerror or e}"
                results = [(entity, error or QuotaError(message, UNKNOWN_SERVER_ERROR)) for entity, error in results]
            else:
                quotas.apply(after)
                log.info("client quotas altered: %s", {repr(dict(e)): v for e, v in after.items()})
    return _alter_answer(results)


def _alter_answer(results: list[tuple[Entity, QuotaError | None]]) -> dict[str, Any]:
    return {"throttle_time": 0, "entries": [
        {"error_code": 0 if error is None else error.code, "error_message": None if error is None else error.message,
         "entity": _entity_data(entity, ordered=True)} for entity, error in results]}
