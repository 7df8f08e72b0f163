"""Conformance: the API versions Kafka 4.3 added, sent as raw requests at the new version.

No client the suite drives picks these versions by itself (librdkafka 2.16 stops at Produce v10,
Fetch v16, OffsetCommit v9; kafka-python 3.0.12 at Produce v9, Fetch v12), so each scenario
encodes the requests with kio: Produce v13 and OffsetCommit/OffsetFetch v10 by topic id (known,
unknown and the zero id), Fetch v18 with the replica's high watermark set, ListOffsets v11's
earliest-pending-upload target, DescribeLogDirs v5's IsCordoned and ListTransactions v2's
transactional id pattern. Topic ids differ between brokers: the observations name them
``<topic>``, ``<unknown-1>`` ... or None (the zero id).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from kafka_sidecar.protocol.records import decode_batches
from kafka_sidecar.server.dispatch import SUPPORTED_APIS

from tests.conformance.harness import Ctx
from tests.conformance.wire import (
    FETCH,
    FIND_COORDINATOR,
    INIT_PRODUCER_ID,
    LIST_OFFSETS,
    OFFSET_COMMIT,
    OFFSET_FETCH,
    PRODUCE,
    RETRIABLE_COORDINATOR,
    Wire,
    batch,
)

API_VERSIONS, DESCRIBE_LOG_DIRS, LIST_TRANSACTIONS = 18, 35, 66
UNKNOWN_TOPIC_ID, INVALID_REGULAR_EXPRESSION, UNSUPPORTED_VERSION = 100, 128, 35
EARLIEST_LOCAL, LATEST_TIERED, EARLIEST_PENDING_UPLOAD = -4, -5, -6
UNKNOWN_1, UNKNOWN_2 = uuid.UUID(int=1), uuid.UUID(int=2)


def id_names(topic_id: uuid.UUID) -> dict[Any, str | None]:
    return {topic_id: "<topic>", UNKNOWN_1: "<unknown-1>", UNKNOWN_2: "<unknown-2>", None: None, uuid.UUID(int=0): None}


def coordinator_call(w: Wire, key: str, key_type: int, api_key: int, version: int, data: dict[str, Any],
                     timeout: float = 30.0) -> dict[str, Any]:
    """FindCoordinator (which makes Kafka create its internal topic), then the request, retried
    while the coordinator is loading or not there yet (bounded)."""
    deadline = time.monotonic() + timeout
    while True:
        w.call(FIND_COORDINATOR, 4, {"key_type": key_type, "coordinator_keys": [key]})
        body = w.call(api_key, version, data)
        codes = {body.get("error_code")} | {g.get("error_code") for g in body.get("groups", [])}
        codes |= {p["error_code"] for t in body.get("topics", []) for p in t.get("partitions", [])}
        if not codes & RETRIABLE_COORDINATOR or time.monotonic() > deadline:
            return body
        time.sleep(0.2)


# --------------------------------------------------------------------------- ApiVersions


def scenario_api_version_ranges(ctx: Ctx) -> dict[str, int]:
    """The highest version advertised of each API kafka-sidecar implements."""
    w = ctx.wire()
    body = w.call(API_VERSIONS, 4, {"client_software_name": "conformance", "client_software_version": "1"})
    assert body["error_code"] == 0
    top = {k["api_key"]: k["max_version"] for k in body["api_keys"]}
    return {spec.name: top.get(key, -1) for key, spec in sorted(SUPPORTED_APIS.items())}


def test_api_version_ranges(conform):
    obs = conform(scenario_api_version_ranges)
    assert obs["Produce"] == 13 and obs["Fetch"] == 18 and obs["ListOffsets"] == 11
    assert obs["OffsetCommit"] == 10 and obs["OffsetFetch"] == 10
    assert obs["ListTransactions"] == 2 and obs["DescribeLogDirs"] == 5


# --------------------------------------------------------------------------- Produce v13, Fetch v18


def scenario_produce_v13_fetch_v18(ctx: Ctx) -> dict[str, Any]:
    w = ctx.wire()
    t = ctx.topic("t")
    w.create_topic(t, partitions=2)
    topic_id = w.metadata([t])["topics"][0]["topic_id"]
    names = id_names(topic_id)
    obs: dict[str, Any] = {}

    body = w.call(PRODUCE, 13, {"transactional_id": None, "acks": -1, "timeout": 15_000, "topic_data": [
        {"topic_id": topic_id, "partition_data": [{"index": 0, "records": batch([b"a", b"b"])},
                                                  {"index": 5, "records": batch([b"x"])}]},
        {"topic_id": UNKNOWN_1, "partition_data": [{"index": 0, "records": batch([b"x"])}]},
        {"topic_id": uuid.UUID(int=0), "partition_data": [{"index": 0, "records": batch([b"x"])}]},
        {"topic_id": topic_id, "partition_data": [{"index": 1, "records": batch([b"c"])}]},
    ]})
    # Kafka answers from a map: the order of topics is not part of the contract.
    obs["produce_v13"] = sorted(
        ([names[r["topic_id"]] or "", sorted((p["index"], p["error_code"], p["base_offset"], p["log_start_offset"])
                                             for p in r["partition_responses"])] for r in body["responses"]),
    )
    by_name = w.call(PRODUCE, 12, {"transactional_id": None, "acks": -1, "timeout": 15_000, "topic_data": [
        {"name": t, "partition_data": [{"index": 0, "records": batch([b"d"])}]}]})
    obs["produce_v12_after"] = [(p["index"], p["error_code"], p["base_offset"])
                                for r in by_name["responses"] for p in r["partition_responses"]]

    def fetch_v18(tid: uuid.UUID, high_watermark: int) -> list[Any]:
        body = w.call(FETCH, 18, {
            "replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
            "topics": [{"topic_id": tid, "partitions": [{
                "partition": p, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
                "log_start_offset": -1, "partition_max_bytes": 1 << 20, "high_watermark": high_watermark,
            } for p in (0, 1)]}],
        })
        assert body["error_code"] == 0
        return [[names[r["topic_id"]], [(
            p["partition_index"], p["error_code"], p["high_watermark"], p["last_stable_offset"], p["log_start_offset"],
            [(rec.offset, rec.value) for b in decode_batches(p["records"] or b"") for rec in b.records],
        ) for p in r["partitions"]]] for r in body["responses"]]

    # The replica's high watermark (KIP-1166) is a follower's field: a consumer's fetch ignores it.
    obs["fetch_v18"] = fetch_v18(topic_id, 1)
    obs["fetch_v18_hw_unknown"] = fetch_v18(topic_id, -1)
    obs["fetch_v18_unknown_id"] = fetch_v18(UNKNOWN_2, 2**63 - 1)
    return obs


def test_produce_v13_and_fetch_v18(conform):
    obs = conform(scenario_produce_v13_fetch_v18)
    assert obs["produce_v13"] == [
        ["", [[0, UNKNOWN_TOPIC_ID, -1, -1]]],
        ["<topic>", [[0, 0, 0, 0], [1, 0, 0, 0], [5, 3, -1, -1]]],
        ["<unknown-1>", [[0, UNKNOWN_TOPIC_ID, -1, -1]]],
    ]
    assert obs["produce_v12_after"] == [[0, 0, 2]]
    (topic,) = obs["fetch_v18"]
    assert topic[1][0][:3] == [0, 0, 3] and [v for _, v in topic[1][0][5]] == [b"a", b"b", b"d"]
    assert obs["fetch_v18_unknown_id"][0][1][0][1] == UNKNOWN_TOPIC_ID


# --------------------------------------------------------------------------- ListOffsets v11


def scenario_list_offsets_v11(ctx: Ctx) -> dict[str, Any]:
    w = ctx.wire()
    t = ctx.topic("t")
    w.create_topic(t)
    w.produce(t, batch([b"a", b"b", b"c"]))
    obs = {}
    for version in (8, 10, 11):
        for name, ts in (("earliest_local", EARLIEST_LOCAL), ("latest_tiered", LATEST_TIERED),
                         ("earliest_pending_upload", EARLIEST_PENDING_UPLOAD), ("minus_7", -7)):
            body = w.call(LIST_OFFSETS, version, {"replica_id": -1, "isolation_level": 0, "timeout": 1000, "topics": [
                {"name": t, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": ts}]}]})
            (p,) = body["topics"][0]["partitions"]
            obs[f"v{version}_{name}"] = (p["error_code"], p["offset"], p["timestamp"], p["leader_epoch"])
    return obs


def test_list_offsets_v11(conform):
    obs = conform(scenario_list_offsets_v11)
    assert obs["v11_earliest_pending_upload"] == [0, -1, -1, -1]  # no tiered storage
    assert obs["v10_earliest_pending_upload"][0] == UNSUPPORTED_VERSION
    assert obs["v11_earliest_local"][:2] == [0, 0]
    assert obs["v11_minus_7"][0] == UNSUPPORTED_VERSION


# --------------------------------------------------------------------------- DescribeLogDirs v5


def scenario_describe_log_dirs_v5(ctx: Ctx) -> dict[str, Any]:
    w = ctx.wire()
    t = ctx.topic("t")
    w.create_topic(t, partitions=2)
    w.produce(t, batch([b"a"]))
    body = w.call(DESCRIBE_LOG_DIRS, 5, {"topics": [{"topic": t, "partitions": [0, 1, 7]}]})
    return {
        "error": body["error_code"],
        "results": [{
            "error": r["error_code"], "is_cordoned": r["is_cordoned"], "space_known": r["total_bytes"] > 0 and r["usable_bytes"] > 0,
            # Kafka lists partitions in its log map's order: sorted here.
            "topics": [(x["name"], sorted((p["partition_index"], p["partition_size"] > 0, p["offset_lag"], p["is_future_key"])
                                          for p in x["partitions"])) for x in r["topics"]],
        } for r in body["results"]],
    }


def test_describe_log_dirs_v5(conform):
    obs = conform(scenario_describe_log_dirs_v5)
    (result,) = obs["results"]
    assert result["is_cordoned"] is False
    assert result["topics"] == [["<t>", [[0, True, 0, False], [1, False, 0, False]]]]


# --------------------------------------------------------------------------- OffsetCommit / OffsetFetch v10


def scenario_offsets_by_topic_id(ctx: Ctx) -> dict[str, Any]:
    w = ctx.wire()
    t, g = ctx.topic("t"), ctx.group("g")
    w.create_topic(t, partitions=2)
    topic_id = w.metadata([t])["topics"][0]["topic_id"]
    names = id_names(topic_id)

    def part(index: int, offset: int, metadata: str | None = None) -> dict[str, Any]:
        return {"partition_index": index, "committed_offset": offset, "committed_leader_epoch": -1, "committed_metadata": metadata}

    def commit_view(body: dict[str, Any]) -> list[Any]:
        return [[names[x["topic_id"]], [(p["partition_index"], p["error_code"]) for p in x["partitions"]]] for x in body["topics"]]

    def fetch_view(body: dict[str, Any]) -> list[Any]:
        return [{"group": gr["group_id"], "error": gr["error_code"], "topics": [
            [names[x["topic_id"]] if "topic_id" in x else x["name"], [(p["partition_index"], p["committed_offset"], p["metadata"], p["error_code"])
                                                         for p in x["partitions"]]] for x in gr["topics"]]}
            for gr in body["groups"]]

    obs: dict[str, Any] = {}
    # Unknown ids first and twice (answers merge by topic), a partition the topic lacks, two entries of the topic.
    obs["commit_v10"] = commit_view(coordinator_call(w, g, 0, OFFSET_COMMIT, 10, {
        "group_id": g, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None, "topics": [
            {"topic_id": UNKNOWN_1, "partitions": [part(0, 1)]},
            {"topic_id": topic_id, "partitions": [part(0, 5, "m"), part(9, 1)]},
            {"topic_id": UNKNOWN_2, "partitions": [part(0, 1)]},
            {"topic_id": UNKNOWN_1, "partitions": [part(1, 1)]},
            {"topic_id": topic_id, "partitions": [part(1, 6)]},
        ]}))

    def fetch(version: int, topics: list[dict[str, Any]] | None) -> list[Any]:
        return fetch_view(coordinator_call(w, g, 0, OFFSET_FETCH, version, {
            "groups": [{"group_id": g, "member_id": None, "member_epoch": -1, "topics": topics}], "require_stable": True}))

    obs["fetch_v10"] = fetch(10, [{"topic_id": UNKNOWN_1, "partition_indexes": [0]},
                                  {"topic_id": topic_id, "partition_indexes": [1, 0, 7]},
                                  {"topic_id": UNKNOWN_2, "partition_indexes": [3]}])
    obs["fetch_v10_all"] = fetch(10, None)
    obs["fetch_v9_all"] = fetch(9, None)
    return obs


def test_offsets_by_topic_id(conform):
    obs = conform(scenario_offsets_by_topic_id)
    assert obs["commit_v10"] == [
        ["<unknown-1>", [[0, UNKNOWN_TOPIC_ID], [1, UNKNOWN_TOPIC_ID]]],
        ["<topic>", [[9, 3], [0, 0], [1, 0]]],
        ["<unknown-2>", [[0, UNKNOWN_TOPIC_ID]]],
    ]
    (group,) = obs["fetch_v10"]
    assert group["topics"][0] == ["<topic>", [[1, 6, "", 0], [0, 5, "m", 0], [7, -1, "", 0]]]
    assert [x[0] for x in group["topics"][1:]] == ["<unknown-1>", "<unknown-2>"]
    assert obs["fetch_v10_all"][0]["topics"] == [["<topic>", [[0, 5, "m", 0], [1, 6, "", 0]]]]
    assert obs["fetch_v9_all"][0]["topics"] == [["<t>", [[0, 5, "m", 0], [1, 6, "", 0]]]]


# --------------------------------------------------------------------------- ListTransactions v2


def scenario_list_transactions_v2(ctx: Ctx) -> dict[str, Any]:
    w = ctx.wire()
    abc, abcd, other = ctx.topic("abc"), ctx.topic("abcd"), ctx.topic("other")
    for tid in (abc, abcd, other):
        body = coordinator_call(w, tid, 1, INIT_PRODUCER_ID, 5, {
            "transactional_id": tid, "transaction_timeout": 60_000, "producer_id": -1, "producer_epoch": -1})
        assert body["error_code"] == 0, body
    ours = {abc, abcd, other}
    run = ctx.run_id
    patterns = {
        "null": None, "empty": "", "exact": abc, "substring": "abc", "all_of_run": f".*-{run}",
        "invalid": "[", "case_insensitive": "(?i)" + abc.upper(), "alternation": f"{abc}|{other}",
        "word_class": rf"cf-[\w-]+-abc-{run}", "anchored": f"^{abcd}$",
        # RE2J's syntax, not Python's (server/apis/re2j.py).
        "re2_quote": f"\\Q{abc}\\E", "re2_mid_flags": f"cf-list-transactions-v2-(?i)ABC-{run}",
        "re2_posix": f"cf-[[:alnum:]-]+-abc-{run}", "re2_end_of_text": f"{other}\\z",
        "re2_lookahead": f"(?={abc}).*", "re2_possessive": f"{abc}.++", "re2_backreference": f"({abc})\\1",
        # non-capturing groups and empty flags (franz-go's regex consumers send .*(?:(?:a)|(?:b)).*)
        "re2_non_capturing": f".*(?:(?:{abc})|(?:{other})).*", "re2_empty_flags": f"(?){abc}",
        "re2_dangling_minus": f"(?-){abc}",
    }
    obs: dict[str, Any] = {}
    for name, pattern in patterns.items():
        body = w.call(LIST_TRANSACTIONS, 2, {"state_filters": [], "producer_id_filters": [], "duration_filter": -1,
                                             "transactional_id_pattern": pattern})
        obs[name] = (body["error_code"], sorted(s["transactional_id"] for s in body["transaction_states"]
                                                if s["transactional_id"] in ours))
    body = w.call(LIST_TRANSACTIONS, 2, {"state_filters": ["Ongoing"], "producer_id_filters": [], "duration_filter": -1,
                                         "transactional_id_pattern": f".*-{run}"})
    obs["pattern_and_state"] = (body["error_code"], [s["transactional_id"] for s in body["transaction_states"]])
    return obs


def test_list_transactions_v2(conform):
    obs = conform(scenario_list_transactions_v2)
    assert obs["null"] == obs["empty"] == obs["all_of_run"] == [0, ["<abc>", "<abcd>", "<other>"]]
    assert obs["exact"] == obs["case_insensitive"] == obs["word_class"] == [0, ["<abc>"]]
    assert obs["substring"] == [0, []]  # the whole id must match
    assert obs["invalid"] == [INVALID_REGULAR_EXPRESSION, []]
    assert obs["alternation"] == [0, ["<abc>", "<other>"]]
    assert obs["pattern_and_state"] == [0, []]
    assert obs["re2_quote"] == obs["re2_mid_flags"] == obs["re2_posix"] == [0, ["<abc>"]]
    assert obs["re2_end_of_text"] == [0, ["<other>"]]
    assert obs["re2_lookahead"] == obs["re2_possessive"] == obs["re2_backreference"] == [INVALID_REGULAR_EXPRESSION, []]
    assert obs["re2_non_capturing"] == [0, ["<abc>", "<other>"]]
    assert obs["re2_empty_flags"] == [0, ["<abc>"]]
    assert obs["re2_dangling_minus"] == [INVALID_REGULAR_EXPRESSION, []]


# --------------------------------------------------------------------------- JoinGroup v0-1


def scenario_join_group_v0_v1(ctx: Ctx) -> dict[str, Any]:
    """JoinGroup v0 and v1 (Kafka 4.3 serves them again): a new member joins at once (no
    MEMBER_ID_REQUIRED before v4); v0 has no rebalance timeout (the session timeout stands in)."""
    w = ctx.wire("join-old")
    obs: dict[str, Any] = {}
    for version in (0, 1):
        g = ctx.group(f"g{version}")
        data = {"group_id": g, "session_timeout": 10_000, "rebalance_timeout": 10_000, "member_id": "",
                "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b"m"}]}
        join = coordinator_call(w, g, 0, 11, version, data)
        member = join["member_id"]
        obs[f"v{version}_join"] = {
            "error": join["error_code"], "generation": join["generation_id"], "protocol": join["protocol_name"],
            "leader_is_member": join["leader"] == member, "member_id_prefix": member.split("-")[0],
            "members": [(m["member_id"] == member, m["metadata"]) for m in join["members"]],
        }
        sync = w.call(14, 0, {"group_id": g, "generation_id": join["generation_id"], "member_id": member,
                              "assignments": [{"member_id": member, "assignment": b"a"}]})
        obs[f"v{version}_sync"] = (sync["error_code"], sync["assignment"])
        obs[f"v{version}_heartbeat"] = w.call(12, 0, {"group_id": g, "generation_id": join["generation_id"], "member_id": member})["error_code"]
        obs[f"v{version}_leave"] = w.call(13, 0, {"group_id": g, "member_id": member})["error_code"]
    return obs


def test_join_group_v0_v1(conform):
    obs = conform(scenario_join_group_v0_v1)
    for version in (0, 1):
        assert obs[f"v{version}_join"]["error"] == 0 and obs[f"v{version}_join"]["generation"] == 1
        assert obs[f"v{version}_sync"] == [0, b"a"]
        assert obs[f"v{version}_heartbeat"] == 0 and obs[f"v{version}_leave"] == 0


# --------------------------------------------------------------------------- single-node admin APIs


def scenario_single_node_admin(ctx: Ctx) -> dict[str, Any]:
    """ElectLeaders, List/AlterPartitionReassignments, DescribeQuorum and ListConfigResources on
    one node: nothing to elect or reassign, this node the only voter."""
    w = ctx.wire()
    t = ctx.topic("t")
    w.create_topic(t, partitions=2)
    missing = ctx.topic("missing")
    obs: dict[str, Any] = {}

    def elect(version: int, election_type: int, topics: list[dict[str, Any]] | None) -> Any:
        body = w.call(43, version, {"election_type": election_type, "topic_partitions": topics, "timeout": 5000})
        return [body.get("error_code"), sorted([r["topic"], [(p["partition_id"], p["error_code"], p["error_message"])
                                                             for p in r["partition_result"]]]
                                               for r in body["replica_election_results"] if r["topic"] in (t, missing))]

    named = [{"topic": t, "partitions": [0, 1, 5]}, {"topic": missing, "partitions": [0]}]
    for version in (0, 1, 2):
        obs[f"elect_v{version}"] = elect(version, 0, named)
    obs["elect_unclean"] = elect(2, 1, [{"topic": t, "partitions": [0]}])
    obs["elect_all"] = elect(2, 0, None)
    obs["elect_bad_type"] = elect(2, 5, [{"topic": t, "partitions": [0]}])
    obs["elect_none"] = elect(2, 0, [])

    for name, topics in (("all", None), ("named", [{"name": t, "partition_indexes": [0, 7]}, {"name": missing, "partition_indexes": [0]}])):
        body = w.call(46, 0, {"timeout": 5000, "topics": topics})
        obs[f"list_reassignments_{name}"] = [body["error_code"], body["error_message"], body["topics"]]

    def alter(version: int, allow: bool, topics: list[dict[str, Any]]) -> Any:
        body = w.call(45, version, {"timeout": 5000, "allow_replication_factor_change": allow, "topics": topics})
        return [body["error_code"], body.get("allow_replication_factor_change"),
                [[r["name"], [(p["partition_index"], p["error_code"], p["error_message"]) for p in r["partitions"]]] for r in body["responses"]]]

    def part(index: int, replicas: list[int] | None) -> dict[str, Any]:
        return {"partition_index": index, "replicas": replicas}

    for version in (0, 1):
        obs[f"alter_v{version}"] = alter(version, True, [
            {"name": t, "partitions": [part(0, [1]), part(1, None), part(7, [1])]}, {"name": missing, "partitions": [part(0, [1])]}])
    obs["alter_invalid"] = alter(1, False, [{"name": t, "partitions": [part(0, [2]), part(1, [1, 1]), part(0, []), part(1, [2, 2])]}])

    metadata_partition = {"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}
    for name, version, topics in (
        ("quorum_v0", 0, [metadata_partition]), ("quorum_v1", 1, [metadata_partition]), ("quorum_v2", 2, [metadata_partition]),
        ("quorum_and_topic", 2, [metadata_partition, {"topic_name": t, "partitions": [{"partition_index": 0}]}]),
        ("quorum_partition_1", 2, [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 1}]}]),
    ):
        body = w.call(55, version, {"topics": topics})
        obs[name] = {
            "error": body["error_code"], "message": body.get("error_message"),
            "topics": [[x["topic_name"], [{
                "error": p["error_code"], "message": p.get("error_message"), "leader": p["leader_id"], "epoch_set": p["leader_epoch"] > 0,
                "voters": [(v["replica_id"], v["log_end_offset"] == p["high_watermark"], v.get("last_fetch_timestamp", 0) > 0 or version == 0)
                           for v in p["current_voters"]],
                "observers": p["observers"]} for p in x["partitions"]]] for x in body["topics"]],
            "nodes": [(n["node_id"], len(n["listeners"])) for n in body.get("nodes", [])],
        }

    def config_resources(version: int, types: list[int]) -> Any:
        body = w.call(74, version, {"resource_types": types})
        return [body["error_code"], sorted((r["resource_name"], r.get("resource_type", -1)) for r in body["config_resources"]
                                           if r.get("resource_type") != 2 or r["resource_name"] == t)]

    obs["config_resources_v0"] = config_resources(0, [])
    for types in ([], [2], [4], [8], [16], [32], [2, 4], [1], [99]):
        obs[f"config_resources_{types}"] = config_resources(1, types)
    return obs


def test_single_node_admin(conform):
    obs = conform(scenario_single_node_admin)
    not_needed = [84, "Leader election not needed for topic partition."]
    assert obs["elect_v2"][1][1] == ["<t>", [[0, *not_needed], [1, *not_needed], [5, 3, "No such partition as <t>-5"]]]
    assert obs["elect_all"] == [0, [["<t>", []]]]
    assert obs["list_reassignments_all"] == [0, None, []]
    assert obs["alter_v1"][2][0] == ["<t>", [[0, 0, None], [1, 85, None], [7, 3, "Unable to find partition <t>:7."]]]
    assert obs["quorum_v2"]["topics"][0][1][0]["voters"] == [[1, True, True]]
    assert obs["config_resources_[]"] == [0, [["1", 4], ["1", 8], ["<t>", 2]]]
    assert obs["config_resources_[1]"][0] == UNSUPPORTED_VERSION
