"""Feature flags and delegation tokens over TCP against a kafka-sidecar process (no reference
needed; tests/conformance/test_features.py compares the same with Kafka 4.3.1): the features we
report and their levels, a finalized change that survives a restart and shows in ApiVersions,
all-or-nothing updates, validate_only, and the delegation-token APIs answering
DELEGATION_TOKEN_AUTH_DISABLED."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conformance.wire import Wire
from tests.support import SidecarProcess, kafka_bin, kafka_tool_missing

INVALID_UPDATE_VERSION, DELEGATION_TOKEN_AUTH_DISABLED = 95, 64


def _api_versions(w: Wire, version: int = 4) -> dict[str, Any]:
    return w.call(18, version, {"client_software_name": "t", "client_software_version": "1"})


def _finalized(body: dict[str, Any]) -> dict[str, int]:
    return {f["name"]: f["max_version_level"] for f in body["finalized_features"]}


def _update(w: Wire, updates: list[tuple[str, int, int]], validate_only: bool = False, version: int = 1) -> dict[str, Any]:
    return w.call(57, version, {"timeout_ms": 1000, "validate_only": validate_only, "feature_updates": [
        {"feature": n, "max_version_level": lv, "upgrade_type": t} for n, lv, t in updates]})


@pytest.fixture
def server(tmp_path: Path) -> Iterator[SidecarProcess]:
    s = SidecarProcess(tmp_path / "data").start()
    try:
        yield s
    finally:
        s.stop()


def test_reported_features(server: SidecarProcess) -> None:
    with Wire(server.bootstrap) as w:
        body = _api_versions(w)
        supported = {f["name"]: (f["min_version"], f["max_version"]) for f in body["supported_features"]}
        assert supported == {"metadata.version": (7, 30), "share.version": (0, 1), "group.version": (1, 1),
                             "kraft.version": (0, 0), "transaction.version": (0, 0),
                             "eligible.leader.replicas.version": (0, 0), "streams.version": (0, 1)}
        # Kafka's HashMap order; level-0 features are not finalized; metadata.version last.
        assert [f["name"] for f in body["supported_features"]][:3] == ["group.version", "kraft.version", "metadata.version"]
        assert list(_finalized(body).items()) == [("group.version", 1), ("streams.version", 1), ("share.version", 1),
                                                 ("metadata.version", 30)]
        # Below v4 a range starting at 0 is left out (KAFKA-17011).
        assert [f["name"] for f in _api_versions(w, 3)["supported_features"]] == ["group.version", "metadata.version"]


def test_finalized_change_survives_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"
    s = SidecarProcess(data).start()
    try:
        with Wire(s.bootstrap) as w:
            epoch = _api_versions(w)["finalized_features_epoch"]
            assert _update(w, [("share.version", 0, 2)], validate_only=True)["error_code"] == 0
            assert _api_versions(w)["finalized_features_epoch"] == epoch  # validate_only changes nothing
            assert _update(w, [("share.version", 0, 2)]) == {
                "throttle_time": 0, "error_code": 0, "error_message": None,
                "results": [{"feature": "share.version", "error_code": 0, "error_message": "NONE"}]}
            body = _api_versions(w)
            assert "share.version" not in _finalized(body) and body["finalized_features_epoch"] == epoch + 1
            # The share APIs stay listed, as in Kafka at share.version 0.
            assert {76, 77, 78, 79, 90, 91, 92} <= {k["api_key"] for k in body["api_keys"]}
    finally:
        s.stop()
    stored = json.loads((data / "sidecar-features.json").read_text())
    assert stored["finalized"] == {"share.version": 0} and stored["epoch"] == epoch + 1
    s = SidecarProcess(data).start()
    try:
        with Wire(s.bootstrap) as w:
            body = _api_versions(w)
            assert "share.version" not in _finalized(body) and body["finalized_features_epoch"] == epoch + 1
            assert _update(w, [("share.version", 1, 1)], version=2) == {"throttle_time": 0, "error_code": 0, "error_message": None}
            body = _api_versions(w)
            assert _finalized(body)["share.version"] == 1 and body["finalized_features_epoch"] == epoch + 2
    finally:
        s.stop()


def test_updates_are_all_or_nothing(server: SidecarProcess) -> None:
    with Wire(server.bootstrap) as w:
        epoch = _api_versions(w)["finalized_features_epoch"]
        body = _update(w, [("share.version", 0, 2), ("group.version", 0, 2)])
        assert body == {"throttle_time": 0, "error_code": INVALID_UPDATE_VERSION, "results": [], "error_message":
                        "The update failed for all features since the following feature had an error: Invalid update "
                        "version 0 for feature group.version. Local controller 1 only supports versions 1-1"}
        after = _api_versions(w)
        assert _finalized(after)["share.version"] == 1 and after["finalized_features_epoch"] == epoch
        body = _update(w, [("transaction.version", 2, 1)])
        assert body["error_message"].endswith("for feature transaction.version. Local controller 1 does not support this feature.")
        body = _update(w, [("metadata.version", 29, 2)])
        assert body["error_message"].endswith("Unsupported metadata.version downgrade from 30 to 29. Refusing to perform "
                                              "the requested downgrade because it might delete metadata information.")


def test_delegation_tokens_disabled(server: SidecarProcess) -> None:
    with Wire(server.bootstrap) as w:
        for key, version, body in [(39, 2, {"hmac": b"x", "renew_period": 1}), (40, 1, {"hmac": b"x", "expiry_time_period": 1})]:
            w.sock.sendall(w.frame(key, version, body))
            size = int.from_bytes(w._read(4))
            raw = w._read(size)[4:]
            assert raw == (b"\0" if version == 2 else b"") + bytes.fromhex("0040ffffffffffffffff00000000") + (b"\0" if version == 2 else b"")
        assert w.call(41, 3, {"owners": None}) == {"error_code": DELEGATION_TOKEN_AUTH_DISABLED, "tokens": [], "throttle_time": 0}


# Issue 29: CreateDelegationToken v3 with an owner name but a null owner type (the schema allows it),
# as the fuzzer sent it. Kafka 4.3.1 answers (measured) its error response: UNKNOWN_SERVER_ERROR,
# owner and requester User:ANONYMOUS, timestamps -1, no token id, no HMAC; the connection stays open.
NULL_OWNER_TYPE_FRAME = bytes.fromhex(
    "00 00 00 21 00 26 00 03 00 00 00 00 00 04 66 75 7a 7a 00 00 07 66 75 7a 7a 2d 61 01 00 00 00 00 00 00 00 00 00")
NULL_OWNER_TYPE_ANSWER = bytes.fromhex(
    "000000440000000000ffff05557365720a414e4f4e594d4f555305557365720a414e4f4e594d4f5553"
    "ffffffffffffffffffffffffffffffffffffffffffffffff01010000000000")


def test_create_delegation_token_null_owner_type(server: SidecarProcess) -> None:
    with Wire(server.bootstrap) as w:
        for _ in range(2):  # answered, and the connection still serves the next request
            w.sock.sendall(NULL_OWNER_TYPE_FRAME)
            assert w._read(len(NULL_OWNER_TYPE_ANSWER)) == NULL_OWNER_TYPE_ANSWER
        assert w.call(41, 3, {"owners": None})["error_code"] == DELEGATION_TOKEN_AUTH_DISABLED
    assert "Traceback" not in server.log_text()


@pytest.mark.skipif(kafka_tool_missing("kafka-features.sh") is not None, reason=str(kafka_tool_missing("kafka-features.sh")))
def test_kafka_features_tool(server: SidecarProcess) -> None:
    def tool(*args: str) -> list[str]:
        run = subprocess.run([str(kafka_bin("kafka-features.sh")), "--bootstrap-server", server.bootstrap, *args],
                             capture_output=True, text=True, timeout=120, env={**os.environ, "KAFKA_HEAP_OPTS": "-Xmx256m"})
        return [" ".join(line.split()) for line in run.stdout.splitlines() if line.strip()]

    described = tool("describe")
    assert "Feature: share.version SupportedMinVersion: 0 SupportedMaxVersion: 1 FinalizedVersionLevel: 1 Epoch: 1" in described
    assert "Feature: metadata.version SupportedMinVersion: 3.3-IV3 SupportedMaxVersion: 4.3-IV0 FinalizedVersionLevel: 4.3-IV0 Epoch: 1" in described
    assert tool("disable", "--feature", "share.version") == ["share.version was disabled."]
    assert "Feature: share.version SupportedMinVersion: 0 SupportedMaxVersion: 1 FinalizedVersionLevel: 0 Epoch: 2" in tool("describe")
