"""UpdateFeatures (API 57, v0-2): Kafka's controller answer on one broker (server/features.py).

All or nothing, as Kafka's QuorumController: one feature that cannot take its level fails the
whole request with INVALID_UPDATE_VERSION and "The update failed for all features since the
following feature had an error: ..."; on success v0-1 list each feature with NONE (v2 dropped
the per-feature results). v0 has no upgrade type: Kafka reads it as an upgrade (the v0
``allow_downgrade`` flag is not looked at). The change is on disk before the answer.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from kafka_sidecar.protocol import errors

from ..features import UPGRADE
from ..security.acls import AclOperation
from ..security.authorizer import CLUSTER_AUTHORIZATION_FAILED

if TYPE_CHECKING:
    from ..request_context import RequestContext
    from ..services import BrokerServices

log = logging.getLogger(__name__)

INVALID_UPDATE_VERSION = 95
FAILED_FOR_ALL = "The update failed for all features since the following feature had an error: "


def _answer(error_code: int, message: str | None, results: list[dict[str, Any]]) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": error_code, "error_message": message, "results": results}


async def handle_update_features(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    header = context.header
    if not services.authorizer.authorize_cluster(context, header, AclOperation.ALTER):
        return _answer(CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.", [])
    updates = [(u.feature, u.max_version_level, getattr(u, "upgrade_type", UPGRADE)) for u in request.feature_updates]
    control = services.features
    if services.cluster is not None and not getattr(request, "validate_only", False):  # serve --processes N
        from ..cluster import feature_records

        def build() -> tuple[list[dict[str, Any]], tuple[str | None, list[str]]]:
            reason, updated = control.update(updates, True)
            return ([] if reason is not None else feature_records.levels(updates)), (reason, updated)

        try:
            reason, updated = await services.cluster.admin.change(services, build)
        except OSError as e:
            log.error("UpdateFeatures: cannot write the cluster metadata log: %s", e)
            return _answer(errors.UNKNOWN_SERVER_ERROR, f"Cannot store the finalized features: {e}", [])
        if reason is not None:
            return _answer(INVALID_UPDATE_VERSION, FAILED_FOR_ALL + reason, [])
        return _answer(errors.NONE, None, [{"feature": n, "error_code": errors.NONE, "error_message": "NONE"} for n in updated])
    try:
        reason, updated = await services.run_blocking(control.update, updates, getattr(request, "validate_only", False))
    except OSError as e:
        log.error("UpdateFeatures: cannot write %s: %s", control.path, e)
        return _answer(errors.UNKNOWN_SERVER_ERROR, f"Cannot store the finalized features: {e}", [])
    if reason is not None:
        return _answer(INVALID_UPDATE_VERSION, FAILED_FOR_ALL + reason, [])
    return _answer(errors.NONE, None, [{"feature": n, "error_code": errors.NONE, "error_message": "NONE"} for n in updated])
