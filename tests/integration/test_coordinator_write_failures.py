"""A coordinator write whose append fails leaves the coordinator's memory as it was (issue 24).

One test per shard of the coordinator runtime (server/coordinator/runtime.py): groups
(``__consumer_offsets``), share groups (their records in ``__consumer_offsets``), share-partition
state (``__share_group_state``: an offsets reset, and an acknowledgement) and transactions (``__transaction_state``). A real broker over
TCP; the runtime's ``before_append`` hook makes the append to one internal topic raise the
StorageError a failing disk raises. The client gets Kafka's error for its API (a storage error of
the coordinator's partition is NOT_COORDINATOR), and a later describe or fetch shows the state
from before the failed request; once the failure is gone the same request succeeds.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kafka_sidecar.storage.log_segment import StorageError
from kafka_sidecar.testing import EmbeddedBroker

from tests.conformance.wire import Wire, batch

NONE, NOT_COORDINATOR = 0, 16
M1, M2 = "cwf-member-1-aaaaaaaaaaaa", "cwf-member-2-bbbbbbbbbbbb"  # KIP-1082: the client picks its member id


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    b = EmbeddedBroker().start()
    try:
        yield b
    finally:
        b.stop()


class FailAppends:
    """Make every coordinator append to ``topic`` fail while in the ``with`` block."""

    def __init__(self, broker: EmbeddedBroker, topic: str) -> None:
        self.runtime = broker._broker.coordinator_runtime  # type: ignore[union-attr]
        self.topic = topic
        self.failed = 0

    def _hook(self, topic: str, partition: int) -> None:
        if topic == self.topic:
            self.failed += 1
            raise StorageError(f"injected: cannot append to {topic}-{partition}")

    def __enter__(self) -> FailAppends:
        self.runtime.before_append = self._hook
        return self

    def __exit__(self, *exc: object) -> None:
        self.runtime.before_append = None


def _commit(w: Wire, group: str, topic: str, offset: int) -> int:
    r = w.call(8, 8, {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
                      "topics": [{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": offset,
                                                                  "committed_leader_epoch": -1, "committed_metadata": None}]}]})
    return r["topics"][0]["partitions"][0]["error_code"]


def _committed(w: Wire, group: str, topic: str) -> int:
    r = w.call(9, 8, {"require_stable": False, "groups": [{"group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}]}]})
    return r["groups"][0]["topics"][0]["partitions"][0]["committed_offset"]


def test_failed_offset_commit_keeps_the_committed_offset(broker: EmbeddedBroker) -> None:
    topic, group = "cwf-offsets", "cwf-g"
    with Wire(broker.bootstrap_servers) as w:
        w.create_topic(topic)
        w.call(10, 4, {"key_type": 0, "coordinator_keys": [group]})
        assert _commit(w, group, topic, 5) == NONE
        with FailAppends(broker, "__consumer_offsets") as failing:
            assert _commit(w, group, topic, 9) == NOT_COORDINATOR
        assert failing.failed == 1
        assert _committed(w, group, topic) == 5
        assert _commit(w, group, topic, 9) == NONE
        assert _committed(w, group, topic) == 9


def _consumer_heartbeat(w: Wire, group: str, member: str, topic: str) -> dict[str, Any]:
    return w.call(68, 1, {"group_id": group, "member_id": member, "member_epoch": 0, "instance_id": None, "rack_id": None,
                          "rebalance_timeout": 30000, "subscribed_topic_names": [topic], "subscribed_topic_regex": None,
                          "server_assignor": None, "topic_partitions": []})


def test_failed_consumer_group_join_leaves_the_group_as_it_was(broker: EmbeddedBroker) -> None:
    topic, group = "cwf-consumer", "cwf-cg"
    with Wire(broker.bootstrap_servers) as w:
        w.create_topic(topic)
        w.call(10, 4, {"key_type": 0, "coordinator_keys": [group]})
        first = _consumer_heartbeat(w, group, M1, topic)
        assert first["error_code"] == NONE, first
        before = w.call(69, 0, {"group_ids": [group], "include_authorized_operations": False})["groups"][0]
        with FailAppends(broker, "__consumer_offsets"):
            assert _consumer_heartbeat(w, group, M2, topic)["error_code"] == NOT_COORDINATOR
        after = w.call(69, 0, {"group_ids": [group], "include_authorized_operations": False})["groups"][0]
        assert (after["group_epoch"], [m["member_id"] for m in after["members"]]) == \
            (before["group_epoch"], [m["member_id"] for m in before["members"]]) == (before["group_epoch"], [M1])
        assert _consumer_heartbeat(w, group, M2, topic)["error_code"] == NONE


def _share_join(w: Wire, group: str, member: str, topic: str) -> dict[str, Any]:
    return w.call(76, 1, {"group_id": group, "member_id": member, "member_epoch": 0, "rack_id": None,
                          "subscribed_topic_names": [topic]})


def _share_describe(w: Wire, group: str) -> tuple[str, int, int, list[str]]:
    d = w.call(77, 1, {"group_ids": [group], "include_authorized_operations": False})["groups"][0]
    return d["group_state"], d["group_epoch"], d["assignment_epoch"], sorted(m["member_id"] for m in d["members"])


def test_failed_share_group_heartbeat_leaves_the_group_as_it_was(broker: EmbeddedBroker) -> None:
    topic, group = "cwf-share", "cwf-sg"
    with Wire(broker.bootstrap_servers) as w:
        w.create_topic(topic)
        assert _share_join(w, group, "m1", topic)["error_code"] == NONE
        before = _share_describe(w, group)
        with FailAppends(broker, "__consumer_offsets") as failing:
            assert _share_join(w, group, "m2", topic)["error_code"] == NOT_COORDINATOR
        assert failing.failed >= 1
        assert _share_describe(w, group) == before
        assert before[3] == ["m1"]
        assert _share_join(w, group, "m2", topic)["error_code"] == NONE
        assert _share_describe(w, group)[3] == ["m1", "m2"]


def _start_offset(w: Wire, group: str) -> int:
    d = w.call(90, 1, {"groups": [{"group_id": group, "topics": None}]})["groups"][0]
    return d["topics"][0]["partitions"][0]["start_offset"]


def _alter(w: Wire, group: str, topic: str, offset: int) -> int:
    r = w.call(91, 0, {"group_id": group, "topics": [{"topic_name": topic, "partitions": [
        {"partition_index": 0, "start_offset": offset}]}]})
    assert r["error_code"] == NONE, r
    return r["responses"][0]["partitions"][0]["error_code"]


def test_failed_share_state_write_keeps_the_share_partition_state(broker: EmbeddedBroker) -> None:
    topic, group = "cwf-state", "cwf-ss"
    with Wire(broker.bootstrap_servers) as w:
        w.create_topic(topic)
        # Make the topics exist (a share group's heartbeat creates __share_group_state), then leave.
        assert _share_join(w, group, "m1", topic)["error_code"] == NONE
        assert w.call(76, 1, {"group_id": group, "member_id": "m1", "member_epoch": -1, "rack_id": None,
                              "subscribed_topic_names": None})["error_code"] == NONE
        assert _alter(w, group, topic, 3) == NONE
        assert _start_offset(w, group) == 3
        with FailAppends(broker, "__share_group_state") as failing:
            assert _alter(w, group, topic, 7) == NOT_COORDINATOR
            deleted = w.call(92, 0, {"group_id": group, "topics": [{"topic_name": topic}]})
            assert [t["error_code"] for t in deleted["responses"]] == [NOT_COORDINATOR]
        assert failing.failed == 2
        assert _start_offset(w, group) == 3
        assert _alter(w, group, topic, 7) == NONE
        assert _start_offset(w, group) == 7


def _share_offsets(w: Wire, group: str) -> tuple[int, int]:
    """DescribeShareGroupOffsets of partition 0: (start offset as written, lag)."""
    p = w.call(90, 1, {"groups": [{"group_id": group, "topics": None}]})["groups"][0]["topics"][0]["partitions"][0]
    return p["start_offset"], p["lag"]


def _share_ack(w: Wire, group: str, epoch: int, topic_id: uuid.UUID, first: int, last: int) -> dict[str, Any]:
    """ShareAcknowledge of [first, last] as ACCEPT: the partition's answer."""
    r = w.call(79, 2, {"group_id": group, "member_id": M1, "share_session_epoch": epoch, "topics": [
        {"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": [
            {"first_offset": first, "last_offset": last, "acknowledge_types": [1]}]}]}]})
    assert r["error_code"] == NONE, r
    return r["responses"][0]["partitions"][0]


