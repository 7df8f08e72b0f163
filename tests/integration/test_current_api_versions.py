"""The versions and APIs Kafka 4.3 added, over TCP against an embedded broker (no reference needed).

The conformance suite (tests/conformance/test_api_versions.py) compares the same requests with
Apache Kafka 4.3.1; these tests pin our answers where no reference runs: the advertised ranges
(within Kafka 4.3.1's recorded ones), Produce v13 and OffsetCommit/OffsetFetch v10 by topic id,
ListTransactions v2's pattern, and the single-node admin APIs (server/apis/admin.py).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka_sidecar.server.dispatch import SUPPORTED_APIS
from kafka_sidecar.testing import EmbeddedBroker

from tests.conformance.wire import RETRIABLE_COORDINATOR, Wire, batch

KAFKA_4_3_1 = Path(__file__).resolve().parents[1] / "data" / "kafka-4.3.1" / "api-versions.json"
UNKNOWN_TOPIC_ID, INVALID_REGULAR_EXPRESSION = 100, 128


@pytest.fixture(scope="module")
def wire() -> Iterator[Wire]:
    with EmbeddedBroker() as b, Wire(b.bootstrap_servers) as w:
        yield w


def _until_coordinator(w: Wire, key: str, key_type: int, api_key: int, version: int, data: dict[str, Any]) -> dict[str, Any]:
    deadline = time.monotonic() + 20
    while True:
        w.call(10, 4, {"key_type": key_type, "coordinator_keys": [key]})
        body = w.call(api_key, version, data)
        codes = {body.get("error_code")} | {g.get("error_code") for g in body.get("groups", [])}
        if not codes & RETRIABLE_COORDINATOR or time.monotonic() > deadline:
            return body
        time.sleep(0.1)


def test_advertised_ranges_within_kafka_4_3_1(wire: Wire) -> None:
    kafka = {int(k): tuple(v) for k, v in json.loads(KAFKA_4_3_1.read_text())["api_keys"].items()}
    body = wire.call(18, 4, {"client_software_name": "t", "client_software_version": "1"})
    ours = {k["api_key"]: (k["min_version"], k["max_version"]) for k in body["api_keys"]}
    assert ours == {key: (s.min_version, s.max_version) for key, s in SUPPORTED_APIS.items()}
    for key, (lo, hi) in ours.items():
        assert kafka[key][0] <= lo <= hi <= kafka[key][1], (SUPPORTED_APIS[key].name, (lo, hi), kafka[key])
    # Every API we implement is served up to Kafka 4.3.1's newest version.
    assert {SUPPORTED_APIS[k].name: hi for k, (_, hi) in ours.items() if hi != kafka[k][1]} == {}


def test_produce_v13_by_topic_id(wire: Wire) -> None:
    wire.create_topic("v13", partitions=2)
    topic_id = wire.metadata(["v13"])["topics"][0]["topic_id"]
    unknown = uuid.uuid4()
    body = wire.call(0, 13, {"transactional_id": None, "acks": -1, "timeout": 5000, "topic_data": [
        {"topic_id": topic_id, "partition_data": [{"index": 0, "records": batch([b"a"])}, {"index": 3, "records": batch([b"b"])}]},
        {"topic_id": unknown, "partition_data": [{"index": 0, "records": batch([b"c"])}]},
        {"topic_id": topic_id, "partition_data": [{"index": 1, "records": batch([b"d"])}]},
    ]})
    answers = {r["topic_id"]: [(p["index"], p["error_code"], p["base_offset"]) for p in r["partition_responses"]]
               for r in body["responses"]}
    assert answers == {topic_id: [(0, 0, 0), (3, 3, -1), (1, 0, 0)], unknown: [(0, UNKNOWN_TOPIC_ID, -1)]}
    assert [r.value for r in wire.records("v13", 0)] == [b"a"]


def test_offsets_v10_by_topic_id(wire: Wire) -> None:
    wire.create_topic("v10")
    topic_id = wire.metadata(["v10"])["topics"][0]["topic_id"]
    unknown = uuid.uuid4()
    commit = _until_coordinator(wire, "g10", 0, 8, 10, {
        "group_id": "g10", "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None, "topics": [
            {"topic_id": topic_id, "partitions": [{"partition_index": 0, "committed_offset": 7, "committed_leader_epoch": -1,
                                                   "committed_metadata": "x"}]},
            {"topic_id": unknown, "partitions": [{"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                                                  "committed_metadata": None}]}]})
    # As Kafka's OffsetCommitResponse builder: the unknown id's errors first, the coordinator's results after.
    assert [(t["topic_id"], [p["error_code"] for p in t["partitions"]]) for t in commit["topics"]] == [
        (unknown, [UNKNOWN_TOPIC_ID]), (topic_id, [0])]
    fetched = wire.call(9, 10, {"require_stable": False, "groups": [{"group_id": "g10", "member_id": None, "member_epoch": -1, "topics": [
        {"topic_id": unknown, "partition_indexes": [0]}, {"topic_id": topic_id, "partition_indexes": [0]}]}]})
    rows = [(t["topic_id"], [(p["committed_offset"], p["metadata"], p["error_code"]) for p in t["partitions"]])
            for t in fetched["groups"][0]["topics"]]
    assert rows == [(topic_id, [(7, "x", 0)]), (unknown, [(-1, "", UNKNOWN_TOPIC_ID)])]
    # v9 still names the topic.
    v9 = wire.call(9, 9, {"require_stable": False, "groups": [{"group_id": "g10", "member_id": None, "member_epoch": -1, "topics": None}]})
    assert [t["name"] for t in v9["groups"][0]["topics"]] == ["v10"]


def test_list_transactions_v2_pattern(wire: Wire) -> None:
    for tid in ("pat-abc", "pat-abcd", "pat-other"):
        body = _until_coordinator(wire, tid, 1, 22, 5, {"transactional_id": tid, "transaction_timeout": 60_000,
                                                        "producer_id": -1, "producer_epoch": -1})
        assert body["error_code"] == 0

    def listed(pattern: str | None) -> tuple[int, list[str]]:
        body = wire.call(66, 2, {"state_filters": [], "producer_id_filters": [], "duration_filter": -1,
                                 "transactional_id_pattern": pattern})
        return body["error_code"], sorted(s["transactional_id"] for s in body["transaction_states"])

    assert listed(None) == listed("") == (0, ["pat-abc", "pat-abcd", "pat-other"])
    assert listed("pat-abc") == (0, ["pat-abc"])  # matches() the whole id, not a substring
    assert listed("abc") == (0, [])
    assert listed("pat-abc.*") == (0, ["pat-abc", "pat-abcd"])
    assert listed("[") == (INVALID_REGULAR_EXPRESSION, [])


def test_single_node_admin_apis(wire: Wire) -> None:
    wire.create_topic("adm", partitions=2)
    elect = wire.call(43, 2, {"election_type": 0, "timeout": 5000, "topic_partitions": [
        {"topic": "adm", "partitions": [0, 4]}, {"topic": "adm-missing", "partitions": [0]}]})
    assert [(r["topic"], [(p["partition_id"], p["error_code"]) for p in r["partition_result"]])
            for r in elect["replica_election_results"]] == [("adm", [(0, 84), (4, 3)]), ("adm-missing", [(0, 3)])]
    alter = wire.call(45, 1, {"timeout": 5000, "allow_replication_factor_change": False, "topics": [
        {"name": "adm", "partitions": [{"partition_index": 0, "replicas": [1]}, {"partition_index": 1, "replicas": None},
                                       {"partition_index": 0, "replicas": [1, 3]}, {"partition_index": 1, "replicas": []}]}]})
    assert [(p["error_code"], p["error_message"]) for p in alter["responses"][0]["partitions"]] == [
        (0, None), (85, None),
        (39, "The manual partition assignment includes broker 3, but no such broker is registered."),
        (39, "The manual partition assignment includes an empty replica list."),
    ]
    assert alter["allow_replication_factor_change"] is False
    assert wire.call(46, 0, {"timeout": 5000, "topics": None})["topics"] == []
    quorum = wire.call(55, 2, {"topics": [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]})
    (partition,) = quorum["topics"][0]["partitions"]
    assert (partition["error_code"], partition["leader_id"], [v["replica_id"] for v in partition["current_voters"]]) == (0, 1, [1])
    assert [n["node_id"] for n in quorum["nodes"]] == [1]
    wrong = wire.call(55, 2, {"topics": [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}, {"partition_index": 1}]}]})
    assert [p["error_code"] for p in wrong["topics"][0]["partitions"]] == [3, 3] and wrong["nodes"] == []
    resources = wire.call(74, 1, {"resource_types": []})
    assert {(r["resource_name"], r["resource_type"]) for r in resources["config_resources"]} >= {("1", 4), ("1", 8), ("adm", 2)}
    assert wire.call(74, 1, {"resource_types": [3]})["error_code"] == 35
