"""DescribeAcls (API 29), CreateAcls (API 30), DeleteAcls (API 31): Kafka 4.1's AclApis.

Versions 1-3, as Kafka 4.1 (v0 is gone since 4.0). Checked in Kafka's order:

1. as the request is parsed (``DescribeAclsRequest``/``CreateAclsRequest``/``DeleteAclsRequest``
   constructors): a resource type, pattern type, operation or permission type of code 0
   (UNKNOWN) makes the request unparsable: the connection is closed;
2. DESCRIBE (DescribeAcls) or ALTER (Create/DeleteAcls) on the cluster, else every result is
   CLUSTER_AUTHORIZATION_FAILED;
3. no authorizer: SECURITY_DISABLED, "No Authorizer is configured on the broker" (DescribeAcls)
   or "No Authorizer is configured." (Create/DeleteAcls), as Kafka answers;
4. CreateAcls: an ACL that cannot be built (ANY operation, permission or resource type, ANY or
   MATCH pattern type) fails the whole request with UNKNOWN_SERVER_ERROR; then per ACL
   INVALID_REQUEST for a CLUSTER name other than ``kafka-cluster``, an empty name, and
   AclControlManager.validateNewAcl's checks (unknown codes, a principal without ``:``); an ACL
   that exists already is a success; DeleteAcls: per filter INVALID_REQUEST for an unknown
   pattern ("Unknown patternFilter.") or entry ("Unknown entryFilter.") part, else the ACLs it
   matches (every filter is matched against the ACLs as they were before the request) are removed
   and listed.

Changes are written to ``sidecar-acls.json`` (fsynced) before the answer; if the write fails the
change is undone and reported as UNKNOWN_SERVER_ERROR. DescribeAcls lists resources and their
entries in StandardAcl order (Kafka's order is a hash map's).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from kafka_sidecar.protocol import errors
from kafka_sidecar.protocol.framing import ProtocolViolation

from ..security.acls import (
    CLUSTER_NAME,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    operation,
    pattern_type,
    permission_type,
    resource_type,
    validate_new_acl,
)
from ..security.authorizer import (
    CLUSTER_AUTHORIZATION_FAILED,
    SECURITY_DISABLED,
    StandardAuthorizer,
)

if TYPE_CHECKING:

    from ..request_context import RequestContext
    from ..services import BrokerServices

log = logging.getLogger(__name__)

# ReplicationControlManager/AclControlManager's MAX_RECORDS_PER_USER_OP.
MAX_ACLS_PER_DELETE = 10_000


def _unparsable(name: str, codes: list[tuple[int, int, int, int]]) -> None:
    """Kafka's request constructors refuse UNKNOWN (code 0) elements: the request cannot be parsed."""
    for codes_ in codes:
        if 0 in codes_:

            raise ProtocolViolation(f"{name} contains UNKNOWN elements (a resource type, pattern type, operation or permission type of 0)")


def _cluster_denied_message(context: RequestContext, op: AclOperation) -> str:
    """AuthHelper.authorizeClusterOperation's message (Kafka prints its request object there)."""
    principal = context.principal
    listener = context.listener
    return (f"Request Request(connectionId={context.peer}, principal={principal}, "
            f"listenerName=ListenerName({listener})) needs {op.name} permission.")


def _filter(f: Any, name_field: str = "resource_name_filter") -> AclBindingFilter:
    return AclBindingFilter(
        resource_type(f.resource_type_filter), getattr(f, name_field), pattern_type(f.pattern_type_filter),
        f.principal_filter, f.host_filter, operation(f.operation), permission_type(f.permission_type),
    )


# ---- DescribeAcls (29) -------------------------------------------------------------------------


def _describe_error(code: int, message: str) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": code, "error_message": message, "resources": []}


