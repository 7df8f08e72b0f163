"""Share sessions and acknowledgements (KIP-932) over raw ShareFetch/ShareAcknowledge, side by side
with Apache Kafka 4.3.1; each scenario is what an outside client suite hit:

- the first ShareFetch of a session answers with the first share-partition loaded that has
  records, not all of them (librdkafka 0179 do_test_destroy_with_explicit_ack);
- a partition named both in ``topics`` (to carry acknowledgements) and in
  ``forgotten_topics_data`` leaves the session (franz-go TestShareGroupETL);
- acknowledgements for a deleted topic's partition get UNKNOWN_TOPIC_ID in ShareAcknowledge
  (librdkafka 0176 do_test_commit_sync_after_topic_deletion, 0181 do_test_topic_delete_ack),
  and a ShareFetch whose answer would name the deleted topic fails with UNKNOWN_SERVER_ERROR;
- after the member left its group, ShareAcknowledge and ShareFetch with the final epoch (-1)
  still apply the acknowledgements, then close the session (librdkafka 0178
  do_test_close_with_acknowledge).
"""

from __future__ import annotations

import time
from typing import Any

from tests.conformance.harness import Ctx, wait_for
from tests.conformance.wire import Wire, batch

ACCEPT, RELEASE = 1, 2


def _wait_coordinator(w: Wire, group: str) -> None:
    for _ in range(120):  # a freshly started Kafka needs its coordinators loaded first
        if w.call(10, 4, {"key_type": 0, "coordinator_keys": [group]})["coordinators"][0]["error_code"] == 0:
            return
        time.sleep(0.5)


def _earliest(w: Wire, group: str) -> None:
    configs = [{"name": "share.auto.offset.reset", "config_operation": 0, "value": "earliest"}]
    body = w.call(44, 1, {"resources": [{"resource_type": 32, "resource_name": group, "configs": configs}], "validate_only": False})
    assert body["responses"][0]["error_code"] == 0, body


def _heartbeat(w: Wire, group: str, member: str, epoch: int, topics: list[str] | None = None) -> dict[str, Any]:
    return w.call(76, 1, {"group_id": group, "member_id": member, "member_epoch": epoch, "rack_id": None,
                          "subscribed_topic_names": topics})


def _join(w: Wire, group: str, member: str, topics: list[str], partitions: int) -> int:
    """Join and heartbeat until all ``partitions`` are assigned (they are initialized first);
    the member epoch."""
    answer = _heartbeat(w, group, member, 0, topics)
    for _ in range(60):  # a fresh Kafka's group coordinator may still be loading its partition
        if answer["error_code"] not in (14, 15, 16):
            break
        time.sleep(0.5)
        answer = _heartbeat(w, group, member, 0, topics)
    assert answer["error_code"] == 0, answer
    epoch = answer["member_epoch"]
    for _ in range(40):
        a = answer.get("assignment")
        if a is not None and sum(len(tp["partitions"]) for tp in a["topic_partitions"]) == partitions:
            return epoch
        time.sleep(1.2)  # past share.assignment.interval.ms (1000)
        answer = _heartbeat(w, group, member, epoch)
        assert answer["error_code"] == 0, answer
        epoch = answer["member_epoch"]
    raise AssertionError(f"{member} never got its {partitions} partitions")


def _fetch(w: Wire, group: str, member: str, epoch: int, topics: dict[Any, dict[int, list[tuple[int, int, int]]]],
           forget: dict[Any, list[int]] | None = None, max_wait: int = 3000) -> dict[str, Any]:
    """ShareFetch v1: ``topics`` {topic id: {partition: [(first, last, type)]}}."""
    return w.call(78, 1, {
        "group_id": group, "member_id": member, "share_session_epoch": epoch, "max_wait": max_wait, "min_bytes": 1,
        "max_bytes": 1 << 20, "max_records": 500, "batch_size": 500,
        "topics": [{"topic_id": t, "partitions": [{"partition_index": p, "acknowledgement_batches": [
            {"first_offset": f, "last_offset": last, "acknowledge_types": [k]} for f, last, k in acks]} for p, acks in ps.items()]}
            for t, ps in topics.items()],
        "forgotten_topics_data": [{"topic_id": t, "partitions": ps} for t, ps in (forget or {}).items()]})


