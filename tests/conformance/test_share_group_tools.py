"""kafka-share-groups.sh (Kafka 4.3.1's own tool) and the share-group admin APIs on a share group
without members, side by side with Apache Kafka: --reset-offsets creating the group,
--list --state, --describe (offsets), --delete-offsets, --delete, and the raw ListGroups,
DescribeGroups and DescribeShareGroupOffsets answers."""

from __future__ import annotations

import os
import subprocess
import time
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


# ---- a share group with members: epochs, initialization, start offsets, group configs -------------


def _heartbeat(w: Any, group: str, member: str, epoch: int, topics: list[str] | None = None) -> dict[str, Any]:
    return w.call(76, 1, {"group_id": group, "member_id": member, "member_epoch": epoch, "rack_id": None,
                          "subscribed_topic_names": topics})


def _hb_view(answer: dict[str, Any]) -> tuple[Any, ...]:
    a = answer.get("assignment")
    parts = None if a is None else sorted(p for tp in a["topic_partitions"] for p in tp["partitions"])
    return answer["error_code"], answer["member_epoch"], answer["heartbeat_interval"], parts


def _group_view(w: Any, group: str) -> tuple[Any, ...]:
    g = w.call(77, 1, {"group_ids": [group], "include_authorized_operations": False})["groups"][0]
    members = sorted((m["member_id"], m["member_epoch"], sorted(p for tp in m["assignment"]["topic_partitions"] for p in tp["partitions"]))
                     for m in g["members"])
    return g["error_code"], g["group_state"], g["group_epoch"], g["assignment_epoch"], g["assignor_name"], members


def _offsets_view(w: Any, group: str, topic: str | None) -> list[tuple[Any, ...]]:
    topics = None if topic is None else [{"topic_name": topic, "partitions": [0, 1]}]
    g = w.call(90, 1, {"groups": [{"group_id": group, "topics": topics}]})["groups"][0]
    return [(p["partition_index"], p["start_offset"], p["leader_epoch"], p["lag"], p["error_code"])
            for t in g["topics"] for p in sorted(t["partitions"], key=lambda p: p["partition_index"])]


def _acquired(body: dict[str, Any]) -> list[tuple[int, int, int, int]]:
    return sorted((p["partition_index"], a["first_offset"], a["last_offset"], a["delivery_count"])
                  for t in body["responses"] for p in t["partitions"] for a in p["acquired_records"])


