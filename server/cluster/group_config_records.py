"""Group configs in the cluster metadata log (Kafka's ConfigRecord on GROUP resources).

``{"op": "group_config", "group", "configs": {name: value}}``: a group's whole dynamic config
after AlterConfigs / IncrementalAlterConfigs (``kafka-configs.sh --entity-type groups``) through
any node; every node applies it, so the group's coordinator, wherever it is, uses it (``admin.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .metadata_log import Record

if TYPE_CHECKING:
    from ..services import BrokerServices


def group_set(group_id: str, configs: dict[str, str]) -> Record:
    return {"op": "group_config", "group": group_id, "configs": dict(configs)}


def _apply(services: BrokerServices, record: Record) -> None:
    services.group_configs.adopt(str(record["group"]), {str(k): str(v) for k, v in record["configs"].items()})


APPLY = {"group_config": _apply}