def describe_resources(acls: list[AclBinding]) -> list[dict[str, Any]]:
    """DescribeAclsResponse.aclsResources: the ACLs grouped by resource pattern."""
    by_pattern: dict[tuple[int, str, int], list[dict[str, Any]]] = {}
    for a in acls:
        by_pattern.setdefault((a.resource_type, a.resource_name, a.pattern_type), []).append(
            {"principal": a.principal, "host": a.host, "operation": int(a.operation), "permission_type": int(a.permission_type)}
        )
    return [
        {"resource_type": int(rt), "resource_name": name, "pattern_type": int(pt), "acls": entries}
        for (rt, name, pt), entries in by_pattern.items()
    ]


async def handle_describe_acls(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    header = context.header
    _unparsable("DescribeAclsRequest", [(request.resource_type_filter, request.pattern_type_filter, request.operation, request.permission_type)])
    az = services.authorizer
    if not az.authorize_cluster(context, header, AclOperation.DESCRIBE):
        return _describe_error(CLUSTER_AUTHORIZATION_FAILED, _cluster_denied_message(context, AclOperation.DESCRIBE))
    if not isinstance(az, StandardAuthorizer):
        return _describe_error(SECURITY_DISABLED, "No Authorizer is configured on the broker")
    acls = az.acls(_filter(request))
    return {"throttle_time": 0, "error_code": errors.NONE, "error_message": "", "resources": describe_resources(acls)}


# ---- CreateAcls (30) ---------------------------------------------------------------------------


def _creation_binding(c: Any) -> AclBinding | None:
    """CreateAclsRequest.aclBinding, or None where Kafka's AclBinding constructor throws."""
    rt, pt = resource_type(c.resource_type), pattern_type(c.resource_pattern_type)
    op, perm = operation(c.operation), permission_type(c.permission_type)
    if op == AclOperation.ANY or perm == AclPermissionType.ANY or rt == ResourceType.ANY or pt in (PatternType.ANY, PatternType.MATCH):
        return None
    return AclBinding(rt, c.resource_name, pt, c.principal, c.host, op, perm)


async def handle_create_acls(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    header = context.header
    creations = list(request.creations)
    _unparsable("CreateAclsRequest", [(c.resource_type, c.resource_pattern_type, c.operation, c.permission_type) for c in creations])
    az = services.authorizer

    def every(code: int, message: str | None) -> dict[str, Any]:
        return {"throttle_time": 0, "results": [{"error_code": code, "error_message": message} for _ in creations]}

    if not az.authorize_cluster(context, header, AclOperation.ALTER):
        return every(CLUSTER_AUTHORIZATION_FAILED, _cluster_denied_message(context, AclOperation.ALTER))
    if not isinstance(az, StandardAuthorizer):
        return every(SECURITY_DISABLED, "No Authorizer is configured.")
    bindings = [_creation_binding(c) for c in creations]
    if any(b is None for b in bindings):
        # Kafka's AclBinding refuses ANY/MATCH values: an unexpected error for the whole request.
        log.info("CreateAcls from %s refused: an ACL has an ANY or MATCH value", context.peer if hasattr(context, "peer") else "?")
        return every(errors.UNKNOWN_SERVER_ERROR, None)
    results: list[dict[str, Any]] = []
    valid: list[AclBinding] = []
    for b in bindings:
        assert b is not None
        if b.resource_type == ResourceType.CLUSTER and b.resource_name != CLUSTER_NAME:
            problem: str | None = f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
        elif not b.resource_name:
            problem = "Invalid empty resource name"
        else:
            problem = validate_new_acl(b)
        if problem is not None:
            results.append({"error_code": errors.INVALID_REQUEST, "error_message": problem})
        else:
            results.append({"error_code": errors.NONE, "error_message": ""})
            valid.append(b)
    if valid and services.cluster is not None:  # serve --processes N: through the cluster's log
        from ..cluster import acl_records

        try:
            await services.cluster.admin.change(services, lambda: (acl_records.created(valid, az), None))
        except OSError as e:
            log.warning("CreateAcls failed: cannot write the cluster metadata log: %s", e)
            for r in results:
                if r["error_code"] == errors.NONE:
                    r.update(error_code=errors.UNKNOWN_SERVER_ERROR, error_message=None)
        return {"throttle_time": 0, "results": results}
    if valid:
        async with az.lock:
            added, removed = az.apply(add=valid)
            if added:
                try:
                    await services.run_blocking(az.save, az.snapshot())
                except OSError as e:
                    az.undo(added, removed)
                    log.warning("CreateAcls failed: cannot write %s: %s", az.file.path, e)
                    for r in results:
                        if r["error_code"] == errors.NONE:
                            r.update(error_code=errors.UNKNOWN_SERVER_ERROR, error_message=None)
                    return {"throttle_time": 0, "results": results}
                for a in added:
                    log.info("ACL created by %s: %s", context.principal, a)
    return {"throttle_time": 0, "results": results}


# ---- DeleteAcls (31) ---------------------------------------------------------------------------


def _matching_acl(a: AclBinding) -> dict[str, Any]:
    return {
        "error_code": errors.NONE, "error_message": None,
        "resource_type": int(a.resource_type), "resource_name": a.resource_name, "pattern_type": int(a.pattern_type),
        "principal": a.principal, "host": a.host, "operation": int(a.operation), "permission_type": int(a.permission_type),
    }


async def handle_delete_acls(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    header = context.header
    filters = list(request.filters)
    _unparsable("DeleteAclsRequest", [(f.resource_type_filter, f.pattern_type_filter, f.operation, f.permission_type) for f in filters])
    az = services.authorizer

    def every(code: int, message: str | None) -> dict[str, Any]:
        return {"throttle_time": 0, "filter_results": [{"error_code": code, "error_message": message, "matching_acls": []} for _ in filters]}

    if not az.authorize_cluster(context, header, AclOperation.ALTER):
        return every(CLUSTER_AUTHORIZATION_FAILED, _cluster_denied_message(context, AclOperation.ALTER))
    if not isinstance(az, StandardAuthorizer):
        return every(SECURITY_DISABLED, "No Authorizer is configured.")
    if services.cluster is not None:  # serve --processes N: matched and removed in the log's turn
        from ..cluster import acl_records

        def build() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
            results, doomed = _match_filters(az, filters)
            return acl_records.removed(doomed), results

        try:
            return {"throttle_time": 0, "filter_results": await services.cluster.admin.change(services, build)}
        except OSError as e:
            log.warning("DeleteAcls failed: cannot write the cluster metadata log: %s", e)
            return every(errors.UNKNOWN_SERVER_ERROR, None)
    async with az.lock:
        results, doomed = _match_filters(az, filters)
        if doomed:
            added, removed = az.apply(remove=doomed)
            try:
                await services.run_blocking(az.save, az.snapshot())
            except OSError as e:
                az.undo(added, removed)
                log.warning("DeleteAcls failed: cannot write %s: %s", az.file.path, e)
                return every(errors.UNKNOWN_SERVER_ERROR, None)
            for a in removed:
                log.info("ACL deleted by %s: %s", context.principal, a)
    return {"throttle_time": 0, "filter_results": results}


def _match_filters(az: StandardAuthorizer, filters: list[Any]) -> tuple[list[dict[str, Any]], dict[AclBinding, None]]:
    """DeleteAcls' per-filter results and the ACLs they remove (every filter matched against the
    ACLs as they are before the request)."""
    results: list[dict[str, Any]] = []
    doomed: dict[AclBinding, None] = {}
    for f in filters:
        flt = _filter(f)
        if flt.pattern_unknown():
            results.append({"error_code": errors.INVALID_REQUEST, "error_message": "Unknown patternFilter.", "matching_acls": []})
            continue
        if flt.entry_unknown():
            results.append({"error_code": errors.INVALID_REQUEST, "error_message": "Unknown entryFilter.", "matching_acls": []})
            continue
        matched = az.acls(flt)
        if len(doomed.keys() | set(matched)) > MAX_ACLS_PER_DELETE:
            results.append({"error_code": errors.INVALID_REQUEST, "matching_acls": [],
                            "error_message": f"Cannot remove more than {MAX_ACLS_PER_DELETE} acls in a single delete operation."})
            continue
        doomed.update(dict.fromkeys(matched))
        results.append({"error_code": errors.NONE, "error_message": None, "matching_acls": [_matching_acl(a) for a in matched]})
    return results, doomed
