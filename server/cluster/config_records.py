"""Dynamic broker configs in the cluster metadata log (Kafka's ConfigRecord on BROKER resources).

``{"op": "broker_config", "scope", "configs": {name: value}}``: the whole dynamic config of a
scope after AlterConfigs / IncrementalAlterConfigs: ``""`` the cluster-wide default, which every
node applies, or ``"<k>"`` node k's own, which only node k applies (Kafka answers a BROKER
resource naming another node INVALID_REQUEST, so only node k changes it) (``admin.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .metadata_log import Record

if TYPE_CHECKING:
    from ..services import BrokerServices


def scope_set(scope: str, configs: dict[str, str]) -> Record:
    return {"op": "broker_config", "scope": scope, "configs": dict(configs)}


def _apply(services: BrokerServices, record: Record) -> None:
    scope = str(record["scope"])
    if scope not in ("", str(services.node_id)):
        return  # another node's own configs
    services.dynamic_config.adopt(scope, {str(k): str(v) for k, v in record["configs"].items()}, services.schedule_blocking)


APPLY = {"broker_config": _apply}
