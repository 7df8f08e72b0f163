"""Conformance: the KIP-848 consumer group protocol (ConsumerGroupHeartbeat v1, ConsumerGroupDescribe v1), raw.

Two members of one group, driven by hand so the scenario does not depend on the heartbeat
interval: the first joins and gets every partition; the second joins and gets nothing until the
first has revoked half (revoke before assign, the member epochs recorded at each step); stale and
greater epochs, unknown members, OffsetCommit/OffsetFetch with a stale epoch; the first leaves and
the second is given everything. Uniform's choice of partitions may differ, so only counts are
recorded.
"""

from __future__ import annotations

import os
import struct
import subprocess
import time
import uuid
from typing import Any

from tests.conformance.harness import Ctx

HEARTBEAT, DESCRIBE, OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR, LIST_GROUPS = 68, 69, 8, 9, 10, 16
PARTITIONS = 4


def scenario_consumer_protocol(ctx: Ctx) -> dict[str, Any]:
    w = ctx.wire()
    t, group, missing = ctx.topic("t"), ctx.group("g"), ctx.group("missing")
    w.create_topic(t, partitions=PARTITIONS)
    obs: dict[str, Any] = {}
    deadline = time.monotonic() + 30
    while True:  # a fresh Kafka creates __consumer_offsets first: COORDINATOR_NOT_AVAILABLE meanwhile
        fc = w.call(FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [group]})["coordinators"][0]
        if fc["error_code"] not in (14, 15) or time.monotonic() > deadline:
            break
        time.sleep(0.2)

    owned: dict[str, list[dict[str, Any]]] = {}
    epochs: dict[str, int] = {}

    def hb(member: str, epoch: int | None = None, join: bool = False, tps: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        r = w.call(HEARTBEAT, 1, {
            "group_id": group, "member_id": member, "member_epoch": epochs.get(member, 0) if epoch is None else epoch,
            "instance_id": None, "rack_id": None, "rebalance_timeout": 30_000 if join else -1,
            "subscribed_topic_names": [t] if join else None, "subscribed_topic_regex": None, "server_assignor": None,
            "topic_partitions": owned.get(member, []) if tps is None else tps,
        })
        if r["error_code"] == 0 and epoch is None:
            epochs[member] = r["member_epoch"]
            if r["assignment"] is not None:
                owned[member] = [{"topic_id": x["topic_id"], "partitions": sorted(x["partitions"])} for x in r["assignment"]["topic_partitions"]]
        count = None if r["assignment"] is None else sum(len(x["partitions"]) for x in r["assignment"]["topic_partitions"])
        return {"error": r["error_code"], "epoch": r["member_epoch"], "assigned": count, "interval": r["heartbeat_interval"]}

    a, b = str(uuid.uuid4()), str(uuid.uuid4())
    deadline = time.monotonic() + 30
    # The group's __consumer_offsets partition may still be loading: NOT_COORDINATOR meanwhile.
    while hb(str(uuid.uuid4()), epoch=1, tps=[])["error"] in (14, 15, 16) and time.monotonic() < deadline:
        time.sleep(0.2)
    obs["join_empty_member_id"] = hb("", epoch=0, join=True, tps=[])["error"]
    obs["join_unknown_group_epoch_1"] = hb(str(uuid.uuid4()), epoch=1, tps=[])["error"]
    # A new group starts at epoch 1 (an empty assignment), so the first member gets epoch 2.
    obs["a_joins"] = hb(a, join=True, tps=[])

    def parts(member: str) -> set[tuple[Any, int]]:
        return {(x["topic_id"], p) for x in owned.get(member, []) for p in x["partitions"]}

    def converge(members: list[str], done: Any) -> dict[str, Any]:
        """Heartbeat until ``done()``: Kafka 4.3 computes target assignments at most every
        group.consumer.assignment.interval.ms, off the request path, so the steps' timing differs;
        what must hold is that no partition ever has two owners (revoke before assign)."""
        overlapped = False
        deadline = time.monotonic() + 30
        while not done() and time.monotonic() < deadline:
            for m in members:
                hb(m)
                overlapped = overlapped or bool(parts(a) & parts(b))
            time.sleep(0.1)
        return {"done": done(), "overlapped": overlapped}

    obs["a_gets_all"] = converge([a], lambda: len(parts(a)) == PARTITIONS)
    obs["a_greater_epoch"] = hb(a, epoch=epochs.get(a, 0) + 5)["error"]
    obs["unknown_member"] = hb(str(uuid.uuid4()), epoch=1)["error"]
    obs["b_joins"] = {k: v for k, v in hb(b, join=True, tps=[]).items() if k in ("error", "assigned", "epoch")}
    obs["split"] = converge([a, b], lambda: len(parts(a)) == len(parts(b)) == PARTITIONS // 2 and epochs.get(a) == epochs.get(b))

    mine = min(p for _, p in parts(a))  # a partition a has had since it joined

    def commit(member: str, epoch: int) -> int:
        r = w.call(OFFSET_COMMIT, 9, {"group_id": group, "generation_id_or_member_epoch": epoch, "member_id": member,
                                      "group_instance_id": None, "topics": [{"name": t, "partitions": [
                                          {"partition_index": mine, "committed_offset": 3, "committed_leader_epoch": -1, "committed_metadata": ""}]}]})
        return r["topics"][0]["partitions"][0]["error_code"]

    def fetch(member: str | None, epoch: int) -> dict[str, Any]:
        r = w.call(OFFSET_FETCH, 9, {"groups": [{"group_id": group, "member_id": member, "member_epoch": epoch,
                                                 "topics": [{"name": t, "partition_indexes": [mine]}]}], "require_stable": False})["groups"][0]
        return {"error": r["error_code"], "offsets": [p["committed_offset"] for x in r["topics"] for p in x["partitions"]]}

    # KIP-1251 (Kafka 4.3): an older member epoch may still commit what the member had at that epoch
    obs["commit_older_epoch_own_partition"] = commit(a, epochs.get(a, 0) - 1)
    obs["commit_newer_epoch"] = commit(a, epochs.get(a, 0) + 1)
    obs["commit_unknown_member"] = commit("nobody", epochs.get(a, 0))
    obs["commit"] = commit(a, epochs.get(a, 0))
    obs["fetch_stale_epoch"] = fetch(a, epochs.get(a, 0) - 1)
    obs["fetch_unknown_member"] = fetch("nobody", epochs.get(a, 0))
    obs["fetch"] = fetch(a, epochs.get(a, 0))
    obs["fetch_admin"] = fetch(None, -1)

    def describe(groups: list[str]) -> list[dict[str, Any]]:
        out = []
        answered = {g["group_id"]: g for g in w.call(DESCRIBE, 1, {"group_ids": groups, "include_authorized_operations": False})["groups"]}
        for g in (answered[gid] for gid in groups):  # the answer's order follows the coordinator's partitions
            out.append({"error": g["error_code"], "state": g["group_state"], "assigned": g["group_epoch"] == g["assignment_epoch"],
                        "assignor": g["assignor_name"],
                        "members": sorted((m["member_epoch"] == g["assignment_epoch"], m["member_type"], m["subscribed_topic_names"] == [t],
                                           sum(len(x["partitions"]) for x in m["assignment"]["topic_partitions"]),
                                           sum(len(x["partitions"]) for x in m["target_assignment"]["topic_partitions"]))
                                          for m in g["members"])})
        return out

    obs["describe"] = describe([group, missing])
    for v in (5, 6):  # the classic DescribeGroups does not describe consumer groups
        d = w.call(15, v, {"groups": [group], "include_authorized_operations": False})["groups"][0]
        obs[f"classic_describe_v{v}"] = (d["error_code"], d["group_state"], d["protocol_type"], len(d["members"]))
    listed = w.call(LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["consumer"]})["groups"]
    obs["listed"] = [(g["protocol_type"], g["group_state"], g["group_type"]) for g in listed if g["group_id"] == group]
    obs["a_leaves"] = {k: v for k, v in hb(a, epoch=-1, tps=None).items() if k in ("error", "epoch", "assigned")}
    owned.pop(a)
    obs["b_gets_everything"] = converge([b], lambda: len(parts(b)) == PARTITIONS)
    obs["b_leaves"] = {k: v for k, v in hb(b, epoch=-1, tps=None).items() if k in ("error", "epoch", "assigned")}
    obs["describe_empty"] = [{"error": g["error"], "state": g["state"], "members": g["members"]} for g in describe([group])]
    return obs


def test_consumer_group_protocol(conform):
    obs = conform(scenario_consumer_protocol)
    assert obs["join_empty_member_id"] == 42  # INVALID_REQUEST: v1 members bring their own id
    assert obs["a_joins"]["error"] == 0 and obs["a_joins"]["epoch"] == 2 and obs["a_gets_all"] == {"done": True, "overlapped": False}
    assert obs["a_greater_epoch"] == 110 and obs["unknown_member"] == 25  # FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID
    # nothing for b yet: its epoch-3 target assignment is batched (group.consumer.assignment.interval.ms),
    # so b reconciles towards epoch 2's, where it has no partitions
    assert obs["b_joins"] == {"error": 0, "assigned": 0, "epoch": 2}
    assert obs["split"] == {"done": True, "overlapped": False}
    assert obs["commit_older_epoch_own_partition"] == 0 and obs["commit_newer_epoch"] == 113 and obs["commit"] == 0 and obs["fetch"] == {"error": 0, "offsets": [3]}
    assert obs["describe"][0]["state"] == "Stable" and obs["describe"][1]["error"] == 69
    assert obs["b_gets_everything"] == {"done": True, "overlapped": False}
    assert obs["describe_empty"][0]["state"] == "Empty"


def scenario_regex_matches_internal_topics(ctx: Ctx) -> dict[str, Any]:
    """A KIP-848 regex subscription resolves against every topic, internal ones included (Kafka
    4.3.1's TopicRegexResolver does not skip them; franz-go's Test848RegexBrokerResolves relies on
    ``__consumer_offsets`` being assigned), with the regex in the form franz-go sends (non-capturing
    groups, which RE2J accepts). Topic names only: partition counts differ by config."""
    w = ctx.wire()
    t, group = ctx.topic("t"), ctx.group("g")
    w.create_topic(t, partitions=2)
    member, epoch = str(uuid.uuid4()), 0
    # franz-go's form for ConsumeRegex with ConsumeTopics("__consumer_offsets", t): non-capturing
    # groups wrapped in .* (RE2J matches the whole name; Go's MatchString anywhere)
    regex = f".*(?:(?:__consumer_offsets)|(?:{t})).*"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # __consumer_offsets exists once the group's coordinator is found
        fc = w.call(FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [group]})["coordinators"][0]
        if fc["error_code"] not in (14, 15):
            break
        time.sleep(0.2)
    owned: list[dict[str, Any]] = []
    names: set[str] = set()
    errors: list[int] = []
    while time.monotonic() < deadline and t not in names:
        r = w.call(HEARTBEAT, 1, {
            "group_id": group, "member_id": member, "member_epoch": epoch, "instance_id": None, "rack_id": None,
            "rebalance_timeout": 30_000 if epoch == 0 else -1, "server_assignor": None,
            "subscribed_topic_names": None, "subscribed_topic_regex": regex if epoch == 0 else None,
            "topic_partitions": owned})
        if r["error_code"] in (14, 15, 16):  # the coordinator still loading
            time.sleep(0.2)
            continue
        errors.append(r["error_code"])
        if r["error_code"]:
            break
        epoch = r["member_epoch"]
        if r["assignment"] is not None:
            owned = [{"topic_id": x["topic_id"], "partitions": sorted(x["partitions"])} for x in r["assignment"]["topic_partitions"]]
            d = w.call(DESCRIBE, 1, {"group_ids": [group], "include_authorized_operations": False})["groups"][0]
            mine = [m for m in d["members"] if m["member_id"] == member]
            names = {x["topic_name"] for m in mine for x in m["assignment"]["topic_partitions"]}
        time.sleep(0.2)
    d = w.call(DESCRIBE, 1, {"group_ids": [group], "include_authorized_operations": False})["groups"][0]
    w.call(HEARTBEAT, 1, {"group_id": group, "member_id": member, "member_epoch": -1, "instance_id": None, "rack_id": None,
                          "rebalance_timeout": -1, "server_assignor": None, "subscribed_topic_names": None,
                          "subscribed_topic_regex": None, "topic_partitions": None})
    return {"errors": sorted(set(errors)), "assigned_topics": sorted(names),
            "described": [(m["subscribed_topic_regex"], sorted(x["topic_name"] for x in m["assignment"]["topic_partitions"]))
                          for m in d["members"]]}


