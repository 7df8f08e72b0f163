"""KIP-714 client-metrics subscriptions (config resources of type CLIENT_METRICS), side by side
with Apache Kafka: Kafka 4.3.1's kafka-client-metrics.sh --alter / --describe / --list /
--delete, and the raw IncrementalAlterConfigs, AlterConfigs, DescribeConfigs and
ListConfigResources answers, valid and refused (ClientMetricsConfigs' validation messages)."""

from __future__ import annotations

import os
import subprocess
from typing import Any

import pytest

from bench.reference import find_java, find_kafka_home
from tests.conformance.harness import Ctx

pytestmark = pytest.mark.skipif(find_java() is None or find_kafka_home() is None,
                                reason="needs Java and Kafka 4.3.1's kafka-client-metrics.sh (KAFKA_HOME or make reference)")

CLIENT_METRICS = 16
DESCRIBE_CONFIGS, ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS, LIST_CONFIG_RESOURCES = 32, 33, 44, 74
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def _tool(ctx: Ctx, *args: str) -> list[str]:
    home = find_kafka_home()
    assert home is not None
    env = {**os.environ, "KAFKA_HEAP_OPTS": "-Xmx256m"}
    run = subprocess.run([str(home / "bin" / "kafka-client-metrics.sh"), "--bootstrap-server", ctx.bootstrap, *args],
                         capture_output=True, text=True, env=env, timeout=120)
    lines = run.stdout.splitlines() + [e for e in run.stderr.splitlines() if e.startswith(("Error", "Exception"))]
    out = []
    for line in lines:
        for actual, logical in ctx.names.items():
            line = line.replace(actual, f"<{logical}>")
        if line.strip():
            out.append(line.rstrip())
    return out


def _alter(ctx: Ctx, name: str, ops: list[tuple[str, int, str | None]], validate_only: bool = False) -> tuple[int, str | None]:
    body = ctx.wire().call(INCREMENTAL_ALTER_CONFIGS, 1, {
        "resources": [{"resource_type": CLIENT_METRICS, "resource_name": name, "configs": [
            {"name": k, "config_operation": op, "value": v} for k, op, v in ops]}],
        "validate_only": validate_only,
    })
    (r,) = body["responses"]
    return r["error_code"], r["error_message"]


def _describe(ctx: Ctx, name: str, keys: list[str] | None = None) -> dict[str, Any]:
    body = ctx.wire().call(DESCRIBE_CONFIGS, 4, {
        "resources": [{"resource_type": CLIENT_METRICS, "resource_name": name, "configuration_keys": keys}],
        "include_synonyms": True, "include_documentation": True,
    })
    (r,) = body["results"]
    return {"error": r["error_code"], "message": r["error_message"],
            "configs": [{k: v for k, v in c.items()} for c in r["configs"]]}


def _listed(ctx: Ctx, types: list[int]) -> list[tuple[str, int]]:
    body = ctx.wire().call(LIST_CONFIG_RESOURCES, 1, {"resource_types": types})
    return sorted((ctx.names.get(r["resource_name"], r["resource_name"]), r["resource_type"])
                  for r in body["config_resources"] if r["resource_type"] == CLIENT_METRICS
                  and r["resource_name"] in ctx.names) + [("error", body["error_code"])]


def scenario_client_metrics_tool(ctx: Ctx) -> dict[str, Any]:
    sub, other = ctx.group("sub"), ctx.group("other")
    obs: dict[str, Any] = {}
    obs["alter"] = _tool(ctx, "--alter", "--name", sub, "--metrics", "org.apache.kafka.producer.,org.apache.kafka.consumer.",
                         "--interval", "1000", "--match", "client_id=x,client_software_name=apache-kafka-java")
    obs["describe"] = _tool(ctx, "--describe", "--name", sub)
    obs["alter_other"] = _tool(ctx, "--alter", "--name", other, "--metrics", "*", "--interval", "60000")
    obs["list"] = sorted(line for line in _tool(ctx, "--list") if "<" in line)
    # One block per subscription, in the order of the broker's listing (a hash order): sorted.
    blocks: list[list[str]] = []
    for line in _tool(ctx, "--describe"):
        if line.startswith("Client metrics configs for"):
            blocks.append([line])
        elif line.startswith(" ") and blocks:
            blocks[-1].append(line)
    obs["describe_all"] = sorted(b for b in blocks if "<" in b[0])
    obs["alter_bad_interval"] = _tool(ctx, "--alter", "--name", sub, "--interval", "50")
    obs["delete"] = _tool(ctx, "--delete", "--name", other)
    obs["describe_deleted"] = _tool(ctx, "--describe", "--name", other)
    return obs