def scenario_share_group_members(ctx: Ctx) -> dict[str, Any]:
    """Members join a share group: Kafka 4.3.1's epochs (the first member's empty assignment at
    epoch 2 while the partitions are initialized, then epoch 3), the start offset resolved by the
    group config share.auto.offset.reset=earliest at the first ShareFetch, DescribeShareGroupOffsets
    as the share coordinator last wrote the state, and kafka-share-groups.sh --describe."""
    import time

    w = ctx.wire()
    topic, group = ctx.topic("t"), ctx.group("g")
    w.create_topic(topic, partitions=2)
    topic_id = w.metadata([topic])["topics"][0]["topic_id"]
    for p in (0, 1):
        assert w.produce(topic, batch([b"a", b"b", b"c"]), partition=p)["error"] == 0
    for _ in range(120):  # a freshly started Kafka needs its coordinators loaded first
        if w.call(10, 4, {"key_type": 0, "coordinator_keys": [group]})["coordinators"][0]["error_code"] == 0:
            break
        time.sleep(0.5)
    obs: dict[str, Any] = {}
    configs = [{"name": "share.auto.offset.reset", "config_operation": 0, "value": "earliest"}]
    obs["set_config"] = w.call(44, 1, {"resources": [{"resource_type": 32, "resource_name": group, "configs": configs}],
                                       "validate_only": False})["responses"]
    joined = _heartbeat(w, group, "member-a", 0, [topic])
    for _ in range(60):  # Kafka answers NOT_COORDINATOR while the group's offsets partition loads
        if joined["error_code"] not in (14, 15, 16):  # COORDINATOR_LOAD_IN_PROGRESS / _NOT_AVAILABLE, NOT_COORDINATOR
            break
        time.sleep(0.5)
        joined = _heartbeat(w, group, "member-a", 0, [topic])
    obs["join_a"] = _hb_view(joined)
    obs["group_after_join"] = _group_view(w, group)
    obs["offsets_after_join"] = _offsets_view(w, group, topic)
    obs["offsets_after_join_all"] = _offsets_view(w, group, None)
    epoch, views = obs["join_a"][1], []
    for _ in range(30):  # heartbeats until the initialized partitions are assigned
        time.sleep(1.2)  # past share.assignment.interval.ms (1000)
        view = _hb_view(_heartbeat(w, group, "member-a", epoch))
        epoch = view[1]
        if view[3]:
            views.append(view)
            break
    obs["assigned_a"] = views
    obs["group_assigned"] = _group_view(w, group)
    obs["tool_members"] = [r[:2] + r[3:] for r in _tool(ctx, "--describe", "--group", group, "--members")]
    obs["tool_state"] = [r[:1] + r[2:] for r in _tool(ctx, "--describe", "--group", group, "--state")]
    obs["tool_members_verbose"] = [r[:2] + r[3:] for r in _tool(ctx, "--describe", "--group", group, "--members", "--verbose")]
    obs["tool_state_verbose"] = [r[:1] + r[2:] for r in _tool(ctx, "--describe", "--group", group, "--state", "--verbose")]
    acquired: list[tuple[int, int, int, int]] = []
    session = 0
    for _ in range(10):
        body = w.call(78, 2, {"group_id": group, "member_id": "member-a", "share_session_epoch": session, "max_wait": 1000,
                              "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 500, "batch_size": 500,
                              "topics": [{"topic_id": topic_id, "partitions": [{"partition_index": p, "acknowledgement_batches": []}
                                                                              for p in (0, 1)]}], "forgotten_topics_data": []})
        session += 1
        acquired += _acquired(body)
        if len(acquired) == 2:
            break
    obs["acquired"] = sorted(acquired)
    obs["offsets_after_fetch"] = _offsets_view(w, group, topic)

    def ack(batches: dict[int, list[tuple[int, int, int]]]) -> list[tuple[int, int]]:
        nonlocal session
        body = w.call(79, 2, {"group_id": group, "member_id": "member-a", "share_session_epoch": session, "topics": [
            {"topic_id": topic_id, "partitions": [{"partition_index": p, "acknowledgement_batches": [
                {"first_offset": f, "last_offset": last, "acknowledge_types": [t]} for f, last, t in bs]} for p, bs in batches.items()]}]})
        session += 1
        return sorted((p["partition_index"], p["error_code"]) for t in body["responses"] for p in t["partitions"])

    obs["ack_1"] = ack({0: [(0, 0, 1)], 1: [(0, 2, 1)]})
    obs["offsets_after_ack_1"] = _offsets_view(w, group, topic)
    obs["ack_2"] = ack({0: [(1, 1, 1), (2, 2, 2)]})  # accept 1, release 2
    obs["offsets_after_ack_2"] = _offsets_view(w, group, topic)
    obs["tool_offsets"] = _tool(ctx, "--describe", "--group", group, "--offsets")
    b = _hb_view(_heartbeat(w, group, "member-b", 0, [topic]))
    obs["join_b"] = (b[0], b[1], b[2], len(b[3] or []))
    g = _group_view(w, group)
    obs["group_after_join_b"] = g[:5] + ([(m[0], m[1], len(m[2])) for m in g[5]],)
    obs["leave_b"] = _hb_view(_heartbeat(w, group, "member-b", -1))
    obs["group_after_leave_b"] = _group_view(w, group)[:5]
    obs["leave_a"] = _hb_view(_heartbeat(w, group, "member-a", -1))
    obs["group_empty"] = _group_view(w, group)
    obs["offsets_empty"] = _offsets_view(w, group, None)
    return obs