def test_regex_matches_internal_topics(conform):
    obs = conform(scenario_regex_matches_internal_topics)
    assert obs["errors"] == [0]
    assert sorted(obs["assigned_topics"]) == ["<t>", "__consumer_offsets"]


# --------------------------------------------------------------------------- librdkafka, group.protocol=consumer


def _ck_consumer(ctx: Ctx, group: str, name: str) -> Any:
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": ctx.bootstrap, "group.id": group, "group.protocol": "consumer", "client.id": name,
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    ctx.on_close(c.close)
    return c


def scenario_librdkafka_consumer_protocol(ctx: Ctx) -> dict[str, Any]:
    """Two librdkafka consumers split a topic, consume and commit; one leaves, the other takes
    its partitions over and resumes them at the committed offsets."""
    from tests.conformance.clients import ck_produce

    w = ctx.wire()
    t, group = ctx.topic("t"), ctx.group("g")
    w.create_topic(t, partitions=PARTITIONS)
    cs = {"a": _ck_consumer(ctx, group, "a"), "b": _ck_consumer(ctx, group, "b")}
    for c in cs.values():
        c.subscribe([t])
    got: dict[str, list[tuple[int, int]]] = {"a": [], "b": []}

    def assigned(name: str) -> list[int]:
        return sorted(tp.partition for tp in cs[name].assignment())

    def poll(names: list[str], done: Any, timeout: float = 60.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for n in names:
                for m in cs[n].consume(num_messages=50, timeout=0.05):
                    if m.error() is None:
                        got[n].append((m.partition(), m.offset()))
            if done():
                return True
        return False

    obs: dict[str, Any] = {}
    obs["split"] = poll(["a", "b"], lambda: len(assigned("a")) == len(assigned("b")) == 2)
    # Records only now, so each consumer reads exactly its own partitions.
    ck_produce(ctx.bootstrap, t, [(p, None, f"{p}-{i}".encode()) for p in range(PARTITIONS) for i in range(5)])
    obs["consumed"] = poll(["a", "b"], lambda: len(got["a"]) + len(got["b"]) >= 20)
    obs["disjoint_and_complete"] = sorted(assigned("a") + assigned("b")) == list(range(PARTITIONS))
    a_parts = assigned("a")
    obs["each_read_only_its_own"] = all(p in a_parts for p, _ in got["a"]) and all(p not in a_parts for p, _ in got["b"])
    cs["a"].commit(asynchronous=False)
    cs["b"].commit(asynchronous=False)
    committed = w.offset_fetch(group, t, list(range(PARTITIONS)))
    obs["committed"] = {p: committed[p] for p in sorted(committed)}
    ck_produce(ctx.bootstrap, t, [(p, None, f"{p}-late".encode()) for p in range(PARTITIONS)])
    cs["b"].close()
    got["a"] = []
    obs["a_takes_over"] = poll(["a"], lambda: len(assigned("a")) == PARTITIONS and len(got["a"]) >= PARTITIONS)
    obs["a_resumed_at"] = sorted(set(o for _, o in got["a"]))
    return obs


def test_librdkafka_consumer_protocol(conform):
    obs = conform(scenario_librdkafka_consumer_protocol)
    assert obs["split"] and obs["consumed"] and obs["disjoint_and_complete"] and obs["each_read_only_its_own"]
    assert obs["a_takes_over"] and obs["a_resumed_at"] == [5]


# --------------------------------------------------------------------------- online migration (classic <-> consumer)

JOIN_GROUP, SYNC_GROUP, CLASSIC_HEARTBEAT, LEAVE_GROUP, DESCRIBE_GROUPS = 11, 14, 12, 13, 15


def consumer_subscription(topics: list[str]) -> bytes:
    """A ConsumerProtocolSubscription v0 (what an eager classic consumer such as kafka-python sends)."""
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


def consumer_assignment(assigned: dict[str, list[int]]) -> bytes:
    out = struct.pack(">hi", 0, len(assigned))
    for t, ps in assigned.items():
        out += struct.pack(">h", len(t)) + t.encode() + struct.pack(">i", len(ps)) + b"".join(struct.pack(">i", p) for p in ps)
    return out + struct.pack(">i", -1)


def decode_assignment(data: bytes) -> list[int]:
    if not data:
        return []
    pos = 2
    (n,) = struct.unpack_from(">i", data, pos)
    pos += 4
    out = []
    for _ in range(n):
        (tl,) = struct.unpack_from(">h", data, pos)
        pos += 2 + tl
        (pn,) = struct.unpack_from(">i", data, pos)
        pos += 4
        out += list(struct.unpack_from(f">{pn}i", data, pos))
        pos += 4 * pn
    return sorted(out)


def _groups_tool(ctx: Ctx, *args: str) -> list[list[str]] | None:
    """Kafka 4.3.1's kafka-consumer-groups.sh output as words (None without Java or the tool)."""
    from tests.support import kafka_bin, kafka_tool_missing

    if kafka_tool_missing("kafka-consumer-groups.sh"):
        return None
    run = subprocess.run([str(kafka_bin("kafka-consumer-groups.sh")), "--bootstrap-server", ctx.bootstrap, *args], capture_output=True,
                         text=True, timeout=120, env={**os.environ, "KAFKA_HEAP_OPTS": "-Xmx256m"})
    return [[ctx.names.get(word, word) for word in line.split()] for line in run.stdout.splitlines() if line.strip()]


def scenario_online_migration(ctx: Ctx) -> dict[str, Any]:
    """A classic member holds every partition; a consumer-protocol member joins (the group is upgraded,
    the classic member kept: it rejoins through JoinGroup/SyncGroup and gives half up); the consumer
    member leaves (the group is downgraded to a classic group that rebalances)."""
    w = ctx.wire()
    t, group = ctx.topic("t"), ctx.group("g")
    w.create_topic(t, partitions=PARTITIONS)
    deadline = time.monotonic() + 30
    while w.call(FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [group]})["coordinators"][0]["error_code"] in (14, 15) \
            and time.monotonic() < deadline:
        time.sleep(0.2)
    obs: dict[str, Any] = {}
    sub = consumer_subscription([t])

    def join(member_id: str) -> dict[str, Any]:
        return w.call(JOIN_GROUP, 9, {"group_id": group, "session_timeout": 30000, "rebalance_timeout": 30000, "member_id": member_id,
                                      "group_instance_id": None, "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": sub}],
                                      "reason": None})

    def sync(member_id: str, generation: int, assignments: list[dict[str, Any]]) -> dict[str, Any]:
        return w.call(SYNC_GROUP, 5, {"group_id": group, "generation_id": generation, "member_id": member_id, "group_instance_id": None,
                                      "protocol_type": "consumer", "protocol_name": "range", "assignments": assignments})

    def classic_hb(member_id: str, generation: int) -> int:
        return w.call(CLASSIC_HEARTBEAT, 4, {"group_id": group, "generation_id": generation, "member_id": member_id, "group_instance_id": None})["error_code"]

    def listed() -> list[tuple[str, str, str]]:
        gs = w.call(LIST_GROUPS, 5, {"states_filter": [], "types_filter": []})["groups"]
        return [(g["protocol_type"], g["group_state"], g["group_type"]) for g in gs if g["group_id"] == group]

    first = join("")
    deadline = time.monotonic() + 30
    while first["error_code"] in (14, 15, 16) and time.monotonic() < deadline:  # the offsets partition still loading
        time.sleep(0.2)
        first = join("")
    obs["classic_member_id_required"] = first["error_code"]
    c = first["member_id"]
    deadline = time.monotonic() + 30
    joined = join(c)
    while joined["error_code"] != 0 and time.monotonic() < deadline:  # group.initial.rebalance.delay.ms
        joined = join(c)
    gen = joined["generation_id"]
    obs["classic_joined"] = {"error": joined["error_code"], "leader": joined["leader"] == c, "members": len(joined["members"])}
    synced = sync(c, gen, [{"member_id": c, "assignment": consumer_assignment({t: list(range(PARTITIONS))})}])
    obs["classic_synced"] = {"error": synced["error_code"], "partitions": decode_assignment(synced["assignment"])}
    obs["classic_group_listed"] = listed()

    # a consumer-protocol member joins: the classic group becomes a consumer group
    a = str(uuid.uuid4())
    owned: list[dict[str, Any]] = []
    state = {"epoch": 0}

    def hb(epoch: int | None = None, join_: bool = False) -> dict[str, Any]:
        r = w.call(HEARTBEAT, 1, {"group_id": group, "member_id": a, "member_epoch": state["epoch"] if epoch is None else epoch,
                                  "instance_id": None, "rack_id": None, "rebalance_timeout": 30000 if join_ else -1,
                                  "subscribed_topic_names": [t] if join_ else None, "subscribed_topic_regex": None, "server_assignor": None,
                                  "topic_partitions": owned if epoch != -1 else None})
        if r["error_code"] == 0 and epoch is None:
            state["epoch"] = r["member_epoch"]
            if r["assignment"] is not None:
                owned[:] = [{"topic_id": x["topic_id"], "partitions": sorted(x["partitions"])} for x in r["assignment"]["topic_partitions"]]
        return r

    up = hb(join_=True)
    obs["consumer_joins"] = {"error": up["error_code"], "epoch_after_generation": up["member_epoch"] - gen,
                             "assigned": sum(len(x["partitions"]) for x in up["assignment"]["topic_partitions"]) if up["assignment"] else None}
    obs["upgraded_listed"] = listed()
    d = w.call(DESCRIBE, 1, {"group_ids": [group], "include_authorized_operations": False})["groups"][0]
    obs["upgraded_described"] = {"error": d["error_code"], "epoch_after_generation": d["group_epoch"] - gen,
                                 "members": sorted((m["member_type"], m["member_id"] == c) for m in d["members"]),
                                 "classic_member_epoch": [m["member_epoch"] - gen for m in d["members"] if m["member_id"] == c]}
    classic_describe = w.call(DESCRIBE_GROUPS, 6, {"groups": [group], "include_authorized_operations": False})["groups"][0]
    obs["classic_describe_after_upgrade"] = classic_describe["error_code"]

    # the classic member is asked to rejoin; it rejoins and syncs, then the consumer member gets the rest
    hb_error = classic_hb(c, gen)
    deadline = time.monotonic() + 30
    while hb_error == 0 and time.monotonic() < deadline:  # the new target may be batched
        time.sleep(0.2)
        hb(); hb_error = classic_hb(c, gen)  # noqa: E702
    obs["classic_heartbeat_after_upgrade"] = hb_error
    rejoined = join(c)
    cgen = rejoined["generation_id"]
    obs["classic_rejoins"] = {"error": rejoined["error_code"], "protocol": (rejoined["protocol_type"], rejoined["protocol_name"]),
                              "leader": rejoined["leader"], "members": len(rejoined["members"]), "same_id": rejoined["member_id"] == c}
    resynced = sync(c, cgen, [])
    c_parts = decode_assignment(resynced["assignment"])
    obs["classic_resynced"] = {"error": resynced["error_code"], "count": len(c_parts)}
    a_parts: list[int] = []
    deadline = time.monotonic() + 30
    while len(a_parts) + len(c_parts) < PARTITIONS and time.monotonic() < deadline:
        hb()
        a_parts = [p for x in owned for p in x["partitions"]]
        time.sleep(0.1)
    obs["split"] = {"disjoint": not set(a_parts) & set(c_parts), "complete": sorted(a_parts + c_parts) == list(range(PARTITIONS))}
    obs["classic_heartbeat_stable"] = classic_hb(c, cgen)
    # Kafka 4.3.1's kafka-consumer-groups.sh on the mixed group: its state and members (the partition counts)
    described = _groups_tool(ctx, "--describe", "--group", group, "--state")
    obs["tool_state"] = None if described is None else [row[:1] + row[-3:] for row in described]
    members = _groups_tool(ctx, "--describe", "--group", group, "--members")
    obs["tool_members"] = None if members is None else [members[0], sorted(row[-1] for row in members[1:])]
    hb()
    obs["classic_heartbeat_after_tools"] = classic_hb(c, cgen)
    obs["classic_sync_wrong_generation"] = sync(c, cgen + 7, [])["error_code"]

    # the consumer member leaves: the group is downgraded to a classic group, which rebalances
    left = hb(epoch=-1)
    obs["consumer_leaves"] = left["error_code"]
    obs["downgraded_listed"] = listed()
    d = w.call(DESCRIBE, 1, {"group_ids": [group], "include_authorized_operations": False})["groups"][0]
    obs["consumer_describe_after_downgrade"] = d["error_code"]
    obs["classic_heartbeat_after_downgrade"] = classic_hb(c, cgen)
    again = join(c)
    obs["classic_rejoins_classic_group"] = {"error": again["error_code"], "leader": again["leader"] == c, "members": len(again["members"]),
                                            "generation_after": again["generation_id"] - cgen}
    final = sync(c, again["generation_id"], [{"member_id": c, "assignment": consumer_assignment({t: list(range(PARTITIONS))})}])
    obs["classic_synced_again"] = {"error": final["error_code"], "partitions": decode_assignment(final["assignment"])}
    obs["final_listed"] = listed()
    w.call(LEAVE_GROUP, 5, {"group_id": group, "members": [{"member_id": c, "group_instance_id": None, "reason": None}]})
    return obs


