"""Finalized feature levels in the cluster metadata log (Kafka's FeatureLevelRecord).

``{"op": "feature_level", "name", "level"}``: a feature finalized at a level by UpdateFeatures
through some node; every node's ApiVersions and feature gates (share groups, streams groups)
follow it (``admin.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .metadata_log import Record

if TYPE_CHECKING:
    from ..services import BrokerServices


def levels(updates: list[tuple[str, int, int]]) -> list[Record]:
    """The records of an UpdateFeatures that passed its checks (a repeated feature: its last level)."""
    wanted = {name: level for name, level, _upgrade in updates}
    return [{"op": "feature_level", "name": n, "level": lv} for n, lv in wanted.items()]


def _apply(services: BrokerServices, record: Record) -> None:
    services.features.adopt(str(record["name"]), int(record["level"]))


APPLY = {"feature_level": _apply}
