"""Feature flags and delegation tokens side by side with Apache Kafka 4.3.1: kafka-features.sh
(describe, upgrade, downgrade and disable, dry runs and a real share.version downgrade put back
at once), raw UpdateFeatures v0-2 answers, ApiVersions' features, and kafka-delegation-tokens.sh
with the raw token APIs (tokens are not enabled on either broker).

Compared are the features whose behaviour we claim to be Kafka's (metadata.version,
share.version) and the names of all seven; the ranges of group.version, kraft.version,
transaction.version, eligible.leader.replicas.version and streams.version are ours on purpose
(the levels we implement: server/features.py) and are asserted on our side only by
tests/integration/test_features.py. The finalized-features epoch is Kafka's metadata offset,
so only its growth is compared.
"""

from __future__ import annotations

import os
import re
import struct
import subprocess
import tempfile
from typing import Any

import pytest

from bench.reference import find_java, find_kafka_home
from tests.conformance.harness import Ctx
from tests.conformance.wire import Wire

pytestmark = pytest.mark.skipif(find_java() is None or find_kafka_home() is None,
                                reason="needs Java and Kafka 4.3.1's kafka-features.sh (KAFKA_HOME or make reference)")

AGREED = ("metadata.version", "share.version")
SHARE_APIS = (76, 77, 78, 79, 90, 91, 92)


def _tool(ctx: Ctx, name: str, *args: str) -> list[str]:
    home = find_kafka_home()
    assert home is not None
    env = {**os.environ, "KAFKA_HEAP_OPTS": "-Xmx256m"}
    run = subprocess.run([str(home / "bin" / name), "--bootstrap-server", ctx.bootstrap, *args],
                         capture_output=True, text=True, env=env, timeout=120)
    lines = (run.stdout + "\n" + run.stderr).splitlines()
    # Stack frames ("\tat org.apache...") are the JVM's, not the answer.
    return [re.sub(r"Epoch: \d+", "Epoch: <epoch>", " ".join(line.split()))
            for line in lines if line.strip() and not line.lstrip().startswith("at ")]


def _features(ctx: Ctx, *args: str) -> list[str]:
    return _tool(ctx, "kafka-features.sh", *args)


def _api_versions(w: Wire, version: int = 4) -> dict[str, Any]:
    return w.call(18, version, {"client_software_name": "conformance", "client_software_version": "1"})


def _update(w: Wire, version: int, updates: list[tuple[str, int, int]], validate_only: bool = True) -> dict[str, Any]:
    key = "allow_downgrade" if version == 0 else "upgrade_type"
    items = [{"feature": n, "max_version_level": lv, key: (t != 1) if version == 0 else t} for n, lv, t in updates]
    return w.call(57, version, {"timeout_ms": 30000, "feature_updates": items, "validate_only": validate_only})


def scenario_features(ctx: Ctx) -> dict[str, Any]:
    w = ctx.wire()
    obs: dict[str, Any] = {}
    described = _features(ctx, "describe")
    obs["describe_names"] = sorted(line.split()[1] for line in described)
    obs["describe"] = sorted(line for line in described if line.split()[1] in AGREED)
    obs["upgrade_share_1"] = _features(ctx, "upgrade", "--feature", "share.version=1")
    obs["downgrade_share_0_dry_run"] = _features(ctx, "downgrade", "--feature", "share.version=0", "--dry-run")
    obs["disable_share_dry_run"] = _features(ctx, "disable", "--feature", "share.version", "--dry-run")
    obs["upgrade_share_2"] = _features(ctx, "upgrade", "--feature", "share.version=2")
    obs["downgrade_metadata_29_dry_run"] = _features(ctx, "downgrade", "--feature", "metadata.version=29", "--dry-run")
    obs["upgrade_metadata_31"] = _features(ctx, "upgrade", "--feature", "metadata.version=31")
    obs["upgrade_unknown"] = _features(ctx, "upgrade", "--feature", "nope.version=1", "--dry-run")

    # Raw UpdateFeatures (validate only): Kafka's checks in its order, the error it picks, results per version.
    cases = {
        "share_same_level": [("share.version", 1, 1)],
        "share_0_as_upgrade": [("share.version", 0, 1)],
        "share_0_safe": [("share.version", 0, 2)],
        "share_1_as_downgrade": [("share.version", 1, 2)],
        "unknown_type": [("share.version", 0, 7)],
        "negative": [("share.version", -1, 2)],
        "unknown_level_0": [("nope.version", 0, 2)],
        "two_errors": [("zeta.version", 5, 1), ("alpha.version", 5, 1)],
        "metadata_29_unsafe": [("metadata.version", 29, 3)],
        "metadata_30": [("metadata.version", 30, 1)],
        "one_bad_of_two": [("share.version", 0, 2), ("share.version", 2, 1)],
        "none": [],
    }
    for version in (0, 1, 2):
        for label, updates in cases.items():
            obs[f"v{version}_{label}"] = _update(w, version, updates)

    # A real downgrade: the share APIs stay listed (Kafka answers them UNSUPPORTED_VERSION), share.version
    # leaves the finalized features, the epoch grows; then share.version is put back at 1.
    before = _api_versions(w)
    try:
        obs["downgrade_share_0"] = _features(ctx, "downgrade", "--feature", "share.version=0")
        during = _api_versions(w)
        obs["during_share_apis"] = sorted(k["api_key"] for k in during["api_keys"] if k["api_key"] in SHARE_APIS)
        obs["during_share_finalized"] = [f for f in during["finalized_features"] if f["name"] in AGREED]
        obs["during_epoch_grew"] = during["finalized_features_epoch"] > before["finalized_features_epoch"]
        obs["during_describe"] = sorted(line for line in _features(ctx, "describe") if line.split()[1] in AGREED)
    finally:
        obs["upgrade_share_back"] = _features(ctx, "upgrade", "--feature", "share.version=1")
    after = _api_versions(w)
    obs["after_share_finalized"] = [f for f in after["finalized_features"] if f["name"] in AGREED]
    obs["after_supported"] = [f for f in after["supported_features"] if f["name"] in AGREED]
    obs["after_v3_supported_metadata"] = [f for f in _api_versions(w, 3)["supported_features"] if f["name"] in AGREED]
    return obs