def test_client_metrics_tool(conform):
    obs = conform(scenario_client_metrics_tool)
    assert any("interval.ms=1000" in line for line in obs["describe"])
    assert [line for line in obs["list"] if "<sub>" in line]


def scenario_client_metrics_configs(ctx: Ctx) -> dict[str, Any]:
    sub = ctx.group("raw")
    obs: dict[str, Any] = {}
    obs["describe_unknown"] = _describe(ctx, sub)
    obs["set"] = _alter(ctx, sub, [("metrics", SET, "a.b.,c.d"), ("interval.ms", SET, "2000"), ("match", SET, "client_id=abc.*")])
    obs["describe"] = _describe(ctx, sub)
    obs["describe_keys"] = _describe(ctx, sub, ["interval.ms", "nope"])
    obs["append"] = _alter(ctx, sub, [("metrics", APPEND, "e.f"), ("match", APPEND, "client_source_port=1.*")])
    obs["subtract"] = _alter(ctx, sub, [("metrics", SUBTRACT, "a.b.")])
    obs["append_interval"] = _alter(ctx, sub, [("interval.ms", APPEND, "5")])
    obs["after_ops"] = _describe(ctx, sub)
    for label, ops in {
        "unknown_key": [("foo", SET, "1")],
        "interval_low": [("interval.ms", SET, "99")],
        "interval_high": [("interval.ms", SET, "3600001")],
        "interval_text": [("interval.ms", SET, "abc")],
        "match_no_equals": [("match", SET, "client_id")],
        "match_two_equals": [("match", SET, "client_id=a=b")],
        "match_bad_key": [("match", SET, "client_name=a")],
        "match_bad_regex": [("match", SET, "client_id=a[")],
        "match_duplicate": [("match", SET, "client_id=a,client_id=a")],
        "metrics_duplicate": [("metrics", SET, "a,a")],
        "metrics_empty_item": [("metrics", SET, "a,,b")],
        "empty_name": None,
    }.items():
        obs[label] = _alter(ctx, "" if ops is None else sub, ops or [("interval.ms", SET, "1000")])
    obs["validate_only"] = _alter(ctx, sub, [("interval.ms", SET, "100")], validate_only=True)
    obs["after_refused"] = _describe(ctx, sub, ["interval.ms"])
    alter = ctx.wire().call(ALTER_CONFIGS, 2, {"resources": [{"resource_type": CLIENT_METRICS, "resource_name": sub, "configs": [
        {"name": "interval.ms", "value": "3000"}]}], "validate_only": False})
    obs["alter_configs"] = [(r["error_code"], r["error_message"]) for r in alter["responses"]]
    obs["after_alter_configs"] = _describe(ctx, sub)
    obs["listed"] = _listed(ctx, [CLIENT_METRICS])
    obs["delete_all"] = _alter(ctx, sub, [("metrics", DELETE, None), ("interval.ms", DELETE, None), ("match", DELETE, None)])
    obs["listed_after_delete"] = _listed(ctx, [CLIENT_METRICS])
    obs["describe_after_delete"] = _describe(ctx, sub)
    return obs


def test_client_metrics_configs(conform):
    obs = conform(scenario_client_metrics_configs)
    assert obs["set"] == [0, None]
    assert obs["interval_low"][0] == 42  # INVALID_REQUEST

