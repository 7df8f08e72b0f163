"""GroupConfigManager (server/group_configs.py): Kafka 4.3.1's GroupConfig validation, the
effective values against the broker's bounds, and persistence in the data directory."""

from __future__ import annotations

from pathlib import Path

import pytest
from kafka_sidecar.server.group_configs import (
    GROUP_CONFIGS_FILE,
    GroupConfigError,
    GroupConfigManager,
    parse_duration_ms,
    parse_share_auto_offset_reset,
)


def _manager(tmp_path: Path, broker: dict[str, object] | None = None, static: tuple[str, ...] = ()) -> GroupConfigManager:
    values = dict(broker or {})
    return GroupConfigManager(tmp_path, values.get, static)


@pytest.mark.parametrize(("text", "ms"), [
    ("PT1H", 3_600_000), ("pt1h", 3_600_000), ("P1DT2H3M4.5S", 93_784_500), ("PT0S", 0), ("P2D", 172_800_000),
    ("PT-1H", -3_600_000), ("-PT1M", -60_000), ("PT0.001S", 1), ("P", None), ("PT", None), ("P1DT", None), ("1H", None),
])
def test_duration_as_java_parses_it(text: str, ms: int | None) -> None:
    assert parse_duration_ms(text) == ms


def test_share_auto_offset_reset_values() -> None:
    assert parse_share_auto_offset_reset("earliest") == ("earliest", 0)
    assert parse_share_auto_offset_reset("by_duration:PT10M") == ("by_duration", 600_000)
    for bad in ("EARLIEST", "by_duration:", "by_duration:-PT1H", "BY_DURATION:PT1H", ""):
        with pytest.raises(GroupConfigError, match="The value must be either 'earliest', 'latest'"):
            parse_share_auto_offset_reset(bad)


def test_validation_order_and_messages(tmp_path: Path) -> None:
    mgr = _manager(tmp_path)
    cases = {
        (("share.delivery.count.limit", "1"), ("bogus", "1")): "Unknown group config name: bogus",
        (("share.delivery.count.limit", "1"),): "Invalid value 1 for configuration share.delivery.count.limit: Value must be at least 2",
        (("share.delivery.count.limit", "11"),): "share.delivery.count.limit must be less than or equal to group.share.max.delivery.count.limit",
        (("share.heartbeat.interval.ms", "abc"),): "Invalid value abc for configuration share.heartbeat.interval.ms: Not a number of type INT",
        (("share.isolation.level", "READ_COMMITTED"),):
            "Invalid value READ_COMMITTED for configuration share.isolation.level: String must be one of: read_committed, read_uncommitted",
        (("share.renew.acknowledge.enable", "yes"),):
            "Invalid value yes for configuration share.renew.acknowledge.enable: Expected value to be either true or false",
        (("share.session.timeout.ms", "5000"),): "share.session.timeout.ms must be greater than or equal to group.share.min.session.timeout.ms",
        (("streams.num.standby.replicas", "3"),): "streams.num.standby.replicas must be less than or equal to group.streams.max.standby.replicas",
    }
    for props, message in cases.items():
        with pytest.raises(GroupConfigError) as e:
            mgr.validate(dict(props))
        assert str(e.value) == message
    assert mgr.validate({"consumer.session.timeout.ms": " 50000 ", "share.renew.acknowledge.enable": "TRUE"}) == \
        {"consumer.session.timeout.ms": 50000, "share.renew.acknowledge.enable": True}


def test_session_must_exceed_heartbeat_with_the_broker_bounds_moved(tmp_path: Path) -> None:
    mgr = _manager(tmp_path, {"group.share.min.session.timeout.ms": 1000, "group.share.max.heartbeat.interval.ms": 60000})
    with pytest.raises(GroupConfigError, match="^share.session.timeout.ms must be greater than share.heartbeat.interval.ms$"):
        mgr.validate({"share.session.timeout.ms": "6000", "share.heartbeat.interval.ms": "6000"})


def test_effective_values_defaults_clamping_and_persistence(tmp_path: Path) -> None:
    broker: dict[str, object] = {"group.share.record.lock.duration.ms": 20000}
    mgr = GroupConfigManager(tmp_path, broker.get)
    assert mgr.group_config("g", "share.record.lock.duration.ms") == 20000  # the broker's value
    assert mgr.group_config("g", "share.auto.offset.reset") == "latest"
    mgr.set_group_configs("g", {"share.record.lock.duration.ms": "50000", "share.auto.offset.reset": "by_duration:PT1M"})
    assert mgr.share_auto_offset_reset("g") == ("by_duration", 60_000)
    assert mgr.group_config("g", "share.record.lock.duration.ms") == 50000
    # The broker's maximum lowered after the group config was set: the effective value is capped.
    broker["group.share.max.record.lock.duration.ms"] = 40000
    assert mgr.group_config("g", "share.record.lock.duration.ms") == 40000
    again = GroupConfigManager(tmp_path, broker.get)
    assert again.group_configs("g") == {"share.record.lock.duration.ms": "50000", "share.auto.offset.reset": "by_duration:PT1M"}
    again.set_group_configs("g", {})
    assert GroupConfigManager(tmp_path, broker.get).group_configs("g") == {}
    assert (tmp_path / GROUP_CONFIGS_FILE).exists()


def test_describe_sources_and_synonyms(tmp_path: Path) -> None:
    mgr = _manager(tmp_path, {"group.share.record.lock.duration.ms": 15000}, static=("group.share.record.lock.duration.ms",))
    mgr.set_group_configs("g", {"share.auto.offset.reset": "earliest"})
    rows = {r["name"]: r for r in mgr.describe("g", None, True, False)}
    assert len(rows) == 17
    assert rows["share.auto.offset.reset"]["config_source"] == 8
    assert rows["share.auto.offset.reset"]["synonyms"] == [
        {"name": "share.auto.offset.reset", "value": "earliest", "source": 8},
        {"name": "share.auto.offset.reset", "value": "latest", "source": 5}]
    assert rows["share.record.lock.duration.ms"]["value"] == "15000"
    assert rows["share.record.lock.duration.ms"]["synonyms"] == [
        {"name": "group.share.record.lock.duration.ms", "value": "15000", "source": 4}]
    only = mgr.describe("g", ["share.record.lock.duration.ms", "share.auto.offset.reset", "nope"], False, True)
    assert [r["name"] for r in only] == ["share.auto.offset.reset", "share.record.lock.duration.ms"]
    assert only[0]["synonyms"] == [] and only[0]["documentation"].startswith("The strategy to initialize")
