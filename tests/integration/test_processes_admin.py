"""``serve --processes 2``: admin state changed through one node is in force on the other.

ACLs, client quotas, SCRAM users, finalized features and dynamic broker configs are recorded in
the cluster's metadata log (server/cluster/admin.py): a change asked of one node (over TCP with
the Wire helper, so the node is chosen) is seen and enforced by the other, and a node restarted
after SIGKILL has it back from the log. Also: a group or transactional request sent to a node that
is not its coordinator is answered NOT_COORDINATOR, as Kafka's coordinators do.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.conformance.wire import Wire, batch
from tests.support import SidecarProcess, kafka_bin, kafka_tool_missing, running

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

PRODUCE, FIND_COORDINATOR, API_VERSIONS = 0, 10, 18
DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 32, 44
DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31
DESCRIBE_CLIENT_QUOTAS, ALTER_CLIENT_QUOTAS = 48, 49
DESCRIBE_SCRAM, ALTER_SCRAM = 50, 51
UPDATE_FEATURES = 57
TOPIC_AUTHORIZATION_FAILED, RESOURCE_NOT_FOUND = 29, 91
TOPIC, BROKER, GROUP = 2, 4, 32
ANONYMOUS = "User:ANONYMOUS"
QUIET = {"log_level": 3}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    proc = SidecarProcess(tmp_path_factory.mktemp("processes-admin") / "data", processes=2, overrides={
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found": "true",
        "group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "4",
        "transaction.state.log.num.partitions": "4",
    })
    with running(proc):
        yield proc


def _node(cluster: SidecarProcess, k: int, client_id: str = "admin-test") -> Wire:
    return Wire(f"127.0.0.1:{cluster.ports[k - 1]}", client_id=client_id)


def _topic_on(cluster: SidecarProcess, name: str, partitions: int) -> dict[int, int]:
    """Create ``name`` and return partition -> leader node."""
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{cluster.ports[0]}", **QUIET})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    with _node(cluster, 1) as w:
        (t,) = w.metadata([name])["topics"]
    return {p["partition_index"]: p["leader_id"] for p in t["partitions"]}


def _eventually(check: Any, timeout: float = 10.0) -> Any:
    """Produce and Fetch see another node's change within the metadata log's poll interval."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result or time.monotonic() > deadline:
            return result
        time.sleep(0.05)


def _acl(topic: str, op: int = 4, permission: int = 2) -> dict[str, Any]:
    """A LITERAL topic ACL for ANONYMOUS (op 4 WRITE, permission 2 DENY)."""
    return {"resource_type": TOPIC, "resource_name": topic, "resource_pattern_type": 3, "principal": ANONYMOUS,
            "host": "*", "operation": op, "permission_type": permission}


