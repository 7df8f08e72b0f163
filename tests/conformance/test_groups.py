"""Conformance: consumer group rebalances with librdkafka (classic protocol, range assignor).

Two consumers in one group split a four-partition topic two and two; each consumes and commits
its partitions; one leaves (LeaveGroup on close) and the other is assigned all four and resumes
the leaver's partitions at its committed offsets. The member ids (random) decide which consumer
gets which partitions, so the observation records the shape of the split, not the partitions.
``CONFORMANCE_RDKAFKA_DEBUG=cgrp,...`` turns on librdkafka's debug log for these consumers.
"""

from __future__ import annotations

import os
import time
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from tests.conformance.clients import ck_produce
from tests.conformance.harness import Ctx
from tests.conformance.wire import Wire

PARTITIONS = 4
PER_PARTITION = 5
DEADLINE_S = 40.0


def consumer(ctx: Ctx, group: str, name: str) -> Consumer:
    c = Consumer({
        "bootstrap.servers": ctx.bootstrap, "group.id": group, "client.id": name,
        "enable.auto.commit": False, "auto.offset.reset": "earliest",
        "partition.assignment.strategy": "range",
        "session.timeout.ms": 10_000, "heartbeat.interval.ms": 250, "max.poll.interval.ms": 60_000,
        **({"debug": os.environ["CONFORMANCE_RDKAFKA_DEBUG"]} if os.environ.get("CONFORMANCE_RDKAFKA_DEBUG") else {}),
    })
    ctx.on_close(c.close)
    return c


def poll_until(consumers: dict[str, Consumer], done, got: dict[str, list[tuple[int, int]]], timeout: float = DEADLINE_S) -> bool:
    """Poll every consumer in turn (they must all poll to rebalance) until ``done()``; bounded."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for name, c in consumers.items():
            for m in c.consume(num_messages=50, timeout=0.05):
                if m.error() is None:
                    got[name].append((m.partition(), m.offset()))
        if done():
            return True
    return False


def assigned(c: Consumer) -> list[int]:
    return sorted(tp.partition for tp in c.assignment())


def fetched_all(c: Consumer, topic: str) -> bool:
    """Whether ``c`` has had a Fetch answer for every partition (cached watermarks): each
    partition's start-offset lookup (ListOffsets) has then been answered too."""
    return all(c.get_watermark_offsets(TopicPartition(topic, p), cached=True)[0] >= 0 for p in range(PARTITIONS))


def group_view(w: Wire, group: str) -> dict[str, Any]:
    g = w.describe_group(group)
    return {"error": g["error_code"], "state": g["group_state"], "protocol_type": g["protocol_type"],
            "protocol": g["protocol_data"], "members": len(g["members"])}