def test_share_group_members(conform):
    obs = conform(scenario_share_group_members)
    assert obs["join_a"] == [0, 2, 5000, []]
    assert obs["assigned_a"] == [[0, 3, 5000, [0, 1]]]
    assert obs["offsets_after_join"] == [[0, -1, 0, -1, 0], [1, -1, 0, -1, 0]] or obs["offsets_after_join"][0][1] == -1
    assert obs["acquired"] == [[0, 0, 2, 1], [1, 0, 2, 1]]
    assert [o[1] for o in obs["offsets_after_fetch"]] == [-1, -1]
    assert [(o[1], o[3]) for o in obs["offsets_after_ack_1"]] == [(0, 2), (0, 0)]
    assert obs["tool_state_verbose"][1][-3:] == ["3", "3", "1"]  # group epoch, assignment epoch, members
    assert obs["tool_members_verbose"][1][-2] == "3"  # member epoch


# ---- group configs (resource type GROUP) ------------------------------------------------------------


def _configs_tool(ctx: Ctx, *args: str) -> list[str]:
    home = find_kafka_home()
    assert home is not None
    env = {**os.environ, "KAFKA_HEAP_OPTS": "-Xmx256m"}
    run = subprocess.run([str(home / "bin" / "kafka-configs.sh"), "--bootstrap-server", ctx.bootstrap, *args],
                         capture_output=True, text=True, env=env, timeout=120)
    lines = run.stdout.splitlines() + [e for e in run.stderr.splitlines() if e.startswith("Caused by")]
    return [line.strip() for line in lines if line.strip()]


_GROUP_CONFIG_CASES = [
    ("share.auto.offset.reset", "EARLIEST"), ("share.auto.offset.reset", "by_duration:"), ("share.auto.offset.reset", "by_duration:pt1h"),
    ("share.auto.offset.reset", "by_duration:P1DT2H3M4.5S"), ("share.auto.offset.reset", "by_duration:PT-1H"),
    ("share.auto.offset.reset", " earliest"), ("share.auto.offset.reset", ""), ("share.isolation.level", "READ_COMMITTED"),
    ("share.isolation.level", "read_committed"), ("share.renew.acknowledge.enable", "yes"), ("share.renew.acknowledge.enable", "TRUE"),
    ("share.delivery.count.limit", "1"), ("share.delivery.count.limit", "11"), ("share.partition.max.record.locks", "5000"),
    ("share.record.lock.duration.ms", "999"), ("share.record.lock.duration.ms", "100000"), ("share.session.timeout.ms", "5000"),
    ("consumer.session.timeout.ms", "0"), ("consumer.session.timeout.ms", " 50000 "), ("consumer.heartbeat.interval.ms", "16000"),
    ("share.heartbeat.interval.ms", ""), ("share.heartbeat.interval.ms", "2147483648"), ("streams.num.standby.replicas", "3"),
    ("share.assignment.interval.ms", "20000"), ("consumer.assignment.interval.ms", "-1"), ("consumer.assignor.offload.enable", "true"),
    ("bogus", "1"),
]