def test_online_migration(conform):
    obs = conform(scenario_online_migration)
    assert obs["classic_member_id_required"] == 79 and obs["classic_synced"] == {"error": 0, "partitions": [0, 1, 2, 3]}
    assert obs["upgraded_listed"] == [("consumer", "Reconciling", "consumer")] or obs["upgraded_listed"][0][2] == "consumer"
    assert obs["classic_heartbeat_after_upgrade"] == 27  # REBALANCE_IN_PROGRESS
    assert obs["classic_rejoins"]["error"] == 0 and obs["classic_rejoins"]["members"] == 0
    assert obs["split"] == {"disjoint": True, "complete": True}
    assert obs["downgraded_listed"][0][2] == "classic"
    assert obs["classic_synced_again"] == {"error": 0, "partitions": [0, 1, 2, 3]}
    if obs["tool_state"] is not None:
        assert obs["tool_state"][1] == ["g", "uniform", "Stable", "2"]  # a consumer group of two members
        assert obs["tool_members"][1] == ["2", "2"]


# --------------------------------------------------------------------------- group configs of a consumer group


def _configs_tool(ctx: Ctx, group: str, *args: str) -> list[str] | None:
    """Kafka 4.3.1's kafka-configs.sh --entity-type groups output (None without Java or the tool)."""
    from tests.support import kafka_bin, kafka_tool_missing

    if kafka_tool_missing("kafka-configs.sh"):
        return None
    run = subprocess.run([str(kafka_bin("kafka-configs.sh")), "--bootstrap-server", ctx.bootstrap, "--entity-type", "groups",
                          "--entity-name", group, *args], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "KAFKA_HEAP_OPTS": "-Xmx256m"})
    lines = run.stdout.splitlines() + [e for e in run.stderr.splitlines() if e.startswith("Caused by")]
    return [" ".join(ctx.names.get(w, w) for w in line.split()) for line in lines if line.strip()]


