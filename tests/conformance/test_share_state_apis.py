"""The share coordinator's inter-broker APIs (KIP-932) as a client with CLUSTER_ACTION sends them
(neither conformance broker has an authorizer, so any client may), side by side with Apache
Kafka 4.3.1: InitializeShareGroupState (83), ReadShareGroupState (84), WriteShareGroupState (85),
DeleteShareGroupState (86) and ReadShareGroupStateSummary (87) on one share-partition's life
(initialize, write state batches, read, summary, delete) and on bad input: a key never
initialized, a zero or unknown topic id, a partition the topic does not have, a negative one,
stale state and leader epochs, a write before initialization, reads after the delete.

The share coordinator of a key is found first (FindCoordinator, key type SHARE), as Kafka's
persister does: that creates ``__share_group_state`` and loads its shards. Topic ids are
reported as ``<tid>`` / ``<zero>`` / ``<other>``.
"""

from __future__ import annotations

import base64
import time
import uuid
from typing import Any

from tests.conformance.harness import Ctx
from tests.conformance.wire import Wire

INITIALIZE, READ, WRITE, DELETE, SUMMARY = 83, 84, 85, 86, 87
VERSIONS = {INITIALIZE: 0, READ: 0, WRITE: 1, DELETE: 0, SUMMARY: 1}
AVAILABLE, ACKNOWLEDGED, ARCHIVED = 0, 2, 4
ZERO = uuid.UUID(int=0)


def share_key(group: str, topic_id: uuid.UUID, partition: int) -> str:
    """Kafka's SharePartitionKey string: the topic id as Uuid.toString writes it (URL-safe base64)."""
    return f"{group}:{base64.urlsafe_b64encode(topic_id.bytes).rstrip(b'=').decode()}:{partition}"


def _wait_share_coordinator(w: Wire, group: str, topic_id: uuid.UUID, partition: int) -> int:
    """FindCoordinator v6 for the share key until it answers (a fresh broker creates the state
    topic), then until its shard is loaded (a summary of the key, which changes nothing, stops
    answering NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS); FindCoordinator's error."""
    code = -1
    for _ in range(120):
        code = w.call(10, 6, {"key_type": 2, "coordinator_keys": [share_key(group, topic_id, partition)]})["coordinators"][0]["error_code"]
        if code == 0:
            break
        time.sleep(0.5)
    for _ in range(120):
        body = w.call(SUMMARY, VERSIONS[SUMMARY], {"group_id": group, "topics": [
            {"topic_id": topic_id, "partitions": [{"partition": partition, "leader_epoch": 0}]}]})
        if body["results"][0]["partitions"][0]["error_code"] not in (14, 16):
            break
        time.sleep(0.5)
    return code


def _batches(*runs: tuple[int, int, int, int]) -> list[dict[str, int]]:
    return [{"first_offset": f, "last_offset": last, "delivery_state": s, "delivery_count": c} for f, last, s, c in runs]


class _Calls:
    """One share-partition request at a time; answers with topic ids named."""

    def __init__(self, w: Wire, group: str, names: dict[Any, str]) -> None:
        self.w, self.group, self.names = w, group, names

    def __call__(self, api: int, topic_id: uuid.UUID, partition: dict[str, Any], group: str | None = None) -> Any:
        body = self.w.call(api, VERSIONS[api], {"group_id": self.group if group is None else group,
                                                "topics": [{"topic_id": topic_id, "partitions": [partition]}]})
        return [{"topic_id": self.names.get(t["topic_id"], repr(t["topic_id"])), "partitions": t["partitions"]}
                for t in body["results"]]


