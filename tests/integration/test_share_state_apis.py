"""The share coordinator's inter-broker APIs (KIP-932), which the nodes of ``serve --processes N``
send each other, over TCP against one broker: InitializeShareGroupState (83) creates a
share-partition's state, WriteShareGroupState (85) adds batches to it, ReadShareGroupState (84)
and ReadShareGroupStateSummary (87) read it back (the summary with KIP-1226's delivery-complete
count), DeleteShareGroupState (86) removes it; a state never initialized cannot be read
(INVALID_REQUEST, as Kafka), and the state written comes back after a restart, its epochs too.
Kafka's answers to each step are compared in tests/conformance/test_share_state_apis.py."""

from __future__ import annotations

import uuid
from typing import Any

from kafka_sidecar.testing import EmbeddedBroker

from tests.conformance.wire import Wire

INVALID_REQUEST, FENCED_LEADER_EPOCH = 42, 74
AVAILABLE, ACKNOWLEDGED, ARCHIVED = 0, 2, 4


def _one(w: Wire, api: int, version: int, group: str, topic_id: uuid.UUID, partition: dict[str, Any]) -> dict[str, Any]:
    answer = w.call(api, version, {"group_id": group, "topics": [{"topic_id": topic_id, "partitions": [partition]}]})
    (t,) = answer["results"]
    (p,) = t["partitions"]
    return p


def _read(w: Wire, group: str, topic_id: uuid.UUID, leader_epoch: int = 0) -> tuple[int, int, list[tuple[int, int, int, int]]]:
    r = _one(w, 84, 0, group, topic_id, {"partition": 0, "leader_epoch": leader_epoch})
    return r["error_code"], r["start_offset"], [(b["first_offset"], b["last_offset"], b["delivery_state"], b["delivery_count"])
                                                for b in r["state_batches"]]


def test_initialize_write_read_summary_delete() -> None:
    group = "g-state"
    with EmbeddedBroker() as b:
        with Wire(b.bootstrap_servers) as w:
            w.create_topic("state-t")
            topic_id = w.metadata(["state-t"])["topics"][0]["topic_id"]
            assert isinstance(topic_id, uuid.UUID)
            assert _read(w, group, topic_id)[0] == INVALID_REQUEST
            assert _one(w, 83, 0, group, topic_id, {"partition": 0, "state_epoch": 0, "start_offset": -1})["error_code"] == 0
            assert _read(w, group, topic_id) == (0, -1, [])
            batches = [{"first_offset": 10, "last_offset": 14, "delivery_state": ACKNOWLEDGED, "delivery_count": 1},
                       {"first_offset": 15, "last_offset": 15, "delivery_state": AVAILABLE, "delivery_count": 2},
                       {"first_offset": 16, "last_offset": 17, "delivery_state": ARCHIVED, "delivery_count": 5}]
            written = _one(w, 85, 1, group, topic_id, {"partition": 0, "state_epoch": 0, "leader_epoch": 3, "start_offset": 10,
                                                       "delivery_complete_count": 7, "state_batches": batches})
            assert written["error_code"] == 0, written
            want = (0, 10, [(10, 14, ACKNOWLEDGED, 1), (15, 15, AVAILABLE, 2), (16, 17, ARCHIVED, 5)])
            assert _read(w, group, topic_id, 3) == want
            # Initializing again without a start offset keeps the state; with one, it starts there.
            assert _one(w, 83, 0, group, topic_id, {"partition": 0, "state_epoch": 0, "start_offset": -1})["error_code"] == 0
            assert _read(w, group, topic_id, 3) == want
            summary = _one(w, 87, 1, group, topic_id, {"partition": 0, "leader_epoch": 0})
            assert (summary["error_code"], summary["start_offset"], summary["delivery_complete_count"], summary["leader_epoch"]) == (0, 10, 7, 3)
        b.restart()
        with Wire(b.bootstrap_servers) as w:
            assert _read(w, group, topic_id, 3) == want  # replayed from __share_group_state
            assert _read(w, group, topic_id, 2)[0] == FENCED_LEADER_EPOCH  # the leader epoch replayed too
            assert _one(w, 83, 0, group, topic_id, {"partition": 0, "state_epoch": 1, "start_offset": 30})["error_code"] == 0
            assert _read(w, group, topic_id, 3) == (0, 30, [])
            assert _one(w, 86, 0, group, topic_id, {"partition": 0})["error_code"] == 0
            assert _read(w, group, topic_id, 3)[0] == INVALID_REQUEST
