"""Group coordinator internals: ``__consumer_offsets`` records, Java orders, and the
coordinator driven in-process (state machine, timers, offset expiry, replay).

Expected values marked "Java" were printed by Java 17 with Kafka 4.1.0's jars
(String.hashCode, Utils.abs, HashMap / ConcurrentHashMap / TimelineHashMap
iteration); the record bytes were written by a Kafka 4.1.0 broker.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from kafka_sidecar.protocol import errors
from kafka_sidecar.protocol.records import decode_batches
from kafka_sidecar.server.config import BrokerConfig
from kafka_sidecar.server.coordinator.clock import ManualClock
from kafka_sidecar.server.groups.coordinator import (
    GroupCoordinator,
    JoinRequest,
    RequestContext,
    _topic_partition_hash,
)
from kafka_sidecar.server.groups.group import GroupState
from kafka_sidecar.server.groups.javaorder import JavaHashMap, TimelineOrder, chm_order
from kafka_sidecar.server.groups.records import (
    OFFSETS_TOPIC,
    GroupMetadataValue,
    MemberMetadata,
    OffsetAndMetadata,
    build_batch,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    group_metadata_key,
    group_metadata_value,
    iter_records,
    java_string_hash,
    offset_commit_key,
    offset_commit_value,
    partition_for,
)
from kafka_sidecar.server.replica_manager import ReplicaManager
from kafka_sidecar.storage.log_manager import LogManager

# ---------------------------------------------------------------------------- hashing and orders


def test_java_string_hash_and_offsets_partition():
    # Java: s.hashCode(), Utils.abs(s.hashCode()) % 50
    expected = {
        "": (0, 0), "G": (71, 21), "hello": (99162322, 22), "grüppe": (-1233264812, 12),
        "日本語": (25921943, 43), "emoji😀x": (1217655151, 1), "polygenelubricants": (-2147483648, 0),
    }
    for s, (h, p) in expected.items():
        assert (java_string_hash(s), partition_for(s, 50)) == (h, p), s


KEYS = ["consumer-1-8c1a", "consumer-2-77f0", "rdkafka-1b2c", "G", "simple", "simple2", "S", "nosuch", "kafkajs-3",
        "abc", "zzz"] + [f"m{i}" for i in range(1, 14)]


def test_java_hashmap_order():
    m: JavaHashMap[str, int] = JavaHashMap()
    for k in KEYS:
        m[k] = 1
    m.pop("m3")
    m["m3"] = 2
    # Java: HashMap keySet() after the same puts and remove
    assert ",".join(m.keys()) == (
        "abc,m1,m2,m3,rdkafka-1b2c,G,m4,m5,m6,simple,m7,m8,m9,m11,m10,simple2,m13,nosuch,m12,"
        "consumer-2-77f0,kafkajs-3,S,consumer-1-8c1a,zzz"
    )


def test_concurrent_hashmap_order_of_offsets_partitions():
    order = chm_order(range(50), lambda p: _topic_partition_hash(OFFSETS_TOPIC, p))
    # Java: ConcurrentHashMap<TopicPartition, _> keySet() with __consumer_offsets-0..49 inserted
    assert order == [13, 46, 9, 42, 21, 17, 30, 26, 5, 38, 1, 34, 16, 45, 12, 41, 24, 20, 49, 0, 29, 25, 8, 37, 4,
                     33, 15, 48, 11, 44, 23, 19, 32, 28, 7, 40, 3, 36, 47, 14, 43, 10, 22, 18, 31, 27, 39, 6, 35, 2]


def test_timeline_hashmap_order():
    t: TimelineOrder[str] = TimelineOrder()
    for k in KEYS:
        t.add(k)
    t.remove("m5")
    t.remove("G")
    t.add("G")
    # Java: TimelineHashMap keySet() after the same puts and removes
    assert ",".join(t) == (
        "abc,m12,simple,m2,S,m7,simple2,zzz,kafkajs-3,consumer-2-77f0,m4,m11,rdkafka-1b2c,m9,nosuch,m1,m6,"
        "consumer-1-8c1a,m13,m3,G,m10,m8"
    )


# ---------------------------------------------------------------------------- records

MEMBER = "probe-72e6d2bf-a76f-465e-bc10-20be2574d5d6"
SUBSCRIPTION = bytes.fromhex("000000000001000b70726f62652d746f706963ffffffff")
# Written by Kafka 4.1.0 (__consumer_offsets-21): GroupMetadataKey v2 and GroupMetadataValue v3 ...
KAFKA_GROUP_KEY = bytes.fromhex("0002000147")
KAFKA_GROUP_VALUE = bytes.fromhex(
    "00030008636f6e73756d657200000001000572616e6765002a" + MEMBER.encode().hex() + "000001a2075d22f9"
    "00000001002a" + MEMBER.encode().hex() + "ffff000570726f6265000a2f3132372e302e302e3100001388000027100000"
    "0017" + SUBSCRIPTION.hex() + "0000000641535349474e"
)
# ... OffsetCommitKey v1 and OffsetCommitValue v4 (the flexible version Kafka 4.1 writes; 4.0 writes v3).
KAFKA_OFFSET_KEY = bytes.fromhex("0001000147000b70726f62652d746f70696300000000")
KAFKA_OFFSET_VALUE_V4 = bytes.fromhex("0004000000000000000b00000000056d657461000001a2075d232000")


def test_group_metadata_record_is_kafkas():
    value = GroupMetadataValue("consumer", 1, "range", MEMBER, 0x1A2075D22F9, [
        MemberMetadata(MEMBER, None, "probe", "/127.0.0.1", 5000, 10000, SUBSCRIPTION, b"ASSIGN"),
    ])
    assert group_metadata_key("G") == KAFKA_GROUP_KEY
    assert group_metadata_value(value) == KAFKA_GROUP_VALUE
    assert decode_group_metadata_value(KAFKA_GROUP_VALUE) == value
    assert decode_key(KAFKA_GROUP_KEY).group == "G"


def test_offset_commit_records():
    assert offset_commit_key("G", "probe-topic", 0) == KAFKA_OFFSET_KEY
    key = decode_key(KAFKA_OFFSET_KEY)
    assert (key.group, key.topic, key.partition) == ("G", "probe-topic", 0)
    kafka41 = decode_offset_commit_value(KAFKA_OFFSET_VALUE_V4)
    assert (kafka41.offset, kafka41.leader_epoch, kafka41.metadata, kafka41.commit_timestamp, kafka41.expire_timestamp) == (11, 0, "meta", 0x1A2075D2320, None)
    v3 = offset_commit_value(OffsetAndMetadata(11, 0, "meta", 0x1A2075D2320))
    assert v3 == bytes.fromhex("0003000000000000000b0000000000046d657461000001a2075d2320")
    assert decode_offset_commit_value(v3) == OffsetAndMetadata(11, 0, "meta", 0x1A2075D2320)
    v1 = offset_commit_value(OffsetAndMetadata(7, -1, "", 100, 200))
    assert v1[:2] == b"\x00\x01"
    assert decode_offset_commit_value(v1) == OffsetAndMetadata(7, -1, "", 100, 200)


def test_batches_are_valid_kafka_batches():
    records = [(offset_commit_key("g", "t", p), offset_commit_value(OffsetAndMetadata(p, -1, "", 5))) for p in range(3)]
    records.append((group_metadata_key("g"), None))
    raw = build_batch(records, 1_700_000_000_000)
    (batch,) = decode_batches(raw)  # checks the CRC-32C
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence, batch.record_count) == (-1, -1, 0, 4)
    assert batch.max_timestamp == 1_700_000_000_000 and batch.last_offset_delta == 3
    assert [(r.key, r.value) for r in batch.records] == records
    assert [(o, k, v) for o, _, k, v in iter_records(raw)] == [(i, k, v) for i, (k, v) in enumerate(records)]


# ---------------------------------------------------------------------------- coordinator in-process


class FakeBroker:
    """What the coordinator uses of Broker, over a real LogManager."""

    node_id = 1
    advertised_host = "127.0.0.1"
    port = 9092

    def __init__(self, data_dir: Path, overrides: dict[str, str]) -> None:
        self.config = BrokerConfig.load(overrides=overrides)
        self.log_manager = LogManager(data_dir, self.config.log_defaults())
        self.metadata = self.log_manager.metadata
        self.clock = ManualClock()  # the coordinator's timers fire when a test advances it
        self.log_manager.startup()
        self.replica_manager = ReplicaManager(self.log_manager)

    async def run_blocking(self, fn: Any, *args: Any) -> Any:
        return fn(*args)

    def schedule_blocking(self, fn: Any, *args: Any) -> None:
        fn(*args)

    def notify_append(self, topic: str, partition: int) -> None:
        pass


OVERRIDES = {
    "group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "100",
    "offsets.topic.num.partitions": "5", "offsets.retention.minutes": "1",
}
CTX9 = RequestContext("client", "/127.0.0.1", 9)
CTX3 = RequestContext("client", "/127.0.0.1", 3)
SUB_T = bytes.fromhex("00000000000100017400000000")  # ConsumerProtocolSubscription v0: topics ["t"]


async def _coordinator(data_dir: Path) -> GroupCoordinator:
    c = GroupCoordinator(FakeBroker(data_dir, OVERRIDES))  # type: ignore[arg-type]
    await c.start()
    await c.ensure_offsets_topic()
    return c


def _join(group: str, member_id: str = "", session_ms: int = 300, protocols: list[tuple[str, bytes]] | None = None, instance: str | None = None) -> JoinRequest:
    return JoinRequest(group, session_ms, 1000, member_id, instance, "consumer", protocols or [("range", SUB_T), ("roundrobin", SUB_T)])


async def _wait(fut: asyncio.Future[dict[str, Any]], timeout: float = 3.0) -> dict[str, Any]:
    return await asyncio.wait_for(fut, timeout)


async def test_join_sync_heartbeat_and_session_expiry(tmp_path):
    c = await _coordinator(tmp_path)
    try:
        r = await _wait(c.join_group(CTX9, _join("g")))
        assert r["error_code"] == errors.MEMBER_ID_REQUIRED
        a = r["member_id"]
        r = await _wait(c.join_group(CTX9, _join("g", a)))
        assert (r["error_code"], r["generation_id"], r["leader"], r["protocol_name"]) == (0, 1, a, "range")
        assert [m["member_id"] for m in r["members"]] == [a]
        s = await _wait(c.sync_group(CTX9, "g", 1, a, None, "consumer", "range", [(a, b"A1")]))
        assert (s["error_code"], s["assignment"]) == (0, b"A1")
        assert c.groups["g"].state is GroupState.STABLE

        # A second member (JoinGroup v3: no member id round trip) makes the group rebalance.
        fb = c.join_group(CTX3, _join("g", protocols=[("roundrobin", SUB_T)]))
        await asyncio.sleep(0)
        assert c.heartbeat("g", 1, a, None) == errors.REBALANCE_IN_PROGRESS
        fa = c.join_group(CTX9, _join("g", a))
        ra, rb = await _wait(fa), await _wait(fb)
        b = rb["member_id"]
        assert ra["generation_id"] == rb["generation_id"] == 2
        assert ra["protocol_name"] == "roundrobin"  # the only protocol both support
        assert {m["member_id"] for m in ra["members"]} == {a, b} and rb["members"] == []
        fsb = c.sync_group(CTX3, "g", 2, b, None, None, None, [])
        await asyncio.sleep(0)
        assert not fsb.done()  # followers wait for the leader's assignment
        sa = await _wait(c.sync_group(CTX9, "g", 2, a, None, "consumer", "roundrobin", [(a, b"A2"), (b, b"B2")]))
        sb = await _wait(fsb)
        assert (sa["assignment"], sb["assignment"]) == (b"A2", b"B2")

        assert c.commit_offsets("g", 2, b, None, -1, [("t", [(0, 9, -1, None)])], 8) == (0, [("t", [(0, 0)])])
        assert c.commit_offsets("g", 1, b, None, -1, [("t", [(0, 9, -1, None)])], 8)[0] == errors.ILLEGAL_GENERATION
        assert c.commit_offsets("g", 2, "x", None, -1, [("t", [(0, 9, -1, None)])], 8)[0] == errors.UNKNOWN_MEMBER_ID

        # b stops heartbeating: after its 300 ms session it is removed and a rebalances alone.
        clock = c.broker.clock
        clock.advance(250)
        assert c.heartbeat("g", 2, a, None) == errors.NONE  # a's session starts again; b's runs on
        clock.advance(50)
        assert c.heartbeat("g", 2, a, None) == errors.REBALANCE_IN_PROGRESS
        r = await _wait(c.join_group(CTX9, _join("g", a)))
        assert (r["generation_id"], [m["member_id"] for m in r["members"]]) == (3, [a])
        assert c.fetch_offsets("g", [("t", [0, 1])])[1] == [("t", [
            {"partition_index": 0, "committed_offset": 9, "committed_leader_epoch": -1, "metadata": "", "error_code": 0},
            {"partition_index": 1, "committed_offset": -1, "committed_leader_epoch": -1, "metadata": "", "error_code": 0},
        ])]
    finally:
        c.shutdown()


async def test_static_member_rejoin_keeps_generation(tmp_path):
    c = await _coordinator(tmp_path)
    try:
        r = await _wait(c.join_group(CTX9, _join("s", instance="i1", session_ms=5000)))
        old = r["member_id"]
        assert old.startswith("i1-") and r["generation_id"] == 1
        await _wait(c.sync_group(CTX9, "s", 1, old, "i1", "consumer", "range", [(old, b"X")]))
        # The same instance restarts (unknown member id): replaced without a rebalance, leader keeps its assignment.
        r = await _wait(c.join_group(CTX9, _join("s", instance="i1", session_ms=5000)))
        new = r["member_id"]
        assert new != old and r["generation_id"] == 1 and r["skip_assignment"] is True
        assert c.heartbeat("s", 1, old, "i1") == errors.FENCED_INSTANCE_ID
        s = await _wait(c.sync_group(CTX9, "s", 1, new, "i1", "consumer", "range", []))
        assert s["assignment"] == b"X"
    finally:
        c.shutdown()


async def test_offsets_expire_and_empty_groups_are_deleted(tmp_path):
    c = await _coordinator(tmp_path)
    try:
        assert c.commit_offsets("simple", -1, "", None, -1, [("t", [(0, 5, 2, "m"), (1, 6, -1, None)])], 8)[0] == 0
        assert c.commit_offsets("legacy", -1, "", None, 1000, [("t", [(0, 1, -1, "")])], 2)[0] == 0
        committed = c.offsets["simple"]["t"][0].commit_timestamp
        legacy = c.offsets["legacy"]["t"][0]
        assert legacy.expire_timestamp == legacy.commit_timestamp + 1000

        assert c.cleanup_group_metadata(committed + 999) == 0
        # The v1 value (OffsetCommit v2 with a retention time) expires at its own expire timestamp;
        # its group, empty and without offsets, goes with it.
        assert c.cleanup_group_metadata(legacy.expire_timestamp) == 2
        assert "legacy" not in c.groups and "legacy" not in c.offsets
        assert "simple" in c.groups and "simple" in c.offsets
        # offsets.retention.minutes=1 counts from the commit for a group without a protocol.
        assert c.cleanup_group_metadata(committed + 59_999) == 0
        assert c.cleanup_group_metadata(committed + 60_000) == 3
        assert c.groups == {} and c.offsets == {}
        assert c.list_groups([], []) == (0, [])
    finally:
        c.shutdown()


async def test_state_is_rebuilt_from_the_offsets_topic(tmp_path):
    c = await _coordinator(tmp_path)
    r = await _wait(c.join_group(CTX9, _join("g", session_ms=200)))
    r = await _wait(c.join_group(CTX9, _join("g", r["member_id"], session_ms=200)))
    a = r["member_id"]
    await _wait(c.sync_group(CTX9, "g", 1, a, None, "consumer", "range", [(a, b"A")]))
    assert c.commit_offsets("g", 1, a, None, -1, [("t", [(0, 42, 3, "meta")])], 8)[0] == 0
    assert c.commit_offsets("gone", -1, "", None, -1, [("t", [(0, 1, -1, "")])], 8)[0] == 0
    assert c.delete_groups(["gone"]) == [{"group_id": "gone", "error_code": 0}]
    c.shutdown()
    lm = c.broker.log_manager
    lm.shutdown()

    c2 = GroupCoordinator(FakeBroker(tmp_path, OVERRIDES))  # type: ignore[arg-type]
    await c2.start()
    try:
        g = c2.groups["g"]
        assert (g.state, g.generation_id, g.protocol_name, g.leader_id) == (GroupState.STABLE, 1, "range", a)
        assert g.member(a).assignment == b"A"
        assert "gone" not in c2.groups and "gone" not in c2.offsets
        om = c2.offsets["g"]["t"][0]
        assert (om.offset, om.leader_epoch, om.metadata) == (42, 3, "meta")
        # The loaded member never heartbeats: its session expires and the group becomes Empty.
        c2.broker.clock.advance(199)
        assert g.state is GroupState.STABLE
        c2.broker.clock.advance(1)
        await asyncio.sleep(0)  # the rebalance's write
        assert g.state is GroupState.EMPTY and g.generation_id == 2
    finally:
        c2.shutdown()
        c2.broker.log_manager.shutdown()


@pytest.mark.parametrize("api_version", [5, 6])
async def test_describe_unknown_group(tmp_path, api_version):
    c = await _coordinator(tmp_path)
    try:
        (d,) = c.describe_groups(["nope"], api_version, True)
        if api_version >= 6:
            assert (d["error_code"], d["error_message"], d["authorized_operations"]) == (errors.GROUP_ID_NOT_FOUND, "Group nope not found.", -2147483648)
        else:
            assert (d["error_code"], d["group_state"], d["authorized_operations"]) == (0, "Dead", 3400)
    finally:
        c.shutdown()


async def test_a_storage_failure_of_the_offsets_partition_is_not_coordinator(tmp_path, monkeypatch):
    """Disk full under __consumer_offsets: the commit fails with NOT_COORDINATOR (Kafka's
    normalizeException for a KafkaStorageException), nothing is applied, and the next commit
    once the disk is back succeeds."""
    import errno

    from kafka_sidecar.storage import log_segment

    from tests.unit.test_storage_errors import FaultyOS

    c = await _coordinator(tmp_path)
    try:
        monkeypatch.setattr(log_segment, "os", FaultyOS({"write": [errno.ENOSPC]}))
        assert c.commit_offsets("full", -1, "", None, -1, [("t", [(0, 5, -1, "")])], 8)[0] == errors.NOT_COORDINATOR
        assert "t" not in c.offsets.get("full", {})
        monkeypatch.undo()
        assert c.commit_offsets("full", -1, "", None, -1, [("t", [(0, 6, -1, "")])], 8)[0] == errors.NONE
        assert c.offsets["full"]["t"][0].offset == 6
    finally:
        c.shutdown()