def scenario_consumer_group_configs(ctx: Ctx) -> dict[str, Any]:
    """kafka-configs.sh sets a consumer group's consumer.heartbeat.interval.ms: the next raw
    ConsumerGroupHeartbeat answers it; values outside the broker's bounds are refused; deleting it
    brings the broker's group.consumer.heartbeat.interval.ms back."""
    w = ctx.wire()
    t, group = ctx.topic("t"), ctx.group("g")
    w.create_topic(t, partitions=1)
    obs: dict[str, Any] = {}
    member, epoch = str(uuid.uuid4()), 0

    def hb(join: bool = False) -> dict[str, Any]:
        nonlocal epoch
        r = w.call(HEARTBEAT, 1, {
            "group_id": group, "member_id": member, "member_epoch": epoch, "instance_id": None, "rack_id": None,
            "rebalance_timeout": 30_000 if join else -1, "subscribed_topic_names": [t] if join else None,
            "subscribed_topic_regex": None, "server_assignor": None, "topic_partitions": [] if join else None,
        })
        if r["error_code"] == 0:
            epoch = r["member_epoch"]
        return {"error": r["error_code"], "interval": r["heartbeat_interval"]}

    deadline = time.monotonic() + 30
    while True:  # FindCoordinator makes a fresh Kafka create __consumer_offsets
        fc = w.call(FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [group]})["coordinators"][0]
        if fc["error_code"] not in (14, 15) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    while (first := hb(join=True))["error"] in (14, 15, 16) and time.monotonic() < deadline:
        time.sleep(0.2)  # the group's partition still loading
    obs["joined"] = first
    obs["set"] = _configs_tool(ctx, group, "--alter", "--add-config", "consumer.heartbeat.interval.ms=7000")
    obs["after_set"] = hb()
    obs["below_min"] = _configs_tool(ctx, group, "--alter", "--add-config", "consumer.heartbeat.interval.ms=4000")
    hb()  # the member stays alive however long the tools take to start (session timeout 45 s)
    obs["above_session"] = _configs_tool(ctx, group, "--alter", "--add-config", "consumer.heartbeat.interval.ms=15000")
    hb()
    obs["set_both"] = _configs_tool(ctx, group, "--alter", "--add-config", "consumer.session.timeout.ms=50000,consumer.heartbeat.interval.ms=12000")
    obs["after_set_both"] = hb()
    obs["described"] = _configs_tool(ctx, group, "--describe")
    obs["deleted"] = _configs_tool(ctx, group, "--alter", "--delete-config", "consumer.heartbeat.interval.ms")
    obs["after_delete"] = hb()
    r = w.call(HEARTBEAT, 1, {"group_id": group, "member_id": member, "member_epoch": -1, "topic_partitions": None})
    obs["left"] = {"error": r["error_code"], "interval": r["heartbeat_interval"]}
    return obs


