"""Client quotas in the cluster metadata log (Kafka's ClientQuotaRecord).

``{"op": "client_quota", "entity": [[type, name], ...], "values": {key: value}}``: an entity's
quotas after a change (none: the entity's quotas are gone). Every node puts them in force at
once (``ClientQuotas.apply``): byte rates and request percentages throttle, and the ip entities'
``connection_creation_rate`` limits connections, on every node (``admin.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .metadata_log import Record

if TYPE_CHECKING:
    from ..quotas.store import Entity
    from ..services import BrokerServices


def changed(before: dict[Entity, dict[str, float]], after: dict[Entity, dict[str, float]]) -> list[Record]:
    """One record per entity whose quotas differ between ``before`` and ``after``."""
    out: list[Record] = []
    for entity in [*after, *(e for e in before if e not in after)]:
        values = after.get(entity, {})
        if values != before.get(entity, {}):
            out.append({"op": "client_quota", "entity": [list(c) for c in entity], "values": dict(values)})
    return out


def _apply(services: BrokerServices, record: Record) -> None:
    quotas = services.client_quotas
    entity: Entity = tuple((str(t), None if n is None else str(n)) for t, n in record["entity"])
    after = dict(quotas.store.quotas)  # a new mapping: the loop's readers keep the one they hold
    if record["values"]:
        after[entity] = {str(k): float(v) for k, v in record["values"].items()}
    else:
        after.pop(entity, None)
    quotas.apply(after)


APPLY = {"client_quota": _apply}
