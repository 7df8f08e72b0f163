"""DescribeUserScramCredentials (API 50) and AlterUserScramCredentials (API 51).

What ``kafka-configs.sh --entity-type users --alter --add-config 'SCRAM-SHA-256=[...]'`` and
``--describe`` use. Kafka's rules (ScramControlManager, ScramImage.describe): the client sends
the salted password, the broker keeps salt, iterations, StoredKey and ServerKey (never the
password); one user may appear once per request (DUPLICATE_RESOURCE), iterations must be within
4096..16384 (UNACCEPTABLE_CREDENTIAL), an unknown mechanism is UNSUPPORTED_SASL_MECHANISM,
deleting a credential that does not exist RESOURCE_NOT_FOUND. Describing needs DESCRIBE on the
cluster, altering ALTER (when an authorizer is configured). Credentials are written to the data
dir before the answer (``server/security/credentials.py``), so they survive a restart.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from typing import TYPE_CHECKING, Any

from kafka_sidecar.protocol.errors import (  # noqa: F401 (some re-exported)
    CLUSTER_AUTHORIZATION_FAILED,
    DUPLICATE_RESOURCE,
    RESOURCE_NOT_FOUND,
    UNACCEPTABLE_CREDENTIAL,
    UNKNOWN_SERVER_ERROR,
    UNSUPPORTED_SASL_MECHANISM,
)
from kafka_sidecar.protocol.framing import RequestHeader

from ..security.credentials import (
    SCRAM_BY_TYPE,
    SCRAM_MAX_ITERATIONS,
    SCRAM_MIN_ITERATIONS,
    ScramCredentialStore,
    credential_from_salted,
)

if TYPE_CHECKING:
    from ..cluster.admin import ClusterAdmin
    from ..request_context import RequestContext
    from ..services import BrokerServices

log = logging.getLogger(__name__)

_CLUSTER_DENIED = "Cluster authorization failed."
_DUPLICATE = "A user credential cannot be altered twice in the same request"

_locks: dict[int, asyncio.Lock] = {}


def _authorized(services: BrokerServices, context: RequestContext, header: RequestHeader, operation: str) -> bool:
    az = services.authorizer
    if az is None:
        return True
    from ..security.acls import AclOperation

    return bool(az.authorize_cluster(context, header, getattr(AclOperation, operation)))


async def handle_describe_user_scram_credentials(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    header = context.header
    users = [u.name for u in (request.users or ())]
    if not _authorized(services, context, header, "DESCRIBE"):
        return {"throttle_time": 0, "error_code": CLUSTER_AUTHORIZATION_FAILED, "error_message": _CLUSTER_DENIED,
                "results": [{"user": "", "error_code": CLUSTER_AUTHORIZATION_FAILED, "error_message": _CLUSTER_DENIED,
                             "credential_infos": []} for _ in users]}
    store = services.scram_store
    if not users:
        wanted: dict[str, bool] = {u: False for u in sorted(store.credentials)}
    else:
        wanted = {}
        for u in users:
            wanted[u] = u in wanted
    results = []
    for user, duplicate in wanted.items():
        if duplicate:
            results.append({"user": user, "error_code": DUPLICATE_RESOURCE, "credential_infos": [],
                            "error_message": f"Cannot describe SCRAM credentials for the same user twice in a single request: {user}"})
            continue
        mechs = store.credentials.get(user, {})
        infos = [{"mechanism": t, "iterations": mechs[name].iterations}
                 for t, name in sorted(SCRAM_BY_TYPE.items()) if name in mechs]
        if infos:
            results.append({"user": user, "error_code": 0, "error_message": None, "credential_infos": infos})
        else:
            results.append({"user": user, "error_code": RESOURCE_NOT_FOUND, "credential_infos": [],
                            "error_message": f"Attempt to describe a user credential that does not exist: {user}"})
    return {"throttle_time": 0, "error_code": 0, "error_message": None, "results": results}


def _check_name_and_mechanism(name: str, mechanism: int) -> tuple[int, str] | None:
    if not name:
        return UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if mechanism not in SCRAM_BY_TYPE:
        return UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    return None


def _plan(store: ScramCredentialStore, request: Any) -> tuple[dict[str, Any], dict[str, Any], dict[str, tuple[int, str]]]:
    """AlterUserScramCredentials' checks against the credentials now: (deletions, upserts, failed) by user."""
    deletions: dict[str, Any] = {}
    upserts: dict[str, Any] = {}
    failed: dict[str, tuple[int, str]] = {}
    for d in request.deletions:
        if d.name in failed:
            continue
        if deletions.pop(d.name, None) is not None:
            failed[d.name] = (DUPLICATE_RESOURCE, _DUPLICATE)
            continue
        error = _check_name_and_mechanism(d.name, d.mechanism)
        if error is None and store.get(d.name, SCRAM_BY_TYPE[d.mechanism]) is None:
            error = (RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")
        if error is not None:
            failed[d.name] = error
        else:
            deletions[d.name] = d
    for u in request.upsertions:
        if u.name in failed:
            continue
        if deletions.pop(u.name, None) is not None or upserts.pop(u.name, None) is not None:
            failed[u.name] = (DUPLICATE_RESOURCE, _DUPLICATE)
            continue
        error = _check_name_and_mechanism(u.name, u.mechanism)
        if error is None and u.iterations < SCRAM_MIN_ITERATIONS:
            error = (UNACCEPTABLE_CREDENTIAL, "Too few iterations")
        elif error is None and u.iterations > SCRAM_MAX_ITERATIONS:
            error = (UNACCEPTABLE_CREDENTIAL, "Too many iterations")
        if error is not None:
            failed[u.name] = error
        else:
            upserts[u.name] = u
    return deletions, upserts, failed


async def handle_alter_user_scram_credentials(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    header = context.header
    if not _authorized(services, context, header, "ALTER"):
        users = sorted({d.name for d in request.deletions} | {u.name for u in request.upsertions})
        return {"throttle_time": 0, "results": [
            {"user": u, "error_code": CLUSTER_AUTHORIZATION_FAILED, "error_message": _CLUSTER_DENIED} for u in users]}
    store = services.scram_store
    if services.cluster is not None:  # serve --processes N: checked and recorded in the cluster log's turn
        return await _alter_in_cluster(services, services.cluster.admin, request)
    lock = _locks.setdefault(id(store), asyncio.Lock())
    async with lock:
        deletions, upserts, failed = _plan(store, request)
        if deletions or upserts:
            before = copy.deepcopy(store.credentials)
            for d in deletions.values():
                store.delete(d.name, SCRAM_BY_TYPE[d.mechanism])
            for u in upserts.values():
                mech = SCRAM_BY_TYPE[u.mechanism]
                store.upsert(u.name, mech, credential_from_salted(mech, bytes(u.salted_password), bytes(u.salt), u.iterations))
            try:
                await services.run_blocking(store.write, store.snapshot())
            except OSError as e:
                store.credentials = before
                log.error("cannot write SCRAM credentials %s: %s", store.path, e)
                message = f"cannot write the SCRAM credentials: {e.strerror or e}"
                for name in [*deletions, *upserts]:
                    failed[name] = (UNKNOWN_SERVER_ERROR, message)
                deletions, upserts = {}, {}
            _log_changes(deletions, upserts)
    return _answer(deletions, upserts, failed)


def _log_changes(deletions: dict[str, Any], upserts: dict[str, Any]) -> None:
    for d in deletions.values():
        log.info("deleted %s credential of user %r", SCRAM_BY_TYPE[d.mechanism], d.name)
    for u in upserts.values():
        log.info("set %s credential of user %r (%d iterations)", SCRAM_BY_TYPE[u.mechanism], u.name, u.iterations)


def _answer(deletions: dict[str, Any], upserts: dict[str, Any], failed: dict[str, tuple[int, str]]) -> dict[str, Any]:
    """AlterUserScramCredentials' answer: the users changed, then those refused, with their error."""
    results = [{"user": n, "error_code": 0, "error_message": None} for n in [*deletions, *upserts]]
    results += [{"user": n, "error_code": code, "error_message": msg} for n, (code, msg) in failed.items()]
    return {"throttle_time": 0, "results": results}


async def _alter_in_cluster(services: BrokerServices, admin: ClusterAdmin, request: Any) -> dict[str, Any]:
    from ..cluster import scram_records

    store = services.scram_store

    def build() -> tuple[list[dict[str, Any]], tuple[dict[str, Any], dict[str, Any], dict[str, tuple[int, str]]]]:
        deletions, upserts, failed = _plan(store, request)
        records = [scram_records.deleted(d.name, SCRAM_BY_TYPE[d.mechanism]) for d in deletions.values()]
        for u in upserts.values():
            mech = SCRAM_BY_TYPE[u.mechanism]
            records.append(scram_records.upserted(u.name, mech, credential_from_salted(mech, bytes(u.salted_password), bytes(u.salt), u.iterations)))
        return records, (deletions, upserts, failed)

    try:
        deletions, upserts, failed = await admin.change(services, build)
    except OSError as e:
        log.error("cannot write SCRAM credentials to the cluster metadata log: %s", e)
        message = f"cannot write the SCRAM credentials: {e.strerror or e}"
        users = dict.fromkeys([*(d.name for d in request.deletions), *(u.name for u in request.upsertions)])
        return {"throttle_time": 0, "results": [{"user": n, "error_code": UNKNOWN_SERVER_ERROR, "error_message": message} for n in users]}
    _log_changes(deletions, upserts)
    return _answer(deletions, upserts, failed)