def _acknowledge(w: Wire, group: str, member: str, epoch: int, topics: dict[Any, dict[int, list[tuple[int, int, int]]]]) -> dict[str, Any]:
    return w.call(79, 1, {"group_id": group, "member_id": member, "share_session_epoch": epoch, "topics": [
        {"topic_id": t, "partitions": [{"partition_index": p, "acknowledgement_batches": [
            {"first_offset": f, "last_offset": last, "acknowledge_types": [k]} for f, last, k in acks]} for p, acks in ps.items()]}
        for t, ps in topics.items()]})


def _view(body: dict[str, Any], names: dict[Any, str] | None = None) -> dict[str, Any]:
    """An answer without topic ids: top-level error, then per (topic, partition): error,
    acknowledgement error, acquired ranges."""
    parts = []
    for t in body["responses"]:
        name = (names or {}).get(t["topic_id"], "t")
        for p in t["partitions"]:
            parts.append([name, p["partition_index"], p["error_code"], p.get("acknowledge_error_code"),
                          [(a["first_offset"], a["last_offset"], a["delivery_count"]) for a in p.get("acquired_records", [])]])
    return {"error": body["error_code"], "partitions": sorted(parts)}


def _acquired(body: dict[str, Any]) -> dict[int, list[tuple[int, int]]]:
    out: dict[int, list[tuple[int, int]]] = {}
    for t in body["responses"]:
        for p in t["partitions"]:
            for a in p.get("acquired_records", []):
                out.setdefault(p["partition_index"], []).append((a["first_offset"], a["last_offset"]))
    return out


def _accept_all(acquired: dict[int, list[tuple[int, int]]]) -> dict[int, list[tuple[int, int, int]]]:
    return {p: [(f, last, ACCEPT) for f, last in ranges] for p, ranges in acquired.items()}


def _produce(w: Wire, topic: str, partition: int, count: int, per_batch: int = 10) -> None:
    for start in range(0, count, per_batch):
        values = [b"v%d" % i for i in range(start, min(count, start + per_batch))]
        assert w.produce(topic, batch(values), partition=partition)["error"] == 0


def _setup(ctx: Ctx, logical: str, partitions: int, per_partition: int) -> tuple[Wire, str, str, Any]:
    w = ctx.wire()
    topic, group = ctx.topic(logical), ctx.group("g" + logical)
    w.create_topic(topic, partitions=partitions)
    topic_id = w.metadata([topic])["topics"][0]["topic_id"]
    for p in range(partitions):
        _produce(w, topic, p, per_partition)
    _wait_coordinator(w, group)
    _earliest(w, group)
    return w, topic, group, topic_id


# ---- the first answer of a session: the first share-partition loaded ---------------------------


def scenario_share_fetch_loading(ctx: Ctx) -> dict[str, Any]:
    """2 partitions x 50 records, nothing fetched before: the first ShareFetch answers with one
    partition's 50 records (its share-partition loaded first), the next with the other's; once
    both are loaded one ShareFetch carries both."""
    w, topic, group, tid = _setup(ctx, "load", 2, 50)
    _join(w, group, "m", [topic], 2)
    obs: dict[str, Any] = {}
    first = _fetch(w, group, "m", 0, {tid: {0: [], 1: []}})
    got = _acquired(first)
    obs["first"] = sorted(sum(b - a + 1 for a, b in r) for r in got.values())
    obs["first_entries"] = sorted((p[2], len(p[4])) for p in _view(first)["partitions"])
    second = _fetch(w, group, "m", 1, {tid: _accept_all(got)})
    got2 = _acquired(second)
    obs["second"] = sorted(sum(b - a + 1 for a, b in r) for r in got2.values())
    obs["second_ack_errors"] = sorted(p[3] for p in _view(second)["partitions"])
    obs["both_partitions_seen"] = sorted(set(got) | set(got2))
    for p in (0, 1):
        _produce(w, topic, p, 10)
    third = _fetch(w, group, "m", 2, {tid: _accept_all(got2)})
    obs["third"] = sorted((p, sum(b - a + 1 for a, b in r)) for p, r in _acquired(third).items())
    return obs


