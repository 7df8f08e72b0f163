"""Feature flags (KIP-584, KRaft's FeatureControlManager): what this broker supports, what is
finalized, UpdateFeatures' validation, and the finalized levels kept in the data dir.

``FeatureControl.finalized_level(name)`` is how other code asks "is share.version >= 1".

The features are Kafka 4.3.1's, each with the version range whose behaviour kafka-sidecar has
(Kafka's own range where we have all of it). A feature we do not implement is reported, as
Kafka reports it, but with the range [0, 0]: finalized at 0 (so absent from ApiVersions'
finalized features, as Kafka leaves out level-0 features), and an upgrade is refused with
Kafka's own "does not support this feature" answer rather than finalizing a level whose
behaviour clients would then expect from us:

- metadata.version 7-30 (3.3-IV3 to 4.3-IV0), finalized 30, Kafka's range: from 4.3-IV0 Kafka
  itself refuses every downgrade (each crosses a metadata change) and has nothing above, so
  30 is the only level any cluster can be at, and we serve its API versions.
- share.version 0-1, finalized 1 (KIP-932, server/share). At 0 Kafka keeps the share APIs in
  ApiVersions and answers them UNSUPPORTED_VERSION (``share_groups_enabled``).
- group.version 1-1, finalized 1: KIP-848 groups are implemented (server/groups), but not
  level 0 (Kafka then answers ConsumerGroupHeartbeat UNSUPPORTED_VERSION; our handler does not
  ask), so a downgrade is refused instead of being finalized and ignored.
- transaction.version 0-0: only the classic transaction protocol (server/transactions writes
  Kafka's version-0 records; no KIP-890 part 2); finalizing 1 or 2 would switch Java producers
  to a protocol we do not run (Kafka 4.3 finalizes 2).
- kraft.version 0-0: one static voter, no dynamic quorum (AddRaftVoter & co. are not served).
- eligible.leader.replicas.version 0-0: no ELR (KIP-966) semantics; one broker has no ELR anyway.
- streams.version 0-1, finalized 1 (KIP-1071, server/groups/streams_*.py). At 0 the streams
  APIs stay listed and StreamsGroupHeartbeat is answered UNSUPPORTED_VERSION.

Kept in ``sidecar-features.json`` (+ ``.bak``), like the other broker metadata of the data dir:
the finalized levels that differ from the defaults, and the finalized-features epoch.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafka_sidecar.storage import checkpoint

if TYPE_CHECKING:
    from .broker import Broker

log = logging.getLogger(__name__)

FEATURES_FILE = "sidecar-features.json"
FEATURES_FILE_VERSION = 1
METADATA_VERSION = "metadata.version"
SHARE_VERSION = "share.version"
# Kafka's node id for the one controller (QuorumFeatures' "Local controller <id>").
CONTROLLER_ID = 1
# The first finalized-features epoch of a new data dir; bumped by every finalized change.
INITIAL_EPOCH = 1

# FeatureUpdate.UpgradeType codes (UpdateFeaturesRequest v1+).
UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3


@dataclass(frozen=True)
class FeatureSpec:
    name: str
    min_version: int  # the supported range we have the behaviour of
    max_version: int
    default_level: int  # finalized on a new data dir


# The order of Kafka 4.3.1's finalized features in ApiVersions (its finalized map's, not the
# supported features' HashMap order).
_FINALIZED_ORDER = ("group.version", "streams.version", "transaction.version", "eligible.leader.replicas.version",
                    "share.version", "kraft.version")

# Kafka 4.3.1's production features, in the order Kafka's Feature enum and MetadataVersion list them.
FEATURES: dict[str, FeatureSpec] = {f.name: f for f in [
    FeatureSpec(METADATA_VERSION, 7, 30, 30),
    FeatureSpec("kraft.version", 0, 0, 0),
    FeatureSpec("transaction.version", 0, 0, 0),
    FeatureSpec("group.version", 1, 1, 1),
    FeatureSpec("eligible.leader.replicas.version", 0, 0, 0),
    FeatureSpec(SHARE_VERSION, 0, 1, 1),
    FeatureSpec("streams.version", 0, 1, 1),
]}

def java_hash_order(names: list[str]) -> list[str]:
    """``names`` in the iteration order of a java.util.HashMap they were put into in this order:
    Kafka builds ApiVersions' feature lists and picks the error it reports from such maps."""
    capacity = 16
    while len(names) > capacity * 3 // 4:
        capacity *= 2

    def bucket(s: str) -> int:
        h, units = 0, s.encode("utf-16-be")  # String.hashCode: over UTF-16 code units
        for i in range(0, len(units), 2):
            h = (31 * h + int.from_bytes(units[i:i + 2])) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    return [n for _, _, n in sorted((bucket(n), i, n) for i, n in enumerate(names))]