def scenario_group_configs(ctx: Ctx) -> dict[str, Any]:
    """IncrementalAlterConfigs/AlterConfigs/DescribeConfigs on GROUP resources and kafka-configs.sh
    --entity-type groups: GroupConfig's validation and messages, sources, synonyms, documentation."""
    w = ctx.wire()
    group, other = ctx.group("g"), ctx.group("h")
    obs: dict[str, Any] = {}

    def alter(name: str, ops: list[tuple[str, int, str | None]], validate_only: bool = False) -> list[Any]:
        body = w.call(44, 1, {"resources": [{"resource_type": 32, "resource_name": name, "configs": [
            {"name": k, "config_operation": op, "value": v} for k, op, v in ops]}], "validate_only": validate_only})
        return [(r["error_code"], r["error_message"]) for r in body["responses"]]

    def describe(name: str, keys: list[str] | None = None, synonyms: bool = True, docs: bool = False) -> list[Any]:
        body = w.call(32, 4, {"resources": [{"resource_type": 32, "resource_name": name, "configuration_keys": keys}],
                              "include_synonyms": synonyms, "include_documentation": docs})
        return body["results"]

    def describe_after_change(name: str, key: str, changed: bool, keys: list[str] | None = None,
                              synonyms: bool = True) -> list[Any]:
        """Kafka applies a group config when the controller's record reaches the broker, so a
        DescribeConfigs just after the alter may still show the old value: wait (bounded) until
        `key` is (changed=True) or is not (changed=False) a GROUP_CONFIG (source 8) value."""
        deadline = time.monotonic() + 15
        while True:
            results = describe(name, keys, synonyms)
            sources = {c["name"]: c["config_source"] for c in results[0]["configs"]}
            if (sources.get(key) == 8) == changed or time.monotonic() > deadline:
                return results
            time.sleep(0.1)

    obs["validate"] = [(k, v, alter(group, [(k, 0, v)], validate_only=True)) for k, v in _GROUP_CONFIG_CASES]
    obs["two_unknown_first"] = alter(group, [("share.delivery.count.limit", 0, "1"), ("bogus", 0, "1")], True)
    obs["append"] = alter(group, [("share.auto.offset.reset", 2, "earliest")])
    obs["empty_name"] = alter("", [("share.auto.offset.reset", 0, "earliest")])
    obs["describe_empty_name"] = describe("")
    obs["describe_unset"] = describe(group, docs=True)
    obs["set"] = alter(group, [("share.auto.offset.reset", 0, "by_duration:PT1H"), ("share.record.lock.duration.ms", 0, "15000")])
    obs["delete_unset"] = alter(group, [("consumer.session.timeout.ms", 1, None)])
    obs["describe_set"] = describe_after_change(group, "share.record.lock.duration.ms", True)
    obs["describe_keys"] = describe(group, ["share.record.lock.duration.ms", "share.auto.offset.reset", "nope"], synonyms=False, docs=True)
    legacy = w.call(33, 2, {"resources": [{"resource_type": 32, "resource_name": other, "configs": [
        {"name": "share.isolation.level", "value": "read_committed"}]}], "validate_only": False})
    obs["legacy_alter"] = [(r["error_code"], r["error_message"]) for r in legacy["responses"]]
    obs["describe_legacy"] = describe_after_change(other, "share.isolation.level", True, ["share.isolation.level"])
    obs["tool_alter"] = _configs_tool(ctx, "--alter", "--entity-type", "groups", "--entity-name", group,
                                      "--add-config", "share.auto.offset.reset=earliest,share.delivery.count.limit=3")
    obs["tool_alter_bad"] = _configs_tool(ctx, "--alter", "--entity-type", "groups", "--entity-name", group,
                                          "--add-config", "share.auto.offset.reset=foo")
    obs["tool_describe"] = _configs_tool(ctx, "--describe", "--entity-type", "groups", "--entity-name", group)
    obs["tool_delete"] = _configs_tool(ctx, "--alter", "--entity-type", "groups", "--entity-name", group,
                                       "--delete-config", "share.auto.offset.reset,share.delivery.count.limit,share.record.lock.duration.ms")
    obs["describe_after_delete"] = describe_after_change(group, "share.auto.offset.reset", False, ["share.auto.offset.reset"])
    alter(other, [("share.isolation.level", 1, None)])
    return obs


def test_group_configs(conform):
    obs = conform(scenario_group_configs)
    messages = {(k, v): answer[0] for k, v, answer in obs["validate"]}
    assert messages[("bogus", "1")] == [40, "Unknown group config name: bogus"]
    assert messages[("share.auto.offset.reset", "by_duration:pt1h")] == [0, None]
    assert obs["describe_set"][0]["configs"][2]["synonyms"] == [
        {"name": "share.auto.offset.reset", "value": "by_duration:PT1H", "source": 8},
        {"name": "share.auto.offset.reset", "value": "latest", "source": 5}]
    assert obs["tool_alter"] == ["Completed updating config for group <g>."]