def test_consumer_group_configs(conform):
    obs = conform(scenario_consumer_group_configs)
    assert obs["joined"] == {"error": 0, "interval": 5000}
    assert obs["after_set"] == {"error": 0, "interval": 7000}
    assert obs["after_set_both"] == {"error": 0, "interval": 12000}
    assert obs["after_delete"] == {"error": 0, "interval": 5000}


# --------------------------------------------------------------------------- downgrade by a replacing static member


def scenario_static_classic_member_replaces_the_last_consumer_member(ctx: Ctx) -> dict[str, Any]:
    """A consumer-protocol static member (instance i1) and a classic member share a consumer group;
    a static member using the classic protocol joins with instance i1: the group becomes a classic
    group (Kafka's validateOnlineDowngradeWithReplacedMember), the joining member takes i1's
    partitions without a rebalance."""
    w = ctx.wire()
    t, group = ctx.topic("t"), ctx.group("g")
    w.create_topic(t, partitions=PARTITIONS)
    deadline = time.monotonic() + 30
    while w.call(FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [group]})["coordinators"][0]["error_code"] in (14, 15) \
            and time.monotonic() < deadline:
        time.sleep(0.2)
    obs: dict[str, Any] = {}
    sub = consumer_subscription([t])
    a, state, owned = str(uuid.uuid4()), {"epoch": 0}, []

    def hb(join_: bool = False) -> dict[str, Any]:
        r = w.call(HEARTBEAT, 1, {"group_id": group, "member_id": a, "member_epoch": state["epoch"], "instance_id": "i1", "rack_id": None,
                                  "rebalance_timeout": 30000 if join_ else -1, "subscribed_topic_names": [t] if join_ else None,
                                  "subscribed_topic_regex": None, "server_assignor": None, "topic_partitions": owned})
        if r["error_code"] == 0:
            state["epoch"] = r["member_epoch"]
            if r["assignment"] is not None:
                owned[:] = [{"topic_id": x["topic_id"], "partitions": sorted(x["partitions"])} for x in r["assignment"]["topic_partitions"]]
        return r

    def join(member_id: str, instance: str | None) -> dict[str, Any]:
        return w.call(JOIN_GROUP, 9, {"group_id": group, "session_timeout": 30000, "rebalance_timeout": 30000, "member_id": member_id,
                                      "group_instance_id": instance, "protocol_type": "consumer",
                                      "protocols": [{"name": "range", "metadata": sub}], "reason": None})

    def sync(member_id: str, generation: int, instance: str | None) -> dict[str, Any]:
        return w.call(SYNC_GROUP, 5, {"group_id": group, "generation_id": generation, "member_id": member_id, "group_instance_id": instance,
                                      "protocol_type": "consumer", "protocol_name": "range", "assignments": []})

    def listed() -> list[tuple[str, str, str]]:
        gs = w.call(LIST_GROUPS, 5, {"states_filter": [], "types_filter": []})["groups"]
        return [(g["protocol_type"], g["group_state"], g["group_type"]) for g in gs if g["group_id"] == group]

    first = hb(join_=True)
    while first["error_code"] in (14, 15, 16) and time.monotonic() < deadline:
        time.sleep(0.2)
        first = hb(join_=True)
    obs["a_joins"] = first["error_code"]
    c = join("", None)["member_id"]
    joined = join(c, None)
    gen = {"c": joined["generation_id"]}
    obs["classic_joins"] = joined["error_code"]
    sync(c, gen["c"], None)
    # heartbeat both until the consumer group is stable
    stable = False
    deadline = time.monotonic() + 30
    while not stable and time.monotonic() < deadline:
        hb()
        if w.call(CLASSIC_HEARTBEAT, 4, {"group_id": group, "generation_id": gen["c"], "member_id": c,
                                         "group_instance_id": None})["error_code"] == 27:
            again = join(c, None)
            gen["c"] = again["generation_id"]
            sync(c, gen["c"], None)
        d = w.call(DESCRIBE, 1, {"group_ids": [group], "include_authorized_operations": False})["groups"][0]
        stable = d["group_state"] == "Stable"
        time.sleep(0.2)
    obs["stable"] = stable
    obs["consumer_group_listed"] = listed()
    a_parts = sorted(p for x in owned for p in x["partitions"])

    s = join("", "i1")  # a static member: no MEMBER_ID_REQUIRED round
    obs["static_classic_joins"] = {"error": s["error_code"], "protocol": (s["protocol_type"], s["protocol_name"]),
                                   "generation_is_group_epoch": s["generation_id"] == state["epoch"], "members": len(s["members"])}
    obs["downgraded_listed"] = listed()
    synced = sync(s["member_id"], s["generation_id"], "i1")
    obs["static_classic_synced"] = {"error": synced["error_code"], "takes_i1s_partitions": decode_assignment(synced["assignment"]) == a_parts}
    obs["classic_member_heartbeat"] = w.call(CLASSIC_HEARTBEAT, 4, {"group_id": group, "generation_id": gen["c"], "member_id": c,
                                                                  "group_instance_id": None})["error_code"]
    obs["replaced_member_heartbeat"] = hb()["error_code"]
    w.call(LEAVE_GROUP, 5, {"group_id": group, "members": [{"member_id": c, "group_instance_id": None, "reason": None},
                                                           {"member_id": s["member_id"], "group_instance_id": "i1", "reason": None}]})
    return obs


def test_static_classic_member_replaces_the_last_consumer_member(conform):
    obs = conform(scenario_static_classic_member_replaces_the_last_consumer_member)
    assert obs["stable"] and obs["consumer_group_listed"][0][2] == "consumer"
    assert obs["static_classic_joins"]["error"] == 0
    assert obs["downgraded_listed"][0][2] == "classic"
    assert obs["static_classic_synced"] == {"error": 0, "takes_i1s_partitions": True}