class FeatureFileError(Exception):
    """The feature file and its copy are both damaged: the finalized levels are unknown."""


def _parse(text: str) -> tuple[dict[str, int], int]:
    data = json.loads(text)
    if not isinstance(data, dict) or data.get("version") != FEATURES_FILE_VERSION:
        raise ValueError("not a feature file of a known version")
    payload = {"finalized": data.get("finalized"), "epoch": data.get("epoch")}
    if data.get("crc32") != checkpoint.json_checksum(payload):
        raise ValueError("checksum mismatch")
    finalized, epoch = payload["finalized"], payload["epoch"]
    if not isinstance(finalized, dict) or not isinstance(epoch, int):
        raise ValueError("malformed")
    return {str(k): int(v) for k, v in finalized.items()}, epoch


class FeatureControl:
    """The finalized feature levels of this one-node cluster (Kafka's FeatureControlManager)."""

    def __init__(self, data_dir: Path | None = None) -> None:
        self.path = Path(data_dir) / FEATURES_FILE if data_dir is not None else None
        self._levels: dict[str, int] = {f.name: f.default_level for f in FEATURES.values()}
        self.epoch = INITIAL_EPOCH
        self._lock = threading.Lock()

    @classmethod
    def load(cls, data_dir: Path) -> FeatureControl:
        """The levels stored in the data dir (the defaults if there is no file); the copy is used
        if the file is damaged; FeatureFileError if both are (guessing could re-enable a feature)."""
        control = cls(data_dir)
        assert control.path is not None
        stored, problems = checkpoint.read_with_copy(control.path, _parse, "finalized features")
        if stored is None:
            if problems:
                raise FeatureFileError(f"cannot read the finalized features ({'; '.join(problems)}): fix {control.path} "
                                       f"or remove it and its copy (Kafka 4.3's defaults then apply)")
            return control
        levels, control.epoch = stored
        for name, level in levels.items():
            if name in control._levels:
                control._levels[name] = level
        return control

    def _save(self) -> None:
        if self.path is None:
            return
        changed = {n: lv for n, lv in sorted(self._levels.items()) if lv != FEATURES[n].default_level}
        payload = {"finalized": changed, "epoch": self.epoch}
        os.makedirs(self.path.parent, exist_ok=True)
        checkpoint.write_with_copy(self.path, {"version": FEATURES_FILE_VERSION, **payload,
                                               "crc32": checkpoint.json_checksum(payload)})

    def adopt(self, name: str, level: int) -> None:
        """A level finalized through the cluster's metadata log (``serve --processes N``): in
        memory only, the log keeps it."""
        with self._lock:
            if name in self._levels:
                self._levels[name] = level
                self.epoch += 1
                log.info("Finalized features updated (epoch %d): %s=%d", self.epoch, name, level)

    # ---- queries -----------------------------------------------------------------------------

    def finalized_level(self, name: str) -> int:
        """The finalized level of a feature (0 if it is not finalized or unknown, as in Kafka)."""
        return self._levels.get(name, 0)

    def supported_features(self) -> list[dict[str, Any]]:
        """ApiVersions' supported_features (v3+), in Kafka's order."""
        return [{"name": n, "min_version": FEATURES[n].min_version, "max_version": FEATURES[n].max_version}
                for n in java_hash_order(list(FEATURES))]

    def finalized_features(self) -> list[dict[str, Any]]:
        """ApiVersions' finalized_features: level-0 features left out, metadata.version last, the
        others in the order Kafka 4.3.1 answers them (tests/data/kafka-4.3.1/api-versions.json)."""
        others = [n for n in _FINALIZED_ORDER if self._levels[n] > 0]
        return [{"name": n, "min_version_level": self._levels[n], "max_version_level": self._levels[n]}
                for n in [*others, METADATA_VERSION]]

    # ---- UpdateFeatures ----------------------------------------------------------------------

    def _check(self, name: str, level: int, upgrade_type: int) -> str | None:
        """FeatureControlManager.updateFeature's checks, in its order: the reason ``name`` cannot
        go to ``level``, or None."""
        if upgrade_type not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
            return _invalid(name, level, "The controller does not support the given upgrade type.")
        current = self.finalized_level(name)
        if level < 0:
            return _invalid(name, level, "A feature version cannot be less than 0.")
        spec = FEATURES.get(name)
        lo, hi = (spec.min_version, spec.max_version) if spec is not None else (0, 0)
        if not lo <= level <= hi:
            where = f"Local controller {CONTROLLER_ID}"
            why = f"{where} does not support this feature." if hi == 0 else f"{where} only supports versions {lo}-{hi}"
            return _invalid(name, level, why)
        if spec is None:
            # Feature.validateVersion (the dependencies of a non-metadata.version feature).
            return _invalid(name, level, f"Feature {name} not found.")
        if level < current and upgrade_type == UPGRADE:
            return _invalid(name, level, "Can't downgrade the version of this feature without setting the "
                                         "upgrade type to either safe or unsafe downgrade.")
        if level > current and upgrade_type != UPGRADE:
            return _invalid(name, level, "Can't downgrade to a newer version.")
        if name == METADATA_VERSION and level < current:
            # Every downgrade from 4.3-IV0 crosses a metadata change (MetadataVersion.checkIfMetadataChanged).
            why = ("Unsafe metadata downgrade is not supported in this version." if upgrade_type == UNSAFE_DOWNGRADE
                   else "Refusing to perform the requested downgrade because it might delete metadata information.")
            return f"Unsupported metadata.version downgrade from {current} to {level}. {why}"
        return None

    def update(self, updates: list[tuple[str, int, int]], validate_only: bool) -> tuple[str | None, list[str]]:
        """Apply (feature, level, upgrade type) updates all or none, as the controller does: the
        error of the first failing feature (Kafka's HashMap order) or None, and the features
        updated in request order (a repeated feature: its last update, at its first place).
        The change is written to the data dir before it is visible (OSError: nothing changed)."""
        wanted: dict[str, tuple[int, int]] = {}
        for name, level, upgrade_type in updates:
            wanted[name] = (level, upgrade_type)
        with self._lock:
            for name in java_hash_order(list(wanted)):
                reason = self._check(name, *wanted[name])
                if reason is not None:
                    return reason, []
            if validate_only or not wanted:
                return None, list(wanted)
            before, epoch = dict(self._levels), self.epoch
            for name, (level, _) in wanted.items():
                self._levels[name] = level
            self.epoch += 1
            try:
                self._save()
            except OSError:
                self._levels, self.epoch = before, epoch
                raise
            log.info("Finalized features updated (epoch %d): %s", self.epoch,
                     ", ".join(f"{n}={lv}" for n, (lv, _) in wanted.items()))
            return None, list(wanted)


def _invalid(name: str, level: int, message: str) -> str:
    return f"Invalid update version {level} for feature {name}. {message}"


_CONTROLS: weakref.WeakKeyDictionary[Any, FeatureControl] = weakref.WeakKeyDictionary()


def feature_control(broker: Broker) -> FeatureControl:
    """The broker's FeatureControl, loaded from its data dir on first use (one small file)."""
    control = _CONTROLS.get(broker)
    if control is None:
        control = _CONTROLS[broker] = FeatureControl.load(broker.data_dir)
    return control


def share_groups_enabled(control: FeatureControl) -> bool:
    """Kafka's isShareGroupProtocolEnabled: share.version >= 1. While it is 0, Kafka 4.3 keeps the
    share APIs in ApiVersions and answers each of them UNSUPPORTED_VERSION (the share handlers'
    gate: ``if not share_groups_enabled(services.features): return <that answer>``)."""
    return control.finalized_level(SHARE_VERSION) >= 1
