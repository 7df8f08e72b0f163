"""The share.version gate side by side with Apache Kafka 4.3.1: with share.version downgraded to 0
(kafka-features.sh downgrade --feature share.version=0) the share APIs stay in ApiVersions and
each answers UNSUPPORTED_VERSION; Kafka 4.3.1's kafka-console-share-consumer.sh and
kafka-share-groups.sh then fail the same way; after share.version=1 again the same requests are
served. share.version is always put back at 1 (the brokers are shared by the session)."""

from __future__ import annotations

import os
import re
import subprocess
from typing import Any

import pytest

from bench.reference import find_java, find_kafka_home
from tests.conformance.harness import Ctx
from tests.conformance.wire import Wire, batch

pytestmark = pytest.mark.skipif(find_java() is None or find_kafka_home() is None,
                                reason="needs Java and Kafka 4.3.1's kafka-features.sh (KAFKA_HOME or make reference)")

SHARE_APIS = (76, 77, 78, 79, 90, 91, 92)


def _tool(ctx: Ctx, name: str, *args: str, timeout: float = 120) -> list[str]:
    """A Kafka tool's output lines, names made logical; JVM stack frames and log lines left out."""
    home = find_kafka_home()
    assert home is not None
    env = {**os.environ, "KAFKA_HEAP_OPTS": "-Xmx256m"}
    run = subprocess.run([str(home / "bin" / name), "--bootstrap-server", ctx.bootstrap, *args],
                         capture_output=True, text=True, env=env, timeout=timeout)
    out = []
    for line in (run.stdout + "\n" + run.stderr).splitlines():
        line = " ".join(line.split())
        if not line or line.startswith("at ") or re.match(r"^\[?\d{4}-\d\d-\d\d", line) or "WARN" in line or "INFO" in line:
            continue
        out.append(ctx.normalize(line))
    return out


def _requests(w: Wire, group: str, topic: str, topic_id: Any) -> dict[str, Any]:
    """One request of each share API (the answers to compare)."""
    parts = [{"partition_index": 0, "acknowledgement_batches": []}]
    return {
        "heartbeat": w.call(76, 1, {"group_id": group, "member_id": "m-1", "member_epoch": 0, "rack_id": None,
                                    "subscribed_topic_names": [topic]}),
        "describe": w.call(77, 1, {"group_ids": [group, "other"], "include_authorized_operations": True}),
        "fetch": w.call(78, 2, {"group_id": group, "member_id": "m-1", "share_session_epoch": 0, "max_wait": 0,
                                "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 500, "batch_size": 500,
                                "topics": [{"topic_id": topic_id, "partitions": parts}], "forgotten_topics_data": []}),
        "acknowledge": w.call(79, 2, {"group_id": group, "member_id": "m-1", "share_session_epoch": 1,
                                      "topics": [{"topic_id": topic_id, "partitions": parts}]}),
        "describe_offsets": w.call(90, 1, {"groups": [{"group_id": group, "topics": None},
                                                      {"group_id": "other", "topics": [{"topic_name": topic, "partitions": [0]}]}]}),
        "alter_offsets": w.call(91, 0, {"group_id": "alter-" + group, "topics": [
            {"topic_name": topic, "partitions": [{"partition_index": 0, "start_offset": 0}]}]}),
        "delete_offsets": w.call(92, 0, {"group_id": "alter-" + group, "topics": [{"topic_name": topic}]}),
    }


def _served(answers: dict[str, Any]) -> dict[str, Any]:
    """What does not depend on timing once the share APIs are served: the error codes (describe's
    groups sorted: Kafka answers them in another order)."""
    return {
        "heartbeat": answers["heartbeat"]["error_code"],
        "describe": sorted((g["group_id"], g["error_code"]) for g in answers["describe"]["groups"]),
        "fetch": answers["fetch"]["error_code"],
        "acknowledge": answers["acknowledge"]["error_code"],
        # A group that does not exist, asked with topics named, is answered from the share state
        # (no group-level error), as Kafka's coordinator answers it.
        # (The existing group's partitions are left out: Kafka initializes them in the background.)
        "describe_offsets": [(g["group_id"], g["error_code"], [(p["partition_index"], p["start_offset"], p["error_code"])
                                                               for t in g["topics"] for p in t["partitions"]]
                              if g["group_id"] == "other" else None)
                             for g in answers["describe_offsets"]["groups"]],
        "alter_offsets": answers["alter_offsets"]["error_code"],
        "delete_offsets": answers["delete_offsets"]["error_code"],
    }


def scenario_share_version(ctx: Ctx) -> dict[str, Any]:
    w = ctx.wire()
    topic, group = ctx.topic("t"), ctx.group("g")
    ctx.alias("alter-" + group, "alter-g")
    w.create_topic(topic)
    assert w.produce(topic, batch([b"a", b"b", b"c"]))["error"] == 0
    topic_id = w.metadata([topic])["topics"][0]["topic_id"]
    obs: dict[str, Any] = {}
    try:
        obs["downgrade"] = _tool(ctx, "kafka-features.sh", "downgrade", "--feature", "share.version=0")
        listed = w.call(18, 4, {"client_software_name": "conformance", "client_software_version": "1"})
        obs["listed"] = sorted(k["api_key"] for k in listed["api_keys"] if k["api_key"] in SHARE_APIS)
        obs["disabled"] = _requests(w, group, topic, topic_id)
        obs["console_share_consumer"] = _tool(ctx, "kafka-console-share-consumer.sh", "--topic", topic, "--group", group,
                                              "--timeout-ms", "5000")
        # This scenario's groups only (other scenarios of the session leave theirs, named apart per broker).
        obs["share_groups_list"] = [line for line in _tool(ctx, "kafka-share-groups.sh", "--list") if "cf-" not in line]
        obs["share_groups_describe"] = _tool(ctx, "kafka-share-groups.sh", "--describe", "--group", group)
    finally:
        obs["upgrade"] = _tool(ctx, "kafka-features.sh", "upgrade", "--feature", "share.version=1")
    obs["enabled"] = _served(_requests(w, group, topic, topic_id))
    return obs


def test_share_version(conform):
    obs = conform(scenario_share_version)
    assert obs["listed"] == list(SHARE_APIS)
    disabled = obs["disabled"]
    assert disabled["heartbeat"]["error_code"] == 35 and disabled["fetch"]["error_code"] == 35
    assert [g["error_code"] for g in disabled["describe"]["groups"]] == [35, 35]
    assert disabled["alter_offsets"]["error_message"] == "The version of API is not supported."
    assert obs["enabled"]["heartbeat"] == 0