def _describe_acls(w: Wire, topic: str) -> list[dict[str, Any]]:
    answer = w.call(DESCRIBE_ACLS, 3, {"resource_type_filter": TOPIC, "resource_name_filter": topic, "pattern_type_filter": 3,
                                       "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1})
    assert answer["error_code"] == 0, answer
    return [a for r in answer["resources"] for a in r["acls"]]


def test_acl_created_through_one_node_is_enforced_by_the_other(cluster: SidecarProcess) -> None:
    leaders = _topic_on(cluster, "guarded", 2)
    p2 = next(p for p, k in leaders.items() if k == 2)
    with _node(cluster, 2) as w:
        assert w.produce("guarded", batch([b"before"]), partition=p2)["error"] == 0
    with _node(cluster, 1) as w:
        answer = w.call(CREATE_ACLS, 3, {"creations": [_acl("guarded")]})
        assert [r["error_code"] for r in answer["results"]] == [0]
    with _node(cluster, 2) as w:
        assert [(a["principal"], a["operation"], a["permission_type"]) for a in _describe_acls(w, "guarded")] == [(ANONYMOUS, 4, 2)]
        assert _eventually(lambda: w.produce("guarded", batch([b"denied"]), partition=p2)["error"] == TOPIC_AUTHORIZATION_FAILED)
        # Deleted through node 2: node 1 lists none at once, and node 2 takes writes again.
        answer = w.call(DELETE_ACLS, 3, {"filters": [{
            "resource_type_filter": TOPIC, "resource_name_filter": "guarded", "pattern_type_filter": 3,
            "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}]})
        (result,) = answer["filter_results"]
        assert result["error_code"] == 0 and len(result["matching_acls"]) == 1
    with _node(cluster, 1) as w:
        assert _describe_acls(w, "guarded") == []
    with _node(cluster, 2) as w:
        assert w.produce("guarded", batch([b"after"]), partition=p2)["error"] == 0


def test_acls_listed_by_kafka_acls_tool_whichever_node_it_asks(cluster: SidecarProcess) -> None:
    admin = AdminClient({"bootstrap.servers": ",".join(f"127.0.0.1:{p}" for p in cluster.ports), **QUIET})
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    binding = AclBinding(ResourceType.TOPIC, "listed", ResourcePatternType.LITERAL, "User:alice", "*",
                         AclOperation.READ, AclPermissionType.ALLOW)
    admin.create_acls([binding])[binding].result(30)
    flt = AclBindingFilter(ResourceType.TOPIC, "listed", ResourcePatternType.LITERAL, None, None, AclOperation.ANY, AclPermissionType.ANY)
    for k in (1, 2):
        with _node(cluster, k) as w:
            assert [a["principal"] for a in _describe_acls(w, "listed")] == ["User:alice"]
    assert admin.delete_acls([flt])[flt].result(30) == [binding]


def test_quota_set_through_one_node_throttles_on_the_other(cluster: SidecarProcess) -> None:
    leaders = _topic_on(cluster, "metered", 2)
    p2 = next(p for p, k in leaders.items() if k == 2)
    entity = [{"entity_type": "client-id", "entity_name": "slow"}]
    with _node(cluster, 1) as w:
        answer = w.call(ALTER_CLIENT_QUOTAS, 1, {"entries": [{"entity": entity, "ops": [
            {"key": "producer_byte_rate", "value": 1024.0, "remove": False}]}], "validate_only": False})
        assert [e["error_code"] for e in answer["entries"]] == [0]
    with _node(cluster, 2) as w:
        described = w.call(DESCRIBE_CLIENT_QUOTAS, 1, {"components": [
            {"entity_type": "client-id", "match_type": 0, "match": "slow"}], "strict": False})
        assert [v for e in described["entries"] for v in e["values"]] == [{"key": "producer_byte_rate", "value": 1024.0}]
    with _node(cluster, 2, client_id="slow") as w:
        def throttled() -> bool:
            body = w.send_frame(PRODUCE, 9, w.produce_frame("metered", batch([b"x" * 20_000]), partition=p2))
            assert w.produce_result(body)["error"] == 0
            return body["throttle_time"] > 0
        assert _eventually(throttled)
    with _node(cluster, 2) as w:  # removed through node 2: node 1 describes none
        w.call(ALTER_CLIENT_QUOTAS, 1, {"entries": [{"entity": entity, "ops": [
            {"key": "producer_byte_rate", "value": 0.0, "remove": True}]}], "validate_only": False})
    with _node(cluster, 1) as w:
        described = w.call(DESCRIBE_CLIENT_QUOTAS, 1, {"components": [
            {"entity_type": "client-id", "match_type": 0, "match": "slow"}], "strict": False})
        assert described["entries"] == []


def _kafka_tool(script: str, *args: str, tmp: Path) -> str:
    env = {**{k: v for k, v in os.environ.items() if k not in ("KAFKA_OPTS", "JMX_PORT")},
           "KAFKA_HEAP_OPTS": "-Xmx256m", "LOG_DIR": str(tmp)}
    done = subprocess.run([str(kafka_bin(script)), *args], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, f"{script} {args}: {done.stdout[-2000:]} {done.stderr[-2000:]}"
    return done.stdout


@pytest.mark.skipif(kafka_tool_missing("kafka-configs.sh") is not None, reason=str(kafka_tool_missing("kafka-configs.sh")))
def test_kafka_configs_and_acls_tools_see_one_cluster(cluster: SidecarProcess, tmp_path: Path) -> None:
    """kafka-configs.sh sets a client quota through node 2's bootstrap: both nodes describe it;
    an ACL made through node 2 is listed by kafka-acls.sh bootstrapped at node 1."""
    _kafka_tool("kafka-configs.sh", "--bootstrap-server", f"127.0.0.1:{cluster.ports[1]}", "--alter", "--entity-type", "clients",
                "--entity-name", "tooled", "--add-config", "producer_byte_rate=2048", tmp=tmp_path)
    for k in (1, 2):
        with _node(cluster, k) as w:
            described = w.call(DESCRIBE_CLIENT_QUOTAS, 1, {"components": [
                {"entity_type": "client-id", "match_type": 0, "match": "tooled"}], "strict": False})
            assert [v for e in described["entries"] for v in e["values"]] == [{"key": "producer_byte_rate", "value": 2048.0}]
    with _node(cluster, 2) as w:
        assert [r["error_code"] for r in w.call(CREATE_ACLS, 3, {"creations": [_acl("tooled", op=3, permission=3)]})["results"]] == [0]
    listed = _kafka_tool("kafka-acls.sh", "--bootstrap-server", f"127.0.0.1:{cluster.ports[0]}", "--list", "--topic", "tooled", tmp=tmp_path)
    assert "(principal=User:ANONYMOUS, host=*, operation=READ, permissionType=ALLOW)" in listed, listed


def _scram_upsertion(user: str, password: str) -> dict[str, Any]:
    salt = os.urandom(16)
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, 4096)
    return {"name": user, "mechanism": 1, "iterations": 4096, "salt": salt, "salted_password": salted}


def test_scram_user_made_through_one_node_is_known_to_the_other(cluster: SidecarProcess) -> None:
    with _node(cluster, 2) as w:
        answer = w.call(ALTER_SCRAM, 0, {"deletions": [], "upsertions": [_scram_upsertion("carol", "carol-secret")]})
        assert answer["results"] == [{"user": "carol", "error_code": 0, "error_message": None}]
    with _node(cluster, 1) as w:
        answer = w.call(DESCRIBE_SCRAM, 0, {"users": [{"name": "carol"}]})
        assert answer["results"][0]["error_code"] == 0
        assert answer["results"][0]["credential_infos"] == [{"mechanism": 1, "iterations": 4096}]
        # Deleted through node 1: node 2 knows it is gone.
        answer = w.call(ALTER_SCRAM, 0, {"deletions": [{"name": "carol", "mechanism": 1}], "upsertions": []})
        assert answer["results"][0]["error_code"] == 0
    with _node(cluster, 2) as w:
        assert w.call(DESCRIBE_SCRAM, 0, {"users": [{"name": "carol"}]})["results"][0]["error_code"] == RESOURCE_NOT_FOUND
        # The check against what node 1 did: deleting again is RESOURCE_NOT_FOUND here too.
        answer = w.call(ALTER_SCRAM, 0, {"deletions": [{"name": "carol", "mechanism": 1}], "upsertions": []})
        assert answer["results"][0]["error_code"] == RESOURCE_NOT_FOUND


def _finalized(w: Wire) -> dict[str, int]:
    answer = w.call(API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
    return {f["name"]: f["max_version_level"] for f in answer["finalized_features"]}


def test_feature_level_updated_through_one_node_is_finalized_on_the_other(cluster: SidecarProcess) -> None:
    with _node(cluster, 1) as w:
        assert _finalized(w).get("streams.version") == 1
    with _node(cluster, 2) as w:
        answer = w.call(UPDATE_FEATURES, 1, {"timeout_ms": 30000, "validate_only": False, "feature_updates": [
            {"feature": "streams.version", "max_version_level": 0, "upgrade_type": 2}]})
        assert answer["error_code"] == 0, answer
    with _node(cluster, 1) as w:
        assert "streams.version" not in _finalized(w)
        answer = w.call(UPDATE_FEATURES, 1, {"timeout_ms": 30000, "validate_only": False, "feature_updates": [
            {"feature": "streams.version", "max_version_level": 1, "upgrade_type": 1}]})
        assert answer["error_code"] == 0, answer
    with _node(cluster, 2) as w:
        assert _finalized(w).get("streams.version") == 1


def _broker_config(w: Wire, node: int, name: str) -> tuple[str | None, int] | None:
    answer = w.call(DESCRIBE_CONFIGS, 4, {"resources": [{"resource_type": BROKER, "resource_name": str(node),
                                                         "configuration_keys": [name]}],
                                          "include_synonyms": False, "include_documentation": False})
    (r,) = answer["results"]
    assert r["error_code"] == 0, r
    return next(((c["value"], c["config_source"]) for c in r["configs"]), None)


def _alter_broker(w: Wire, resource: str, name: str, value: str) -> None:
    answer = w.call(INCREMENTAL_ALTER_CONFIGS, 1, {"validate_only": False, "resources": [
        {"resource_type": BROKER, "resource_name": resource, "configs": [{"name": name, "config_operation": 0, "value": value}]}]})
    assert [r["error_code"] for r in answer["responses"]] == [0], answer


def test_broker_configs_default_on_every_node_and_per_node_on_its_node(cluster: SidecarProcess) -> None:
    with _node(cluster, 1) as w:
        _alter_broker(w, "", "log.cleaner.backoff.ms", "12345")  # the cluster-wide default (source 3: DYNAMIC_DEFAULT_BROKER_CONFIG)
    with _node(cluster, 2) as w:
        assert _broker_config(w, 2, "log.cleaner.backoff.ms") == ("12345", 3)
        _alter_broker(w, "2", "log.cleaner.backoff.ms", "23456")  # node 2's own (source 2: DYNAMIC_BROKER_CONFIG)
        assert _broker_config(w, 2, "log.cleaner.backoff.ms") == ("23456", 2)
    with _node(cluster, 1) as w:
        assert _broker_config(w, 1, "log.cleaner.backoff.ms") == ("12345", 3)


def test_group_config_set_through_one_node_is_the_other_nodes(cluster: SidecarProcess) -> None:
    """kafka-configs.sh --entity-type groups may reach any node; the group's coordinator uses it."""
    with _node(cluster, 1) as w:
        answer = w.call(INCREMENTAL_ALTER_CONFIGS, 1, {"validate_only": False, "resources": [
            {"resource_type": GROUP, "resource_name": "configured", "configs": [
                {"name": "consumer.session.timeout.ms", "config_operation": 0, "value": "50000"}]}]})
        assert [r["error_code"] for r in answer["responses"]] == [0], answer
    with _node(cluster, 2) as w:
        answer = w.call(DESCRIBE_CONFIGS, 4, {"resources": [{"resource_type": GROUP, "resource_name": "configured",
                                                             "configuration_keys": ["consumer.session.timeout.ms"]}],
                                              "include_synonyms": False, "include_documentation": False})
        (r,) = answer["results"]
        assert [(c["name"], c["value"], c["config_source"]) for c in r["configs"]] == [("consumer.session.timeout.ms", "50000", 8)]


def test_a_restarted_node_has_the_admin_state_from_the_log(cluster: SidecarProcess) -> None:
    with _node(cluster, 1) as w:
        assert [r["error_code"] for r in w.call(CREATE_ACLS, 3, {"creations": [_acl("kept", op=3, permission=3)]})["results"]] == [0]
        _alter_broker(w, "", "log.cleaner.backoff.ms", "34567")
        w.call(ALTER_SCRAM, 0, {"deletions": [], "upsertions": [_scram_upsertion("dave", "dave-secret")]})
    pids = cluster.node_pids()
    os.kill(pids[2], signal.SIGKILL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and cluster.node_pids().get(2) in (None, pids[2]):
        time.sleep(0.2)
    assert cluster.node_pids().get(2) not in (None, pids[2]), "node 2 was not restarted"

    def answered() -> bool:
        try:
            with _node(cluster, 2) as w:
                return bool(_describe_acls(w, "kept"))
        except OSError:
            return False
    assert _eventually(answered, timeout=60)
    with _node(cluster, 2) as w:
        assert [(a["operation"], a["permission_type"]) for a in _describe_acls(w, "kept")] == [(3, 3)]
        assert _broker_config(w, 2, "log.cleaner.backoff.ms") == ("23456", 2)  # its own, over the default
        assert w.call(DESCRIBE_SCRAM, 0, {"users": [{"name": "dave"}]})["results"][0]["error_code"] == 0


# ---- NOT_COORDINATOR from a node that does not coordinate the group / transactional id ----------------

NOT_COORDINATOR, UNKNOWN_MEMBER_ID = 16, 25
OFFSET_COMMIT, OFFSET_FETCH, JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP, DESCRIBE_GROUPS = 8, 9, 11, 12, 13, 14, 15
INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT = 22, 24, 25, 26, 28
OFFSET_DELETE, CONSUMER_GROUP_HEARTBEAT, DESCRIBE_TRANSACTIONS = 47, 68, 65


def _coordinator_of(cluster: SidecarProcess, key: str, key_type: int) -> int:
    with _node(cluster, 1) as w:
        (c,) = w.call(FIND_COORDINATOR, 4, {"key_type": key_type, "coordinator_keys": [key]})["coordinators"]
    assert c["error_code"] == 0, c
    return c["node_id"]


def test_group_requests_to_the_wrong_node_answer_not_coordinator(cluster: SidecarProcess) -> None:
    _topic_on(cluster, "coordinated", 1)
    group = "spread-group"
    right = _coordinator_of(cluster, group, 0)
    with _node(cluster, 3 - right) as w:
        join = w.call(JOIN_GROUP, 9, {"group_id": group, "session_timeout": 30000, "rebalance_timeout": 30000, "member_id": "",
                                      "group_instance_id": None, "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}],
                                      "reason": None})
        assert (join["error_code"], join["member_id"], join["generation_id"], join["members"]) == (NOT_COORDINATOR, "", -1, [])
        sync = w.call(SYNC_GROUP, 5, {"group_id": group, "generation_id": 1, "member_id": "m", "group_instance_id": None,
                                      "protocol_type": "consumer", "protocol_name": "range", "assignments": []})
        assert sync["error_code"] == NOT_COORDINATOR
        assert w.call(HEARTBEAT, 4, {"group_id": group, "generation_id": 1, "member_id": "m", "group_instance_id": None})["error_code"] == NOT_COORDINATOR
        leave = w.call(LEAVE_GROUP, 5, {"group_id": group, "members": [{"member_id": "m", "group_instance_id": None, "reason": None}]})
        assert (leave["error_code"], leave["members"]) == (NOT_COORDINATOR, [])
        commit = w.call(OFFSET_COMMIT, 9, {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
                                           "topics": [{"name": "coordinated", "partitions": [
                                               {"partition_index": 0, "committed_offset": 0, "committed_leader_epoch": -1, "committed_metadata": ""}]}]})
        assert [p["error_code"] for t in commit["topics"] for p in t["partitions"]] == [NOT_COORDINATOR]
        fetched = w.call(OFFSET_FETCH, 9, {"groups": [{"group_id": group, "member_id": None, "member_epoch": -1, "topics": None}],
                                           "require_stable": False})
        assert [(g["group_id"], g["error_code"], g["topics"]) for g in fetched["groups"]] == [(group, NOT_COORDINATOR, [])]
        old = w.call(OFFSET_FETCH, 7, {"group_id": group, "topics": None, "require_stable": False})
        assert (old["error_code"], old["topics"]) == (NOT_COORDINATOR, [])
        deleted = w.call(OFFSET_DELETE, 0, {"group_id": group, "topics": [{"name": "coordinated", "partitions": [{"partition_index": 0}]}]})
        assert (deleted["error_code"], deleted["topics"]) == (NOT_COORDINATOR, [])
        described = w.call(DESCRIBE_GROUPS, 5, {"groups": [group], "include_authorized_operations": False})
        assert [(g["group_id"], g["error_code"], g["group_state"]) for g in described["groups"]] == [(group, NOT_COORDINATOR, "")]
        beat = w.call(CONSUMER_GROUP_HEARTBEAT, 0, {"group_id": group, "member_id": str(uuid.uuid4()), "member_epoch": 0, "instance_id": None,
                                                    "rack_id": None, "rebalance_timeout": 30000, "subscribed_topic_names": ["coordinated"],
                                                    "server_assignor": None, "topic_partitions": []})
        assert (beat["error_code"], beat["error_message"], beat["member_id"]) == (NOT_COORDINATOR, "This is not the correct coordinator.", None)
    with _node(cluster, right) as w:  # the coordinator serves it
        assert w.call(HEARTBEAT, 4, {"group_id": group, "generation_id": 1, "member_id": "m", "group_instance_id": None})["error_code"] == UNKNOWN_MEMBER_ID


def test_transactional_requests_to_the_wrong_node_answer_not_coordinator(cluster: SidecarProcess) -> None:
    _topic_on(cluster, "coordinated-txn", 1)
    txn = "spread-txn"
    right = _coordinator_of(cluster, txn, 1)
    with _node(cluster, 3 - right) as w:
        init = w.call(INIT_PRODUCER_ID, 5, {"transactional_id": txn, "transaction_timeout": 60000, "producer_id": -1, "producer_epoch": -1})
        assert (init["error_code"], init["producer_id"], init["producer_epoch"]) == (NOT_COORDINATOR, -1, -1)
        added = w.call(ADD_PARTITIONS_TO_TXN, 3, {"v3_and_below_transactional_id": txn, "v3_and_below_producer_id": 1000,
                                                  "v3_and_below_producer_epoch": 0,
                                                  "v3_and_below_topics": [{"name": "coordinated-txn", "partitions": [0]}]})
        assert [p["partition_error_code"] for t in added["results_by_topic_v3_and_below"] for p in t["results_by_partition"]] == [NOT_COORDINATOR]
        offsets = w.call(ADD_OFFSETS_TO_TXN, 3, {"transactional_id": txn, "producer_id": 1000, "producer_epoch": 0, "group_id": "g"})
        assert offsets["error_code"] == NOT_COORDINATOR
        ended = w.call(END_TXN, 4, {"transactional_id": txn, "producer_id": 1000, "producer_epoch": 0, "committed": True})
        assert ended["error_code"] == NOT_COORDINATOR
        described = w.call(DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [txn]})
        assert [s["error_code"] for s in described["transaction_states"]] == [NOT_COORDINATOR]
    with _node(cluster, right) as w:  # the coordinator serves it
        init = w.call(INIT_PRODUCER_ID, 5, {"transactional_id": txn, "transaction_timeout": 60000, "producer_id": -1, "producer_epoch": -1})
        assert init["error_code"] == 0 and init["producer_id"] >= 0


# ---- a SCRAM user made through node 2 logs in on node 1 ----------------------------------------------

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" '
              'user_admin="admin-secret";')


@pytest.fixture(scope="module")
def sasl_cluster(tmp_path_factory: pytest.TempPathFactory):
    """Every node's one listener SASL_PLAINTEXT (PLAIN for the admin, SCRAM for users made at run time)."""
    proc = SidecarProcess(tmp_path_factory.mktemp("processes-sasl") / "data", processes=2, overrides={
        "listener.security.protocol.map": "PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256", "sasl.jaas.config": PLAIN_JAAS,
    })
    with running(proc):
        yield proc


def _as_admin(w: Wire) -> Wire:
    """SASL/PLAIN on a Wire connection (SaslHandshake v1, SaslAuthenticate v2)."""
    assert w.call(17, 1, {"mechanism": "PLAIN"})["error_code"] == 0
    assert w.call(36, 2, {"auth_bytes": b"\x00admin\x00admin-secret"})["error_code"] == 0
    return w


def _scram_login(cluster: SidecarProcess, node: int, user: str, password: str) -> str | None:
    """A librdkafka client's SCRAM-SHA-256 login on ``node`` alone: None, or the error it got."""
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{cluster.ports[node - 1]}", "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": user, "sasl.password": password, **QUIET})
    try:
        admin.list_topics(timeout=10)
        return None
    except confluent_kafka.KafkaException as e:
        return str(e)


def test_scram_user_made_through_node_2_logs_in_on_node_1(sasl_cluster: SidecarProcess) -> None:
    assert _scram_login(sasl_cluster, 1, "erin", "erin-secret") is not None  # no such user yet
    with _as_admin(_node(sasl_cluster, 2)) as w:
        answer = w.call(ALTER_SCRAM, 0, {"deletions": [], "upsertions": [_scram_upsertion("erin", "erin-secret")]})
        assert answer["results"] == [{"user": "erin", "error_code": 0, "error_message": None}]
    assert _scram_login(sasl_cluster, 1, "erin", "erin-secret") is None
    assert _scram_login(sasl_cluster, 1, "erin", "wrong") is not None
    with _as_admin(_node(sasl_cluster, 1)) as w:  # deleted through node 1: node 2 refuses the login
        assert w.call(ALTER_SCRAM, 0, {"deletions": [{"name": "erin", "mechanism": 1}], "upsertions": []})["results"][0]["error_code"] == 0
    assert _scram_login(sasl_cluster, 2, "erin", "erin-secret") is not None