def test_failed_share_acknowledgement_keeps_the_records_acquired(broker: EmbeddedBroker) -> None:
    """SharePartition.acknowledge writes the state first: a failed __share_group_state append
    answers the acknowledgement's error and leaves the records acquired by the member (not
    acknowledged, start offset unmoved), so acknowledging them again succeeds."""
    topic, group = "cwf-ack", "cwf-sa"
    with Wire(broker.bootstrap_servers) as w:
        w.create_topic(topic)
        topic_id = w.metadata([topic])["topics"][0]["topic_id"]
        configured = w.call(44, 1, {"resources": [{"resource_type": 32, "resource_name": group, "configs": [
            {"name": "share.auto.offset.reset", "config_operation": 0, "value": "earliest"}]}], "validate_only": False})
        assert configured["responses"][0]["error_code"] == NONE, configured
        assert w.call(76, 1, {"group_id": group, "member_id": M1, "member_epoch": 0, "rack_id": None,
                              "subscribed_topic_names": [topic]})["error_code"] == NONE
        assert w.produce(topic, batch([b"r%d" % i for i in range(5)]))["error"] == NONE
        fetched = w.call(78, 2, {"group_id": group, "member_id": M1, "share_session_epoch": 0, "max_wait": 0,
                                 "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 500, "batch_size": 500,
                                 "topics": [{"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": []}]}],
                                 "forgotten_topics_data": []})
        acquired = [(a["first_offset"], a["last_offset"], a["delivery_count"])
                    for t in fetched["responses"] for p in t["partitions"] for a in p["acquired_records"]]
        assert acquired == [(0, 4, 1)], fetched
        before = _share_offsets(w, group)
        with FailAppends(broker, "__share_group_state") as failing:
            assert _share_ack(w, group, 1, topic_id, 0, 2)["error_code"] == NOT_COORDINATOR
        assert failing.failed == 1
        assert _share_offsets(w, group) == before
        # Still the member's, acquired: acknowledging them now succeeds, the state is written.
        assert _share_ack(w, group, 2, topic_id, 0, 4)["error_code"] == NONE
        assert _share_offsets(w, group) == (0, 0)


