"""server/features.py: FeatureControl's validation (Kafka 4.3.1's messages, recorded from its
answers), all-or-nothing updates, the epoch, the data-dir file and its copy, and Kafka's
HashMap order."""

from __future__ import annotations

from pathlib import Path

import pytest
from kafka_sidecar.server.features import (
    FEATURES_FILE,
    FeatureControl,
    FeatureFileError,
    feature_control,
    java_hash_order,
    share_groups_enabled,
)

PREFIX = "Invalid update version"


def test_defaults() -> None:
    c = FeatureControl()
    assert [c.finalized_level(n) for n in ("metadata.version", "share.version", "group.version", "transaction.version")] == [30, 1, 1, 0]
    assert c.finalized_level("no.such.feature") == 0
    assert c.epoch == 1


def test_kafka_hash_map_order() -> None:
    # The order Kafka 4.3.1's ApiVersions lists its supported features in.
    names = ["metadata.version", "kraft.version", "transaction.version", "group.version",
             "eligible.leader.replicas.version", "share.version", "streams.version"]
    assert java_hash_order(names) == ["group.version", "kraft.version", "metadata.version", "share.version",
                                      "streams.version", "transaction.version", "eligible.leader.replicas.version"]
    # Kafka reported zeta.version's error, not alpha.version's: its HashMap bucket comes first.
    assert java_hash_order(["alpha.version", "zeta.version"]) == ["zeta.version", "alpha.version"]


@pytest.mark.parametrize("update, message", [
    (("share.version", 2, 1), f"{PREFIX} 2 for feature share.version. Local controller 1 only supports versions 0-1"),
    (("share.version", 0, 1), f"{PREFIX} 0 for feature share.version. Can't downgrade the version of this feature without "
                              "setting the upgrade type to either safe or unsafe downgrade."),
    (("share.version", 0, 9), f"{PREFIX} 0 for feature share.version. The controller does not support the given upgrade type."),
    (("share.version", -1, 2), f"{PREFIX} -1 for feature share.version. A feature version cannot be less than 0."),
    (("foo.bar", 1, 1), f"{PREFIX} 1 for feature foo.bar. Local controller 1 does not support this feature."),
    (("foo.bar", 0, 2), f"{PREFIX} 0 for feature foo.bar. Feature foo.bar not found."),
    (("metadata.version", 31, 1), f"{PREFIX} 31 for feature metadata.version. Local controller 1 only supports versions 7-30"),
    (("metadata.version", 29, 3), "Unsupported metadata.version downgrade from 30 to 29. Unsafe metadata downgrade is not "
                                  "supported in this version."),
    (("kraft.version", 1, 1), f"{PREFIX} 1 for feature kraft.version. Local controller 1 does not support this feature."),
])
def test_refusals(update: tuple[str, int, int], message: str) -> None:
    c = FeatureControl()
    assert c.update([update], validate_only=False) == (message, [])
    assert c.epoch == 1


def test_update_all_or_nothing_and_epoch(tmp_path: Path) -> None:
    c = FeatureControl.load(tmp_path)
    reason, _ = c.update([("share.version", 0, 2), ("group.version", 0, 2)], validate_only=False)
    assert reason is not None and "group.version" in reason
    assert c.finalized_level("share.version") == 1 and not (tmp_path / FEATURES_FILE).exists()
    assert c.update([("share.version", 0, 2)], validate_only=True) == (None, ["share.version"])
    assert c.finalized_level("share.version") == 1
    # A repeated feature: its last update counts, reported once.
    assert c.update([("share.version", 1, 1), ("share.version", 0, 2)], validate_only=False) == (None, ["share.version"])
    assert c.finalized_level("share.version") == 0 and c.epoch == 2
    assert [f["name"] for f in c.finalized_features()] == ["group.version", "streams.version", "metadata.version"]
    again = FeatureControl.load(tmp_path)
    assert again.finalized_level("share.version") == 0 and again.epoch == 2


def test_damaged_file_uses_copy_then_refuses(tmp_path: Path) -> None:
    c = FeatureControl.load(tmp_path)
    c.update([("share.version", 0, 2)], validate_only=False)
    path = tmp_path / FEATURES_FILE
    path.write_text(path.read_text().replace('"epoch": 2', '"epoch": 7'))  # checksum no longer matches
    assert FeatureControl.load(tmp_path).finalized_level("share.version") == 0
    path.with_name(path.name + ".bak").write_text("{")
    with pytest.raises(FeatureFileError):
        FeatureControl.load(tmp_path)


def test_share_groups_enabled_follows_share_version(tmp_path: Path) -> None:
    class _Broker:  # what feature_control() reads of a broker: its data dir
        data_dir = tmp_path

    broker = _Broker()
    assert share_groups_enabled(feature_control(broker))
    feature_control(broker).update([("share.version", 0, 2)], validate_only=False)
    assert not share_groups_enabled(feature_control(broker))
    assert not share_groups_enabled(feature_control(type("_Restarted", (), {"data_dir": tmp_path})()))  # read back from the data dir