def scenario_rebalance(ctx: Ctx) -> dict[str, Any]:
    w = ctx.wire()
    t, group = ctx.topic("t"), ctx.group("g")
    w.create_topic(t, partitions=PARTITIONS)
    obs: dict[str, Any] = {}
    a = consumer(ctx, group, "a")
    a.subscribe([t])
    got: dict[str, list[tuple[int, int]]] = {"a": [], "b": []}
    obs["a_alone_gets_all"] = poll_until({"a": a}, lambda: len(assigned(a)) == PARTITIONS, got)
    # b joins only once a is fetching all four partitions. librdkafka looks their start offsets up
    # (ListOffsets) one by one, and one partition's first Fetch can go out before the others'
    # lookups, which then wait behind its long poll (the broker answers a connection's requests in
    # order). If b joins meanwhile, those answers arrive in the next generation, are dropped as
    # outdated and arm an offset-query retry timer that librdkafka does not cancel when the new
    # lookup succeeds, nor when the partition is stopped while active: it fires ~500 ms later, in
    # whatever generation, and resets the partition to its start (rdkafka_partition.c
    # rd_kafka_toppar_handle_Offset / rd_kafka_offset_query_tmr_cb). Apache Kafka shows it too
    # (3 of 300 runs; kafka-sidecar 5 of 200: its faster answers open the window more often).
    obs["a_fetching_all"] = poll_until({"a": a}, lambda: fetched_all(a, t), got)
    b = consumer(ctx, group, "b")
    b.subscribe([t])
    both = {"a": a, "b": b}
    split = poll_until(both, lambda: len(assigned(a)) == 2 and len(assigned(b)) == 2, got)
    obs["split_two_and_two"] = split
    obs["split"] = {"sizes": sorted([len(assigned(a)), len(assigned(b))]),
                    "disjoint_and_complete": sorted(assigned(a) + assigned(b)) == list(range(PARTITIONS))}
    a_parts, b_parts = assigned(a), assigned(b)
    # Records only now, so each consumer reads exactly its own partitions.
    ck_produce(ctx.bootstrap, t, [(p, None, f"first-{p}-{i}".encode()) for p in range(PARTITIONS) for i in range(PER_PARTITION)])
    got = {"a": [], "b": []}
    obs["each_consumed_its_partitions"] = poll_until(both, lambda: len(got["a"]) + len(got["b"]) >= PARTITIONS * PER_PARTITION, got)
    obs["consumed_while_two"] = {
        "a_only_own": all(p in a_parts for p, _ in got["a"]), "b_only_own": all(p in b_parts for p, _ in got["b"]),
        "count": len(got["a"]) + len(got["b"]),
    }
    a.commit(asynchronous=False)
    b.commit(asynchronous=False)
    obs["group_while_two"] = group_view(w, group)
    committed = w.offset_fetch(group, t, list(range(PARTITIONS)))
    obs["committed_while_two"] = {p: committed[p] for p in sorted(committed)}

    b.close()  # LeaveGroup: a is given b's partitions at once
    ck_produce(ctx.bootstrap, t, [(p, None, f"second-{p}-{i}".encode()) for p in range(PARTITIONS) for i in range(3)])
    got = {"a": [], "b": []}
    obs["a_gets_all_after_leave"] = poll_until({"a": a}, lambda: len(assigned(a)) == PARTITIONS and len(got["a"]) >= 3 * PARTITIONS, got)
    obs["a_after_leave"] = {
        "from_b": sorted({(o) for p, o in got["a"] if p in b_parts}),
        "own": sorted({(o) for p, o in got["a"] if p in a_parts}),
    }
    a.commit(asynchronous=False)
    obs["group_after_leave"] = group_view(w, group)
    committed = w.offset_fetch(group, t, list(range(PARTITIONS)))
    obs["committed_after_leave"] = {p: committed[p] for p in sorted(committed)}
    a.close()
    obs["group_after_all_left"] = group_view(w, group)
    return obs


def test_group_rebalance(conform):
    obs = conform(scenario_rebalance)
    assert obs["a_alone_gets_all"] and obs["a_fetching_all"] and obs["split_two_and_two"]
    assert obs["split"] == {"sizes": [2, 2], "disjoint_and_complete": True}
    assert obs["a_gets_all_after_leave"]
    assert obs["a_after_leave"] == {"from_b": [5, 6, 7], "own": [5, 6, 7]}  # resumed at the committed offsets
    assert obs["committed_after_leave"] == {p: [8, 0] for p in range(PARTITIONS)}
    assert obs["group_after_all_left"]["state"] == "Empty"


# --------------------------------------------------------------------------- the group protocol, raw

JOIN, HEARTBEAT, LEAVE, SYNC, OFFSET_COMMIT, FIND_COORDINATOR = 11, 12, 13, 14, 8, 10
PROTOCOL_TYPE = "conformance"  # not "consumer": the coordinator treats the metadata as opaque bytes