def test_features(conform):
    obs = conform(scenario_features)
    assert obs["describe_names"] == sorted(["eligible.leader.replicas.version", "group.version", "kraft.version",
                                            "metadata.version", "share.version", "streams.version", "transaction.version"])
    assert obs["upgrade_share_1"] == ["share.version was upgraded to 1."]
    assert obs["downgrade_share_0_dry_run"] == ["share.version can be downgraded to 0."]
    assert obs["disable_share_dry_run"] == ["share.version can be disabled."]
    assert obs["v1_share_0_safe"]["results"] == [{"feature": "share.version", "error_code": 0, "error_message": "NONE"}]
    assert obs["v2_two_errors"]["error_message"].endswith("for feature zeta.version. Local controller 1 does not support this feature.")
    assert obs["during_share_apis"] == list(SHARE_APIS) and obs["during_epoch_grew"]
    assert [f["name"] for f in obs["during_share_finalized"]] == ["metadata.version"]
    assert [f["name"] for f in obs["after_share_finalized"]] == ["share.version", "metadata.version"]


# --------------------------------------------------------------------------- delegation tokens

TOKEN_REQUESTS: list[tuple[int, tuple[int, ...], dict[str, Any]]] = [
    (38, (1, 2, 3), {"owner_principal_type": None, "owner_principal_name": None,
                     "renewers": [{"principal_type": "User", "principal_name": "bob"}], "max_lifetime": 1000}),
    (38, (3,), {"owner_principal_type": "User", "owner_principal_name": "alice", "renewers": [], "max_lifetime": 1000}),
    (38, (3,), {"owner_principal_type": "Group", "owner_principal_name": "g",
                "renewers": [{"principal_type": "Group", "principal_name": "x"}], "max_lifetime": 1000}),
    # An owner name with a null owner type: Kafka's NullPointerException, answered UNKNOWN_SERVER_ERROR (issue 29).
    (38, (3,), {"owner_principal_type": None, "owner_principal_name": "fuzz-a", "renewers": [], "max_lifetime": 0}),
    (39, (1, 2), {"hmac": b"abc", "renew_period": 1000}),
    (40, (1, 2), {"hmac": b"abc", "expiry_time_period": 1000}),
    (41, (1, 2, 3), {"owners": None}),
    (41, (3,), {"owners": [{"principal_type": "User", "principal_name": "bob"}]}),
]


def scenario_delegation_tokens(ctx: Ctx) -> dict[str, Any]:
    """The raw answers (bytes after the correlation id: the -1 timestamps do not decode) and the tool's."""
    w = ctx.wire()
    obs: dict[str, Any] = {}
    for i, (key, versions, body) in enumerate(TOKEN_REQUESTS):
        for version in versions:
            w.sock.sendall(w.frame(key, version, body))
            (size,) = struct.unpack(">i", w._read(4))
            obs[f"{i}_api{key}_v{version}"] = w._read(size)[4:].hex()
    with tempfile.NamedTemporaryFile("w", suffix=".properties") as config:
        common = ("--command-config", config.name)
        obs["tool_create"] = _tool(ctx, "kafka-delegation-tokens.sh", *common, "--create", "--max-life-time-period", "-1",
                                   "--renewer-principal", "User:bob")
        obs["tool_describe"] = _tool(ctx, "kafka-delegation-tokens.sh", *common, "--describe")
        obs["tool_renew"] = _tool(ctx, "kafka-delegation-tokens.sh", *common, "--renew", "--hmac", "abc",
                                  "--renew-time-period", "-1")
        obs["tool_expire"] = _tool(ctx, "kafka-delegation-tokens.sh", *common, "--expire", "--hmac", "abc",
                                   "--expiry-time-period", "-1")
    return obs


def test_delegation_tokens(conform):
    obs = conform(scenario_delegation_tokens)
    # DELEGATION_TOKEN_AUTH_DISABLED (64) in every answer but the null owner type's UNKNOWN_SERVER_ERROR (-1).
    assert all(v[:4] == "0040" or v[:6] == "000040" for k, v in obs.items() if k[0].isdigit() and k[0] != "3")
    assert obs["3_api38_v3"].startswith("00ffff05557365720a414e4f4e594d4f555305557365720a414e4f4e594d4f5553")
    assert any("Delegation Token requests are not allowed" in line for line in obs["tool_create"])