def test_share_fetch_loading(conform):
    obs = conform(scenario_share_fetch_loading)
    assert obs["first"] == [50] and obs["second"] == [50]
    assert obs["both_partitions_seen"] == [0, 1]
    assert obs["third"] == [[0, 10], [1, 10]]


# ---- the session update: added first, then forgotten ------------------------------------------


def scenario_share_session_forget_order(ctx: Ctx) -> dict[str, Any]:
    """A ShareFetch names partition 0 in ``topics`` (its acknowledgements) and in
    ``forgotten_topics_data``: the acknowledgements apply and 0 leaves the session, so records
    appended to it later are not in the session's answers."""
    w, topic, group, tid = _setup(ctx, "forget", 2, 5)
    _join(w, group, "m", [topic], 2)
    obs: dict[str, Any] = {}
    got: dict[int, list[tuple[int, int]]] = {}
    epoch = 0
    for _ in range(4):  # both partitions' records (one per answer while they load)
        body = _fetch(w, group, "m", epoch, {tid: {0: [], 1: []}} if epoch == 0 else {tid: {}}, max_wait=2000)
        epoch += 1
        for p, r in _acquired(body).items():
            got.setdefault(p, []).extend(r)
        if len(got) == 2:
            break
    obs["acquired"] = sorted(got.items())
    body = _fetch(w, group, "m", epoch, {tid: {0: [(f, last, ACCEPT) for f, last in got[0]]}}, forget={tid: [0]}, max_wait=500)
    epoch += 1
    obs["ack_and_forget"] = _view(body)
    for p in (0, 1):
        _produce(w, topic, p, 3)
    body = _fetch(w, group, "m", epoch, {tid: {1: [(f, last, ACCEPT) for f, last in got[1]]}}, max_wait=2000)
    epoch += 1
    obs["after"] = _view(body)
    offsets = w.call(90, 1, {"groups": [{"group_id": group, "topics": [{"topic_name": topic, "partitions": [0, 1]}]}]})
    obs["start_offsets"] = sorted((p["partition_index"], p["start_offset"]) for t in offsets["groups"][0]["topics"] for p in t["partitions"])
    return obs


def test_share_session_forget_order(conform):
    obs = conform(scenario_share_session_forget_order)
    assert [p[:2] for p in obs["after"]["partitions"]] == [["t", 1]], obs["after"]
    assert obs["after"]["partitions"][0][4] == [[5, 7, 1]]


# ---- acknowledgements for a deleted topic ------------------------------------------------------


def scenario_share_ack_deleted_topic(ctx: Ctx) -> dict[str, Any]:
    """Records of two topics acquired, one topic deleted: ShareAcknowledge of its records is
    UNKNOWN_TOPIC_ID per partition (the other topic's NONE), and so is a ShareFetch's
    piggy-backed acknowledgement; the session's deleted partition is answered with an error."""
    w, doomed, group, did = _setup(ctx, "del", 1, 5)
    keep = ctx.topic("keep")
    w.create_topic(keep, partitions=1)
    kid = w.metadata([keep])["topics"][0]["topic_id"]
    _produce(w, keep, 0, 5)
    names = {did: "del", kid: "keep"}
    _join(w, group, "m", [doomed, keep], 2)
    got: dict[Any, dict[int, list[tuple[int, int]]]] = {}
    epoch = 0
    for _ in range(6):
        topics: dict[Any, dict[int, list[tuple[int, int, int]]]] = {did: {0: []}, kid: {0: []}} if epoch == 0 else {}
        body = _fetch(w, group, "m", epoch, topics, max_wait=2000)
        epoch += 1
        for t in body["responses"]:
            for p in t["partitions"]:
                for a in p["acquired_records"]:
                    got.setdefault(t["topic_id"], {}).setdefault(p["partition_index"], []).append((a["first_offset"], a["last_offset"]))
        if len(got) == 2:
            break
    obs: dict[str, Any] = {"acquired": sorted((names[t], sorted(ps.items())) for t, ps in got.items())}
    assert w.delete_topics([doomed])[doomed] == 0
    wait_for(lambda: not any(t["name"] == doomed and t["error_code"] == 0 for t in w.metadata(None)["topics"]), 30)
    time.sleep(2)  # the broker's metadata cache catches up (librdkafka's test waits too)
    body = _acknowledge(w, group, "m", epoch, {did: {0: [(0, 1, ACCEPT)]}, kid: {0: [(0, 1, ACCEPT)]}})
    epoch += 1
    obs["share_acknowledge"] = _view(body, names)
    body = _fetch(w, group, "m", epoch, {did: {0: [(2, 4, ACCEPT)]}, kid: {0: [(2, 4, ACCEPT)]}}, max_wait=500)
    epoch += 1
    obs["share_fetch_acks"] = _view(body, names)
    body = _fetch(w, group, "m", epoch, {}, max_wait=500)
    obs["share_fetch_after"] = _view(body, names)
    return obs