def scenario_group_protocol(ctx: Ctx) -> dict[str, Any]:
    w = ctx.wire()
    t, group, missing = ctx.topic("t"), ctx.group("g"), ctx.group("missing")
    w.create_topic(t)
    obs: dict[str, Any] = {}

    deadline = time.monotonic() + 30
    while True:  # a fresh Kafka creates __consumer_offsets first: COORDINATOR_NOT_AVAILABLE meanwhile
        fc = w.call(FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [group]})["coordinators"][0]
        if fc["error_code"] not in (14, 15) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    obs["find_coordinator"] = {"error": fc["error_code"], "node_is_broker": fc["node_id"] == ctx.target.node_id}

    def join(member_id: str = "", session_ms: int = 10_000, protocol_type: str = PROTOCOL_TYPE) -> dict[str, Any]:
        r = w.call(JOIN, 5, {"group_id": group, "session_timeout": session_ms, "rebalance_timeout": 10_000,
                             "member_id": member_id, "group_instance_id": None, "protocol_type": protocol_type,
                             "protocols": [{"name": "p1", "metadata": b"meta"}]})
        return r

    def heartbeat(generation: int, member_id: str) -> int:
        return w.call(HEARTBEAT, 4, {"group_id": group, "generation_id": generation, "member_id": member_id,
                                     "group_instance_id": None})["error_code"]

    def sync(generation: int, member_id: str, assignment: bytes) -> dict[str, Any]:
        r = w.call(SYNC, 4, {"group_id": group, "generation_id": generation, "member_id": member_id, "group_instance_id": None,
                             "assignments": [{"member_id": member_id, "assignment": assignment}]})
        return {"error": r["error_code"], "assignment": r["assignment"]}

    def commit(generation: int, member_id: str, offset: int) -> int:
        r = w.call(OFFSET_COMMIT, 8, {"group_id": group, "generation_id_or_member_epoch": generation, "member_id": member_id,
                                      "group_instance_id": None, "topics": [{"name": t, "partitions": [
                                          {"partition_index": 0, "committed_offset": offset, "committed_leader_epoch": -1,
                                           "committed_metadata": "m"}]}]})
        return r["topics"][0]["partitions"][0]["error_code"]

    obs["session_timeout_too_small"] = join(session_ms=1000)["error_code"]
    first = join()
    member = first["member_id"]
    obs["join_without_member_id"] = {"error": first["error_code"], "member_id_given": bool(member)}
    j = join(member)
    gen = j["generation_id"]
    obs["join"] = {"error": j["error_code"], "generation": gen, "protocol": j["protocol_name"],
                   "leader_is_me": j["leader"] == member, "members": [(m["member_id"] == member, m["metadata"]) for m in j["members"]]}
    obs["heartbeat_before_sync"] = heartbeat(gen, member)
    obs["sync_wrong_generation"] = sync(gen + 1, member, b"x")
    obs["sync_unknown_member"] = sync(gen, "nobody", b"x")
    obs["sync"] = sync(gen, member, b"assignment-bytes")
    obs["heartbeat"] = heartbeat(gen, member)
    obs["heartbeat_wrong_generation"] = heartbeat(gen + 1, member)
    obs["heartbeat_unknown_member"] = heartbeat(gen, "nobody")
    obs["join_other_protocol_type"] = join(protocol_type="other")["error_code"]
    obs["commit"] = commit(gen, member, 7)
    obs["commit_wrong_generation"] = commit(gen + 5, member, 8)
    obs["commit_unknown_member"] = commit(gen, "nobody", 9)
    obs["offset_fetch"] = w.offset_fetch(group, t, [0])
    obs["describe_stable"] = group_view(w, group)
    leave = w.call(LEAVE, 4, {"group_id": group, "members": [{"member_id": member, "group_instance_id": None},
                                                             {"member_id": "nobody", "group_instance_id": None}]})
    obs["leave"] = {"error": leave["error_code"], "members": sorted((m["member_id"] == member, m["error_code"]) for m in leave["members"])}
    obs["describe_after_leave"] = group_view(w, group)
    obs["describe_unknown_group"] = group_view(w, missing)
    obs["offset_fetch_unknown_group"] = w.offset_fetch(missing, t, [0])
    return obs


def test_group_protocol_errors(conform):
    obs = conform(scenario_group_protocol)
    assert obs["join_without_member_id"] == {"error": 79, "member_id_given": True}  # MEMBER_ID_REQUIRED
    assert obs["join"]["error"] == 0 and obs["join"]["leader_is_me"]
    assert obs["sync"] == {"error": 0, "assignment": b"assignment-bytes"}
    assert obs["heartbeat_unknown_member"] == 25  # UNKNOWN_MEMBER_ID
    assert obs["describe_after_leave"]["state"] == "Empty"