def scenario_share_state_apis(ctx: Ctx) -> dict[str, Any]:
    w = ctx.wire()
    topic, group = ctx.topic("t"), ctx.group("g")
    w.create_topic(topic, partitions=2)
    tid = w.metadata([topic])["topics"][0]["topic_id"]
    other = uuid.uuid4()
    call = _Calls(w, group, {tid: "<tid>", ZERO: "<zero>", other: "<other>", None: "<none>"})
    obs: dict[str, Any] = {"coordinator": [_wait_share_coordinator(w, group, tid, p) for p in (0, 1)]}

    def write(partition: int, state_epoch: int, leader_epoch: int, start: int, runs: list[dict[str, int]],
              complete: int = -1, topic_id: uuid.UUID = tid) -> Any:
        return call(WRITE, topic_id, {"partition": partition, "state_epoch": state_epoch, "leader_epoch": leader_epoch,
                                      "start_offset": start, "delivery_complete_count": complete, "state_batches": runs})

    def read(partition: int, leader_epoch: int = 0, topic_id: uuid.UUID = tid) -> Any:
        return call(READ, topic_id, {"partition": partition, "leader_epoch": leader_epoch})

    def summary(partition: int, leader_epoch: int = 0, topic_id: uuid.UUID = tid) -> Any:
        return call(SUMMARY, topic_id, {"partition": partition, "leader_epoch": leader_epoch})

    def initialize(partition: int, state_epoch: int, start: int, topic_id: uuid.UUID = tid) -> Any:
        return call(INITIALIZE, topic_id, {"partition": partition, "state_epoch": state_epoch, "start_offset": start})

    # A key never initialized (the group is unknown to the share coordinator).
    obs["read_never_initialized"] = read(0)
    obs["summary_never_initialized"] = summary(0)
    obs["delete_never_initialized"] = call(DELETE, tid, {"partition": 0})
    # A write before any initialization, then what it left.
    obs["write_before_initialize"] = write(1, 0, 0, 5, _batches((5, 6, ACKNOWLEDGED, 1)), 2)
    obs["read_after_write_before_initialize"] = read(1)
    obs["summary_after_write_before_initialize"] = summary(1)

    # The life of partition 0: initialize, write twice (the second overlapping the first), read.
    obs["initialize"] = initialize(0, 0, 10)
    obs["read_initialized"] = read(0)
    obs["summary_initialized"] = summary(0)
    obs["initialize_again"] = initialize(0, 0, 10)
    obs["write"] = write(0, 0, 1, 10, _batches((10, 14, ACKNOWLEDGED, 1), (15, 15, AVAILABLE, 2), (16, 17, ARCHIVED, 5)), 7)
    obs["read"] = read(0, 1)
    obs["summary"] = summary(0, 1)
    obs["write_overlapping"] = write(0, 0, 1, 12, _batches((15, 16, ACKNOWLEDGED, 3), (18, 19, AVAILABLE, 1)), 6)
    obs["read_overlapping"] = read(0, 1)
    obs["summary_overlapping"] = summary(0, 1)
    obs["write_start_only"] = write(0, 0, 1, -1, [], -1)
    obs["read_start_only"] = read(0, 1)

    # Stale epochs: a leader epoch below the last one written or read; a state epoch below the stored one.
    obs["write_stale_leader_epoch"] = write(0, 0, 0, 13, _batches((13, 13, ACKNOWLEDGED, 1)), 1)
    obs["read_stale_leader_epoch"] = read(0, 0)
    obs["summary_stale_leader_epoch"] = summary(0, 0)
    obs["read_newer_leader_epoch"] = read(0, 4)
    obs["write_after_newer_read"] = write(0, 0, 3, 13, _batches((13, 13, ACKNOWLEDGED, 1)), 1)
    obs["initialize_new_state_epoch"] = initialize(0, 2, 20)
    obs["read_reinitialized"] = read(0, 4)
    obs["summary_reinitialized"] = summary(0, 4)
    obs["write_stale_state_epoch"] = write(0, 1, 4, 21, _batches((21, 21, ACKNOWLEDGED, 1)), 1)
    obs["initialize_stale_state_epoch"] = initialize(0, 1, 30)
    obs["write_current_epochs"] = write(0, 2, 4, 21, _batches((21, 22, ACKNOWLEDGED, 1)), 2)
    obs["read_current"] = read(0, 4)

    # Bad keys: zero or unknown topic id, a partition the topic lacks, a negative partition.
    for name, topic_id, partition in (("zero_topic_id", ZERO, 0), ("unknown_topic_id", other, 0),
                                      ("unknown_partition", tid, 7), ("negative_partition", tid, -1)):
        obs[f"initialize_{name}"] = initialize(partition, 0, 0, topic_id)
        obs[f"write_{name}"] = write(partition, 0, 0, 0, _batches((0, 0, ACKNOWLEDGED, 1)), 1, topic_id)
        obs[f"read_{name}"] = read(partition, 0, topic_id)
        obs[f"summary_{name}"] = summary(partition, 0, topic_id)
        obs[f"delete_{name}"] = call(DELETE, topic_id, {"partition": partition})

    # Delete, then everything again.
    obs["delete"] = call(DELETE, tid, {"partition": 0})
    obs["read_after_delete"] = read(0, 4)
    obs["summary_after_delete"] = summary(0, 4)
    obs["delete_again"] = call(DELETE, tid, {"partition": 0})
    obs["write_after_delete"] = write(0, 0, 0, 40, _batches((40, 40, ACKNOWLEDGED, 1)), 1)
    obs["read_after_write_after_delete"] = read(0, 0)
    obs["initialize_after_delete"] = initialize(0, 0, 50)
    obs["read_after_initialize_after_delete"] = read(0, 0)
    return obs


def _one(obs: dict[str, Any], step: str) -> dict[str, Any]:
    (t,) = obs[step]
    (p,) = t["partitions"]
    return p


def test_share_state_apis(conform):
    obs = conform(scenario_share_state_apis)
    assert obs["coordinator"] == [0, 0]
    assert _one(obs, "initialize")["error_code"] == 0
    assert _one(obs, "write")["error_code"] == 0
    read = _one(obs, "read")
    assert read["error_code"] == 0 and read["start_offset"] == 10, read
    assert [(b["first_offset"], b["last_offset"]) for b in read["state_batches"]] == [(10, 14), (15, 15), (16, 17)]
    assert _one(obs, "summary")["delivery_complete_count"] == 7
    assert _one(obs, "delete")["error_code"] == 0