def test_share_ack_deleted_topic(conform):
    obs = conform(scenario_share_ack_deleted_topic)
    assert obs["share_acknowledge"]["partitions"] == [["del", 0, 100, None, []], ["keep", 0, 0, None, []]]
    # Kafka 4.3.1 fails a ShareFetch answer naming a topic id it no longer knows as a whole.
    assert obs["share_fetch_acks"] == {"error": -1, "partitions": []}


# ---- the final epoch after leaving the group ---------------------------------------------------


def scenario_share_close_with_acknowledge(ctx: Ctx) -> dict[str, Any]:
    """A member acquires 20 records, leaves its group (heartbeat -1), then acknowledges 10 with
    ShareAcknowledge at epoch -1: they are applied and the session closes (its other records
    released); a second member gets exactly the 10 not acknowledged. The same with a ShareFetch
    at epoch -1 carrying the acknowledgements."""
    w, topic, group, tid = _setup(ctx, "close", 1, 20)
    obs: dict[str, Any] = {}
    for how, final in (("share_acknowledge", _acknowledge), ("share_fetch", None)):
        member = f"c1-{how}"
        _join(w, group, member, [topic], 1)
        body = _fetch(w, group, member, 0, {tid: {0: []}})
        got = _acquired(body)
        obs[f"{how}_acquired"] = sorted(got.items())
        first = got[0][0][0]
        obs[f"{how}_leave"] = _heartbeat(w, group, member, -1)["error_code"]
        acks = {tid: {0: [(first, first + 9, ACCEPT)]}}
        if final is not None:
            obs[f"{how}_final"] = _view(final(w, group, member, -1, acks))
        else:
            obs[f"{how}_final"] = _view(_fetch(w, group, member, -1, acks, max_wait=500))
        obs[f"{how}_closed_again"] = _view(_acknowledge(w, group, member, -1, acks))
        member2 = f"c2-{how}"
        _join(w, group, member2, [topic], 1)
        body = _fetch(w, group, member2, 0, {tid: {0: []}})
        got2 = _acquired(body)
        obs[f"{how}_redelivered"] = sorted(got2.items())
        # Leave nothing acquired for the next round: the second member accepts and closes.
        obs[f"{how}_second_close"] = _view(_acknowledge(w, group, member2, -1, {tid: _accept_all(got2)}))
        _heartbeat(w, group, member2, -1)
        _produce(w, topic, 0, 20)
    return obs


def test_share_close_with_acknowledge(conform):
    obs = conform(scenario_share_close_with_acknowledge)
    assert obs["share_acknowledge_final"] == {"error": 0, "partitions": [["t", 0, 0, None, []]]}
    assert obs["share_acknowledge_redelivered"] == [[0, [[10, 19]]]]
    assert obs["share_acknowledge_closed_again"]["error"] == 122  # SHARE_SESSION_NOT_FOUND
    assert obs["share_fetch_redelivered"] == [[0, [[30, 39]]]]