def _describe_txn(w: Wire, txn_id: str) -> tuple[str, int, int, list[Any]]:
    s = w.call(65, 0, {"transactional_ids": [txn_id]})["transaction_states"][0]
    return s["transaction_state"], s["producer_id"], s["producer_epoch"], sorted((t["topic"], sorted(t["partitions"])) for t in s["topics"])


def test_failed_transaction_state_write_keeps_the_transaction(broker: EmbeddedBroker) -> None:
    topic, txn_id = "cwf-txn", f"cwf-{uuid.uuid4()}"
    with Wire(broker.bootstrap_servers) as w:
        w.create_topic(topic)
        found = w.call(10, 4, {"key_type": 1, "coordinator_keys": [txn_id]})
        assert found["coordinators"][0]["error_code"] == NONE, found
        init = w.call(22, 4, {"transactional_id": txn_id, "transaction_timeout": 60000, "producer_id": -1, "producer_epoch": -1})
        assert init["error_code"] == NONE, init
        pid, epoch = init["producer_id"], init["producer_epoch"]
        added = w.call(24, 3, {"v3_and_below_transactional_id": txn_id, "v3_and_below_producer_id": pid,
                               "v3_and_below_producer_epoch": epoch, "v3_and_below_topics": [{"name": topic, "partitions": [0]}]})
        assert added["results_by_topic_v3_and_below"][0]["results_by_partition"][0]["partition_error_code"] == NONE
        before = _describe_txn(w, txn_id)
        assert before == ("Ongoing", pid, epoch, [(topic, [0])])

        def end() -> int:
            return w.call(26, 3, {"transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch, "committed": True})["error_code"]

        with FailAppends(broker, "__transaction_state") as failing:
            assert end() == NOT_COORDINATOR
        assert failing.failed == 1
        assert _describe_txn(w, txn_id) == before
        assert end() == NONE
        assert _describe_txn(w, txn_id) == ("CompleteCommit", pid, epoch, [])
