"""kafka-share-groups.sh (Kafka 4.3.1's own tool) and the share-group admin APIs on a share group
without members, side by side with Apache Kafka: --reset-offsets creating the group,
--list --state, --describe (offsets), --delete-offsets, --delete, and the raw ListGroups,
DescribeGroups and DescribeShareGroupOffsets answers."""

from __future__ import annotations

import os
import subprocess
from typing import Any

import pytest

from bench.reference import find_java, find_kafka_home
from tests.conformance.harness import Ctx
from tests.conformance.wire import batch

pytestmark = pytest.mark.skipif(find_java() is None or find_kafka_home() is None,
                                reason="needs Java and Kafka 4.3.1's kafka-share-groups.sh (KAFKA_HOME or make reference)")


def _tool(ctx: Ctx, *args: str) -> list[list[str]]:
    home = find_kafka_home()
    assert home is not None
    env = {**os.environ, "KAFKA_HEAP_OPTS": "-Xmx256m"}
    run = subprocess.run([str(home / "bin" / "kafka-share-groups.sh"), "--bootstrap-server", ctx.bootstrap, *args],
                         capture_output=True, text=True, env=env, timeout=120)
    lines = (run.stdout + "\n" + "\n".join(e for e in run.stderr.splitlines() if e.startswith("Error"))).splitlines()
    out = []
    for line in lines:
        words = [ctx.names.get(w, w) for w in line.replace("'", " ' ").split()]
        if words:
            out.append(words)
    return out


def scenario_share_group_tools(ctx: Ctx) -> dict[str, Any]:
    w = ctx.wire()
    topic, group = ctx.topic("t"), ctx.group("g")
    w.create_topic(topic, partitions=2)
    for p in (0, 1):
        assert w.produce(topic, batch([b"a", b"b", b"c"]), partition=p)["error"] == 0
    obs: dict[str, Any] = {}
    obs["reset_earliest_new_group"] = sorted(_tool(ctx, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute"))
    obs["list_state"] = [r for r in _tool(ctx, "--list", "--state") if r[0] in ("GROUP", "<g>")]
    obs["describe"] = _tool(ctx, "--describe", "--group", group)
    obs["reset_latest"] = sorted(_tool(ctx, "--reset-offsets", "--group", group, "--topic", topic, "--to-latest", "--execute"))
    obs["describe_offsets"] = _tool(ctx, "--describe", "--group", group, "--offsets")
    obs["describe_members"] = _tool(ctx, "--describe", "--group", group, "--members")
    obs["describe_state"] = [r[:1] + r[-2:] for r in _tool(ctx, "--describe", "--group", group, "--state")]
    listed = w.call(16, 5, {"states_filter": [], "types_filter": ["share"]})
    obs["list_groups"] = [{k: ctx.names.get(v, v) for k, v in g.items()} for g in listed["groups"] if g["group_id"] == group]
    described = w.call(15, 5, {"groups": [group], "include_authorized_operations": False})["groups"][0]
    obs["describe_groups_v5"] = (described["error_code"], described["group_state"])
    offsets = w.call(90, 1, {"groups": [{"group_id": group, "topics": [{"topic_name": topic, "partitions": [0, 1]}]}]})
    obs["describe_share_group_offsets"] = [
        (p["partition_index"], p["start_offset"], p["lag"], p["error_code"])
        for t in offsets["groups"][0]["topics"] for p in t["partitions"]]
    obs["delete_offsets"] = _tool(ctx, "--delete-offsets", "--group", group, "--topic", topic)
    obs["describe_after_delete_offsets"] = _tool(ctx, "--describe", "--group", group)
    obs["delete"] = _tool(ctx, "--delete", "--group", group)
    obs["describe_deleted"] = _tool(ctx, "--describe", "--group", group)[:1]
    return obs


def test_share_group_tools(conform):
    obs = conform(scenario_share_group_tools)
    # (names are the scenario's own here; the comparison with Kafka saw them as <g> and <t>)
    assert [r[2:] for r in obs["reset_latest"]] == [["PARTITION", "NEW-OFFSET"], ["0", "3"], ["1", "3"]]
    assert [r[2:] for r in obs["describe_offsets"][1:]] == [["0", "3", "0"], ["1", "3", "0"]]
    assert [(g["protocol_type"], g["group_state"], g["group_type"]) for g in obs["list_groups"]] == [("share", "Empty", "share")]
    assert obs["describe_share_group_offsets"] == [[0, 3, 0, 0], [1, 3, 0, 0]]
