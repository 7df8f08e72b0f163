"""Authorization (issue 9): ACLs over TCP with real clients, real processes and real files.

- Without an authorizer (the default) the ACL APIs answer SECURITY_DISABLED exactly as Apache
  Kafka 4.1.0 without an authorizer does: raw DescribeAcls/CreateAcls/DeleteAcls (v1-v3) and
  ``kafka-acls.sh`` are compared with the reference broker (``bench/reference.py``, started once
  for this module, in the background), and kafka-python / confluent-kafka raise the same errors.
- With ``authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer``: ACL CRUD
  through kafka-python, confluent-kafka and ``kafka-acls.sh``; enforcement with Kafka's error codes
  for produce, consume, metadata, groups and admin requests (the clients raise
  TopicAuthorizationFailed, GroupAuthorizationFailed, ClusterAuthorizationFailed...), lifted by
  adding ACLs; DENY over ALLOW; prefixed and wildcard patterns; ``allow.everyone.if.no.acl.found``;
  ``super.users``; ACLs surviving a restart and a SIGKILL; a damaged ACL file or an unknown
  authorizer class stopping the start; denied clients not disturbing others.

Every PLAINTEXT client is ``User:ANONYMOUS``: ACLs are set up as a super user (``super.users=
User:ANONYMOUS``), then the server is restarted without it on the same data dir (the ACLs persist),
or ``User:ANONYMOUS`` is given ALTER on the cluster so it can manage ACLs while denied elsewhere.
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import kafka.errors as kerrors
import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka import KafkaError as CkError
from confluent_kafka.admin import AclBinding as CkAcl
from confluent_kafka.admin import AclBindingFilter as CkFilter
from confluent_kafka.admin import AclOperation as CkOp
from confluent_kafka.admin import AclPermissionType as CkPerm
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.admin import ResourcePatternType as CkPattern
from confluent_kafka.admin import ResourceType as CkType
from kafka import KafkaProducer
from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    KafkaAdminClient,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from kafka_sidecar.client.blocking import KafkaClientError, _BrokerConnection, parse_bootstrap
from kafka_sidecar.protocol.records import Record, encode_batch
from kafka_sidecar.server.security.acls import ACLS_FILE, AclFile

from bench.reference import ReferenceKafka, find_kafka_home, unavailable_reason
from tests.support import RECENT_TS, SidecarProcess, sidecar_command, wait_until

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ENFORCING = {"authorizer.class.name": AUTHORIZER}
SUPER = {**ENFORCING, "super.users": "User:ANONYMOUS"}
ANON = "User:ANONYMOUS"
QUIET = {"log.connection.close": False, "log_level": 0}
ZERO_UUID = uuid.UUID(int=0)

# Kafka error codes
TOPIC_AUTHZ, GROUP_AUTHZ, CLUSTER_AUTHZ, TXN_AUTHZ, SECURITY_DISABLED = 29, 30, 31, 53, 54
INVALID_REQUEST, UNKNOWN_SERVER_ERROR = 42, -1


# ---- raw requests ---------------------------------------------------------------------------


def code(v: Any) -> int:
    return int(getattr(v, "value", v))


def plain(x: Any) -> Any:
    """A decoded response as plain values (for comparing two brokers' answers)."""
    if dataclasses.is_dataclass(x):
        return {f.name: plain(getattr(x, f.name)) for f in dataclasses.fields(x)}
    if isinstance(x, tuple | list):
        return [plain(i) for i in x]
    if hasattr(x, "value") and not isinstance(x, int | str):
        return code(x)
    return x


class Raw:
    """One connection sending requests of a given version, answers decoded."""

    def __init__(self, bootstrap: str) -> None:
        self.conn = _BrokerConnection(*parse_bootstrap(bootstrap), "acl-test", 10.0)

    def __call__(self, api_key: int, version: int, data: dict[str, Any]) -> Any:
        return self.conn._send(api_key, version, data)[1]

    def close(self) -> None:
        self.conn.close()


def raw(server: Any) -> Raw:
    return Raw(server.bootstrap)


def acl_filter(rtype: int = 1, name: str | None = None, pattern: int = 1, principal: str | None = None,
               host: str | None = None, op: int = 1, perm: int = 1) -> dict[str, Any]:
    return {"resource_type_filter": rtype, "resource_name_filter": name, "pattern_type_filter": pattern,
            "principal_filter": principal, "host_filter": host, "operation": op, "permission_type": perm}


def acl_creation(rtype: int, name: str, pattern: int, principal: str, host: str, op: int, perm: int) -> dict[str, Any]:
    return {"resource_type": rtype, "resource_name": name, "resource_pattern_type": pattern, "principal": principal,
            "host": host, "operation": op, "permission_type": perm}


def records(n: int = 1, transactional: bool = False) -> bytes:
    recs = [Record(i, RECENT_TS + i, b"k%d" % i, b"v%d" % i) for i in range(n)]
    if transactional:
        return encode_batch(recs, producer_id=1, producer_epoch=0, base_sequence=0, is_transactional=True)
    return encode_batch(recs)


# ---- clients --------------------------------------------------------------------------------


def admin(server: Any) -> AdminClient:
    return AdminClient({"bootstrap.servers": server.bootstrap, **QUIET})


def ck_create_acls(server: Any, acls: list[CkAcl]) -> None:
    """CreateAcls through confluent-kafka (the client kept referenced until the answers are in)."""
    client = admin(server)
    for fut in client.create_acls(acls, request_timeout=10).values():
        fut.result(10)


def ck_describe_acls(server: Any, flt: CkFilter) -> list[CkAcl]:
    client = admin(server)
    return client.describe_acls(flt, request_timeout=10).result(10)


def ck_delete_acls(server: Any, flt: CkFilter) -> list[CkAcl]:
    client = admin(server)
    return client.delete_acls([flt], request_timeout=10)[flt].result(10)


def ck_topics(server: Any) -> set[str]:
    client = admin(server)
    return set(client.list_topics(timeout=10).topics)


def ck_create_topic_error(server: Any, name: str) -> int:
    """The error code confluent-kafka's create_topics reports (0 if it worked)."""
    client = admin(server)
    try:
        client.create_topics([NewTopic(name, 1, 1)], operation_timeout=10)[name].result(10)
    except KafkaException as e:
        return e.args[0].code()
    return 0


def kp_admin(server: Any) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=server.bootstrap, request_timeout_ms=10000)


def create_topic(server: Any, name: str, partitions: int = 1) -> None:
    client = admin(server)
    client.create_topics([NewTopic(name, partitions, 1)], operation_timeout=20)[name].result(20)


def ck_produce(server: Any, topic: str, n: int = 3, **conf: Any) -> list[Any]:
    """Produce ``n`` records with librdkafka; the delivery errors (None for each success)."""
    producer = Producer({"bootstrap.servers": server.bootstrap, "message.timeout.ms": 8000, **QUIET, **conf})
    errors: list[Any] = []
    for i in range(n):
        producer.produce(topic, b"value-%d" % i, key=b"k", timestamp=RECENT_TS + i,
                         on_delivery=lambda err, _msg: errors.append(err))
    producer.flush(15)
    assert len(errors) == n, f"{n - len(errors)} deliveries not reported"
    return errors


def kp_produce(server: Any, topic: str) -> Any:
    producer = KafkaProducer(bootstrap_servers=server.bootstrap, max_block_ms=8000, request_timeout_ms=8000)
    try:
        return producer.send(topic, b"value", timestamp_ms=RECENT_TS).get(10)
    finally:
        producer.close(1)


def ck_consume(server: Any, topic: str, group: str, want: int, timeout: float = 20.0) -> tuple[list[bytes], list[Any]]:
    """Subscribe in ``group`` and read up to ``want`` values; (values, errors seen)."""
    consumer = Consumer({"bootstrap.servers": server.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, **QUIET})
    values: list[bytes] = []
    errors: list[Any] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + timeout
        while len(values) < want and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                errors.append(msg.error())
                if msg.error().code() in (CkError.GROUP_AUTHORIZATION_FAILED, CkError.TOPIC_AUTHORIZATION_FAILED):
                    break
                continue
            values.append(msg.value())
        if values:
            consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return values, errors


# ---- kafka-acls.sh ---------------------------------------------------------------------------


@dataclasses.dataclass
class AclTool:
    home: Path
    log_dir: Path

    def run(self, bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if k not in ("KAFKA_OPTS", "KAFKA_LOG4J_OPTS", "JMX_PORT", "KAFKA_DEBUG")}
        env.update(KAFKA_HEAP_OPTS="-Xmx256m", LOG_DIR=str(self.log_dir), INCLUDE_TEST_JARS="true",
                   KAFKA_JVM_PERFORMANCE_OPTS="-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Djava.awt.headless=true")
        return subprocess.run([str(self.home / "bin" / "kafka-acls.sh"), "--bootstrap-server", bootstrap, *args],
                              capture_output=True, text=True, timeout=90, env=env)

    def ok(self, bootstrap: str, *args: str) -> str:
        done = self.run(bootstrap, *args)
        assert done.returncode == 0, f"kafka-acls.sh {' '.join(args)}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
        return done.stdout


_RESOURCE = re.compile(r"^Current ACLs for resource `ResourcePattern\(resourceType=(\w+), name=(.*), patternType=(\w+)\)`:$")
_ENTRY = re.compile(r"^\t\(principal=(.*), host=(.*), operation=(\w+), permissionType=(\w+)\)$")


def parse_acl_listing(text: str) -> set[tuple[str, ...]]:
    """``kafka-acls.sh --list`` output as a set of (type, name, pattern, principal, host, operation, permission)."""
    out: set[tuple[str, ...]] = set()
    resource: tuple[str, ...] | None = None
    for line in text.splitlines():
        if m := _RESOURCE.match(line):
            resource = m.groups()
        elif (m := _ENTRY.match(line)) and resource is not None:
            out.add(resource + m.groups())
    return out


@pytest.fixture(scope="module")
def acl_tool(tmp_path_factory: pytest.TempPathFactory) -> AclTool:
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason.replace("reference unavailable", "kafka-acls.sh unavailable"))
    home = find_kafka_home()
    assert home is not None
    return AclTool(home, tmp_path_factory.mktemp("acl-tool-logs"))


# ---- the reference broker (no authorizer), started in the background ------------------------


@pytest.fixture(scope="module")
def _reference_start() -> Iterator[Future[ReferenceKafka] | None]:
    if unavailable_reason():
        yield None
        return
    kafka = ReferenceKafka(heap_opts="-Xmx384m", start_timeout=150)
    with ThreadPoolExecutor(1, thread_name_prefix="reference-start") as ex:
        started = ex.submit(kafka.start)
        yield started
        try:
            started.result(timeout=200)
        except Exception:
            pass
        kafka.stop()


@pytest.fixture(scope="module", autouse=True)
def _start_reference_early(_reference_start: Future[ReferenceKafka] | None) -> None:
    """Start the reference with the module's first test, so its JVM warms up meanwhile."""


@pytest.fixture
def reference(_reference_start: Future[ReferenceKafka] | None) -> ReferenceKafka:
    if _reference_start is None:
        pytest.skip(unavailable_reason() or "reference unavailable")
    return _reference_start.result(timeout=200)


# ---- a shared server with an authorizer, whose clients are super users -------------------------


@pytest.fixture(scope="module")
def super_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SidecarProcess]:
    server = SidecarProcess(tmp_path_factory.mktemp("acls-super") / "data", SUPER).start()
    yield server
    server.stop()


def restart(server: SidecarProcess, overrides: dict[str, str]) -> SidecarProcess:
    """Stop ``server`` cleanly and start it again on its data dir with ``overrides`` (the same
    object, so the factory that made it still stops it after the test)."""
    server.stop()
    server.overrides = dict(overrides)
    server.port = 0
    return server.start()


# =============================================================================================
# Without an authorizer: SECURITY_DISABLED, as Kafka
# =============================================================================================


def _security_disabled_answers(bootstrap: str) -> list[Any]:
    out: list[Any] = []
    for version in (1, 2, 3):
        r = Raw(bootstrap)
        try:
            out.append(("describe", version, plain(r(29, version, acl_filter()))))
            out.append(("create", version, plain(r(30, version, {"creations": [
                acl_creation(2, "t", 3, "User:alice", "*", 3, 3),
                acl_creation(4, "not-the-cluster", 3, "bob", "*", 1, 1),  # invalid, but no authorizer looks
            ]}))))
            out.append(("delete", version, plain(r(31, version, {"filters": [acl_filter(), acl_filter(2, "t", 3)]}))))
        finally:
            r.close()
    return out


@pytest.mark.reference
def test_acl_apis_without_authorizer_answer_like_kafka(sidecar, reference):
    ours = _security_disabled_answers(sidecar.bootstrap)
    theirs = _security_disabled_answers(reference.bootstrap)
    assert ours == theirs
    describe = ours[0][2]
    assert describe["error_code"] == SECURITY_DISABLED
    assert describe["error_message"] == "No Authorizer is configured on the broker"
    assert {(r["error_code"], r["error_message"]) for r in ours[1][2]["results"]} == {(SECURITY_DISABLED, "No Authorizer is configured.")}
    assert {(r["error_code"], r["error_message"]) for r in ours[2][2]["filter_results"]} == {(SECURITY_DISABLED, "No Authorizer is configured.")}
    # v0 is gone (Kafka 4.0): both advertise 1-3.
    for server in (sidecar, reference):
        r = Raw(server.bootstrap)
        assert {k: r.conn.versions[k] for k in (29, 30, 31)} == {29: (1, 3), 30: (1, 3), 31: (1, 3)}
        r.close()


@pytest.mark.reference
def test_unparsable_acl_requests_close_the_connection_like_kafka(sidecar, reference):
    """A resource type, pattern type, operation or permission of 0 (UNKNOWN): Kafka cannot parse the
    request and closes the connection, authorizer or not."""
    for server in (sidecar, reference):
        for api, data in [
            (29, acl_filter(rtype=0)),
            (30, {"creations": [acl_creation(2, "t", 0, "User:a", "*", 3, 3)]}),
            (31, {"filters": [acl_filter(perm=0)]}),
        ]:
            r = Raw(server.bootstrap)
            with pytest.raises(KafkaClientError, match="connection closed"):
                r(api, 3, data)
            r.close()


@pytest.mark.reference
def test_kafka_acls_tool_without_authorizer_like_kafka(sidecar, reference, acl_tool):
    commands = [
        ["--list"],
        ["--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "orders"],
        ["--remove", "--force", "--topic", "orders"],
    ]

    def run_all(bootstrap: str) -> list[tuple[int, str, str]]:
        out = []
        for args in commands:
            done = acl_tool.run(bootstrap, *args)
            out.append((done.returncode, done.stdout.replace(bootstrap, "<bootstrap>"), done.stderr.replace(bootstrap, "<bootstrap>")))
        return out

    with ThreadPoolExecutor(2) as ex:
        ours_f, theirs_f = ex.submit(run_all, sidecar.bootstrap), ex.submit(run_all, reference.bootstrap)
        ours, theirs = ours_f.result(), theirs_f.result()
    assert ours == theirs
    assert ours[0][0] == 1 and "SecurityDisabledException: No Authorizer is configured on the broker" in ours[0][1]
    assert "SecurityDisabledException: No Authorizer is configured" in ours[1][1]


@pytest.mark.reference
def test_python_clients_without_authorizer_like_kafka(sidecar, reference):
    def outcomes(server: Any) -> list[str]:
        out = []
        client = kp_admin(server)
        try:
            flt = ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                            ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY))
            try:
                client.describe_acls(flt)
            except kerrors.KafkaError as e:
                out.append(type(e).__name__)
            created = client.create_acls([ACL("User:a", "*", ACLOperation.READ, ACLPermissionType.ALLOW, ResourcePattern(ResourceType.TOPIC, "t"))])
            out.append(",".join(e.__name__ for e in created["failed"]))
            out.append(",".join(err.__name__ for _f, _acls, err in client.delete_acls([flt])))
        finally:
            client.close()
        ck = admin(server)
        flt = CkFilter(CkType.ANY, None, CkPattern.ANY, None, None, CkOp.ANY, CkPerm.ANY)
        try:
            out.append(repr(ck.describe_acls(flt, request_timeout=10).result(10)))
        except KafkaException as e:
            out.append(e.args[0].name())
        acl = CkAcl(CkType.TOPIC, "t", CkPattern.LITERAL, "User:a", "*", CkOp.READ, CkPerm.ALLOW)
        try:
            ck.create_acls([acl], request_timeout=10)[acl].result(10)
        except KafkaException as e:
            out.append(e.args[0].name())
        return out

    ours, theirs = outcomes(sidecar), outcomes(reference)
    # (librdkafka's describe_acls does not look at the answer's error: an empty list, from Kafka too.)
    assert ours == theirs == ["SecurityDisabledError"] * 3 + ["[]", "SECURITY_DISABLED"]


# =============================================================================================
# ACL CRUD with an authorizer
# =============================================================================================


def test_acl_crud_kafka_python(super_server):
    client = kp_admin(super_server)
    try:
        topic = ResourcePattern(ResourceType.TOPIC, "kp-orders")
        acls = [
            ACL("User:alice", "*", ACLOperation.READ, ACLPermissionType.ALLOW, topic),
            ACL("User:bob", "10.0.0.7", ACLOperation.WRITE, ACLPermissionType.DENY, topic),
            ACL("User:alice", "*", ACLOperation.ALL, ACLPermissionType.ALLOW,
                ResourcePattern(ResourceType.GROUP, "kp-", ACLResourcePatternType.PREFIXED)),
        ]
        result = client.create_acls(acls)
        assert result["failed"] == [] and len(result["succeeded"]) == 3
        # Creating the same ACL again succeeds and keeps one copy; a bad CLUSTER name is INVALID_REQUEST.
        again = client.create_acls([acls[0], ACL("User:x", "*", ACLOperation.ALTER, ACLPermissionType.ALLOW,
                                                  ResourcePattern(ResourceType.CLUSTER, "my-cluster"))])
        assert again["succeeded"] == [acls[0]] and again["failed"] == [kerrors.InvalidRequestError]

        def describe(**kw: Any) -> set[tuple[Any, ...]]:
            flt = ACLFilter(kw.get("principal"), kw.get("host"), kw.get("op", ACLOperation.ANY), kw.get("perm", ACLPermissionType.ANY),
                            ResourcePatternFilter(kw.get("rtype", ResourceType.ANY), kw.get("name"), kw.get("pattern", ACLResourcePatternType.ANY)))
            found, err = client.describe_acls(flt)
            assert err is kerrors.NoError
            return {(a.resource_pattern.resource_type.name, a.resource_pattern.resource_name, a.resource_pattern.pattern_type.name,
                     a.principal, a.host, a.operation.name, a.permission_type.name) for a in found}

        kp = {a for a in describe() if "kp-" in a[1]}
        assert kp == {
            ("TOPIC", "kp-orders", "LITERAL", "User:alice", "*", "READ", "ALLOW"),
            ("TOPIC", "kp-orders", "LITERAL", "User:bob", "10.0.0.7", "WRITE", "DENY"),
            ("GROUP", "kp-", "PREFIXED", "User:alice", "*", "ALL", "ALLOW"),
        }
        assert describe(principal="User:bob") == {("TOPIC", "kp-orders", "LITERAL", "User:bob", "10.0.0.7", "WRITE", "DENY")}
        assert describe(perm=ACLPermissionType.DENY, name="kp-orders") == describe(principal="User:bob")
        # MATCH: the ACLs that apply to a group named kp-team (the prefixed one).
        assert describe(rtype=ResourceType.GROUP, name="kp-team", pattern=ACLResourcePatternType.MATCH) == {
            ("GROUP", "kp-", "PREFIXED", "User:alice", "*", "ALL", "ALLOW")}

        deleted = client.delete_acls([
            ACLFilter("User:bob", None, ACLOperation.ANY, ACLPermissionType.ANY,
                      ResourcePatternFilter(ResourceType.TOPIC, "kp-orders", ACLResourcePatternType.LITERAL)),
            ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                      ResourcePatternFilter(ResourceType.TOPIC, "nothing-here", ACLResourcePatternType.ANY)),
        ])
        assert [len(m) for _f, m, _e in deleted] == [1, 0] and [e for _f, _m, e in deleted] == [kerrors.NoError] * 2
        assert deleted[0][1][0].principal == "User:bob"
        assert describe(principal="User:bob") == set()
        client.delete_acls([ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                                      ResourcePatternFilter(ResourceType.ANY, "kp-orders", ACLResourcePatternType.ANY)),
                            ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                                      ResourcePatternFilter(ResourceType.GROUP, "kp-", ACLResourcePatternType.PREFIXED))])
        assert {a for a in describe() if "kp-" in a[1]} == set()
    finally:
        client.close()


def test_acl_crud_confluent_kafka(super_server):
    client = admin(super_server)
    acls = [
        CkAcl(CkType.TOPIC, "ck-", CkPattern.PREFIXED, "User:*", "*", CkOp.WRITE, CkPerm.ALLOW),
        CkAcl(CkType.TRANSACTIONAL_ID, "ck-tx", CkPattern.LITERAL, "User:carol", "*", CkOp.WRITE, CkPerm.ALLOW),
        CkAcl(CkType.BROKER, "kafka-cluster", CkPattern.LITERAL, "User:carol", "*", CkOp.IDEMPOTENT_WRITE, CkPerm.ALLOW),
    ]
    for fut in client.create_acls(acls, request_timeout=10).values():
        assert fut.result(10) is None
    bad = CkAcl(CkType.TOPIC, "ck-x", CkPattern.LITERAL, "carol", "*", CkOp.READ, CkPerm.ALLOW)  # no principal type
    with pytest.raises(KafkaException) as info:
        client.create_acls([bad], request_timeout=10)[bad].result(10)
    assert info.value.args[0].code() == CkError.INVALID_REQUEST
    assert "Could not parse principal from `carol`" in info.value.args[0].str()

    everything = CkFilter(CkType.ANY, None, CkPattern.ANY, None, None, CkOp.ANY, CkPerm.ANY)
    found = {a for a in client.describe_acls(everything, request_timeout=10).result(10) if a.name.startswith("ck-") or a.principal == "User:carol"}
    assert found == set(acls)
    carol = CkFilter(CkType.ANY, None, CkPattern.ANY, "User:carol", None, CkOp.ANY, CkPerm.ANY)
    assert set(client.describe_acls(carol, request_timeout=10).result(10)) == set(acls[1:])
    match = CkFilter(CkType.TOPIC, "ck-orders", CkPattern.MATCH, None, None, CkOp.ANY, CkPerm.ANY)
    assert acls[0] in client.describe_acls(match, request_timeout=10).result(10)

    deleted = client.delete_acls([carol], request_timeout=10)[carol].result(10)
    assert set(deleted) == set(acls[1:])
    prefixed = CkFilter(CkType.TOPIC, "ck-", CkPattern.PREFIXED, None, None, CkOp.ANY, CkPerm.ANY)
    assert client.delete_acls([prefixed], request_timeout=10)[prefixed].result(10) == [acls[0]]
    assert not [a for a in client.describe_acls(everything, request_timeout=10).result(10) if a.name.startswith("ck-")]


def test_acl_crud_kafka_acls_tool(super_server, acl_tool):
    bs = super_server.bootstrap
    out = acl_tool.ok(bs, "--add", "--allow-principal", "User:dave", "--allow-principal", "User:erin", "--operation", "Read",
                      "--operation", "Describe", "--topic", "tool-t1", "--group", "tool-g1")
    assert "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=tool-t1, patternType=LITERAL)`" in out
    acl_tool.ok(bs, "--add", "--producer", "--allow-principal", "User:frank", "--topic", "tool-", "--resource-pattern-type", "prefixed")
    acl_tool.ok(bs, "--add", "--deny-principal", "User:dave", "--deny-host", "10.1.1.1", "--operation", "All", "--topic", "*")
    listed = parse_acl_listing(acl_tool.ok(bs, "--list", "--topic", "tool-t1"))
    assert listed == {("TOPIC", "tool-t1", "LITERAL", f"User:{u}", "*", op, "ALLOW") for u in ("dave", "erin") for op in ("READ", "DESCRIBE")}
    # MATCH: every ACL that applies to topic tool-t1 (literal, prefixed and the * wildcard).
    matching = parse_acl_listing(acl_tool.ok(bs, "--list", "--topic", "tool-t1", "--resource-pattern-type", "match"))
    assert listed < matching
    assert ("TOPIC", "*", "LITERAL", "User:dave", "10.1.1.1", "ALL", "DENY") in matching
    assert {("TOPIC", "tool-", "PREFIXED", "User:frank", "*", op, "ALLOW") for op in ("WRITE", "DESCRIBE", "CREATE")} < matching
    by_principal = acl_tool.ok(bs, "--list", "--principal", "User:frank")
    assert by_principal.startswith("ACLs for principal `User:frank`")
    assert {a[5] for a in parse_acl_listing(by_principal)} == {"WRITE", "DESCRIBE", "CREATE"}

    acl_tool.ok(bs, "--remove", "--force", "--allow-principal", "User:erin", "--operation", "Read", "--topic", "tool-t1", "--group", "tool-g1")
    after = parse_acl_listing(acl_tool.ok(bs, "--list", "--topic", "tool-t1", "--group", "tool-g1"))
    assert ("TOPIC", "tool-t1", "LITERAL", "User:erin", "*", "READ", "ALLOW") not in after
    assert ("GROUP", "tool-g1", "LITERAL", "User:erin", "*", "DESCRIBE", "ALLOW") in after
    for args in (["--topic", "tool-t1", "--group", "tool-g1"], ["--topic", "tool-", "--resource-pattern-type", "prefixed"], ["--topic", "*"]):
        acl_tool.ok(bs, "--remove", "--force", *args)
    assert not [a for a in parse_acl_listing(acl_tool.ok(bs, "--list")) if a[1].startswith("tool-") or a[1] == "*"]
    # Kafka's errors come through: an empty resource name is INVALID_REQUEST.
    done = acl_tool.run(bs, "--add", "--allow-principal", "User:a", "--operation", "Read", "--topic", "")
    assert done.returncode == 1 and "InvalidRequestException: Invalid empty resource name" in done.stdout


def test_create_and_delete_acls_errors_like_kafka(super_server):
    """CreateAcls/DeleteAcls per-ACL and per-filter errors, as the reference broker answers them
    (recorded from Apache Kafka 4.1.0 with StandardAuthorizer)."""
    r = raw(super_server)
    try:
        def create(*creations: dict[str, Any]) -> list[tuple[int, str | None]]:
            return [(code(x.error_code), x.error_message) for x in r(30, 3, {"creations": list(creations)}).results]

        ok = acl_creation(2, "err-t", 3, "User:alice", "*", 3, 3)
        assert create(ok, ok) == [(0, ""), (0, "")]
        assert create(acl_creation(4, "foo", 3, "User:a", "*", 8, 3)) == [(INVALID_REQUEST, "The only valid name for the CLUSTER resource is kafka-cluster")]
        assert create(acl_creation(2, "", 3, "User:a", "*", 3, 3)) == [(INVALID_REQUEST, "Invalid empty resource name")]
        assert create(acl_creation(2, "t", 3, "alice", "*", 3, 3)) == [(INVALID_REQUEST, "Could not parse principal from `alice` (no colon is present separating the principal type from the principal name)")]
        assert create(acl_creation(99, "t", 3, "User:a", "*", 3, 3)) == [(INVALID_REQUEST, "Invalid resourceType UNKNOWN")]
        assert create(acl_creation(2, "t", 99, "User:a", "*", 3, 3)) == [(INVALID_REQUEST, "Invalid patternType UNKNOWN")]
        assert create(acl_creation(2, "t", 3, "User:a", "*", 99, 3)) == [(INVALID_REQUEST, "Invalid operation UNKNOWN")]
        assert create(acl_creation(2, "t", 3, "User:a", "*", 3, 99)) == [(INVALID_REQUEST, "Invalid permissionType UNKNOWN")]
        # ANY or MATCH where an ACL needs a value: Kafka cannot build the binding, the whole request fails.
        assert create(ok, acl_creation(2, "t", 2, "User:a", "*", 3, 3)) == [(UNKNOWN_SERVER_ERROR, None)] * 2
        assert create(acl_creation(2, "t", 3, "User:a", "*", 1, 3)) == [(UNKNOWN_SERVER_ERROR, None)]
        # Mixed: each ACL its own answer.
        assert create(acl_creation(2, "err-t", 3, "User:bob", "*", 3, 2), acl_creation(4, "x", 3, "User:a", "*", 8, 3)) == [
            (0, ""), (INVALID_REQUEST, "The only valid name for the CLUSTER resource is kafka-cluster")]

        answer = r(31, 3, {"filters": [acl_filter(pattern=99), acl_filter(op=99), acl_filter(2, "err-t", 3), acl_filter(principal="User:bob")]})
        results = answer.filter_results
        assert [(code(x.error_code), x.error_message) for x in results] == [
            (INVALID_REQUEST, "Unknown patternFilter."), (INVALID_REQUEST, "Unknown entryFilter."), (0, None), (0, None)]
        # Every filter is matched against the ACLs as they were: the bob ACL is listed twice.
        assert {(m.principal, code(m.permission_type)) for m in results[2].matching_acls} == {("User:alice", 3), ("User:bob", 2)}
        assert [(m.principal, m.resource_name, code(m.error_code), m.error_message) for m in results[3].matching_acls] == [("User:bob", "err-t", 0, None)]
        described = r(29, 3, acl_filter(2, "err-t", 3))
        assert code(described.error_code) == 0 and described.error_message == "" and described.resources == ()
        # Filters with unknown codes match nothing in DescribeAcls.
        assert r(29, 3, acl_filter(rtype=99)).resources == ()
    finally:
        r.close()


# =============================================================================================
# Enforcement
# =============================================================================================


def test_enforcement_default_deny_then_allowed(sidecar_factory, tmp_path):
    """No ACL: every request on the topic and group is denied with Kafka's error; the clients
    raise the authorization errors; after the ACLs are added everything works."""
    topic, group = "secured", "team-1"
    server = sidecar_factory(SUPER, data_dir=tmp_path / "enf")
    create_topic(server, topic, 2)
    topic_id = raw(server)(3, 12, {"topics": [{"name": topic, "topic_id": None}], "allow_auto_topic_creation": False,
                                   "include_topic_authorized_operations": False}).topics[0].topic_id
    # User:ANONYMOUS may manage ACLs (ALTER on the cluster), and nothing else.
    grant = CkAcl(CkType.BROKER, "kafka-cluster", CkPattern.LITERAL, ANON, "*", CkOp.ALTER, CkPerm.ALLOW)
    ck_create_acls(server, [grant])
    server = restart(server, ENFORCING)

    # -- clients
    errs = ck_produce(server, topic, 2)
    assert {e.code() for e in errs} == {CkError.TOPIC_AUTHORIZATION_FAILED}
    with pytest.raises(kerrors.TopicAuthorizationFailedError):
        kp_produce(server, topic)
    values, errors = ck_consume(server, topic, group, 1, timeout=10)
    assert values == [] and errors and errors[0].code() == CkError.GROUP_AUTHORIZATION_FAILED
    assert topic not in ck_topics(server)  # left out of an all-topics answer
    assert ck_create_topic_error(server, "new-one") == CkError.TOPIC_AUTHORIZATION_FAILED

    # -- raw requests, Kafka's codes
    r = raw(server)
    try:
        md = r(3, 12, {"topics": [{"name": topic, "topic_id": None}, {"name": "absent", "topic_id": None}],
                       "allow_auto_topic_creation": True, "include_topic_authorized_operations": False})
        # Named topics: no id (the zero UUID, which the decoder gives as None), whether they exist or not.
        assert [(t.name, code(t.error_code), t.topic_id) for t in md.topics] == [(topic, TOPIC_AUTHZ, None), ("absent", TOPIC_AUTHZ, None)]
        md = r(3, 12, {"topics": [{"name": None, "topic_id": topic_id}], "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
        assert [(t.name, code(t.error_code), t.topic_id) for t in md.topics] == [(None, TOPIC_AUTHZ, topic_id)]
        fetch = r(1, 12, {"replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
                          "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
                          "topics": [{"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                                                                       "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]})
        part = fetch.responses[0].partitions[0]
        assert (code(part.error_code), part.high_watermark) == (TOPIC_AUTHZ, -1)
        dr = r(21, 2, {"topics": [{"name": topic, "partitions": [{"partition_index": 0, "offset": 0}]}], "timeout": 5000})
        assert code(dr.topics[0].partitions[0].error_code) == TOPIC_AUTHZ
        cp = r(37, 3, {"topics": [{"name": topic, "count": 3, "assignments": None}], "timeout": 5000, "validate_only": False})
        assert (cp.results[0].name, code(cp.results[0].error_code)) == (topic, TOPIC_AUTHZ)
        dt = r(20, 6, {"topics": [{"name": topic, "topic_id": ZERO_UUID}], "timeout": 5000})
        assert (code(dt.responses[0].error_code), dt.responses[0].error_message) == (TOPIC_AUTHZ, "Topic authorization failed.")
        ct = r(19, 7, {"topics": [{"name": "brand-new", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}],
                       "timeout": 5000, "validate_only": False})
        assert (code(ct.topics[0].error_code), ct.topics[0].error_message) == (TOPIC_AUTHZ, "Authorization failed.")
        dtp = r(75, 0, {"topics": [{"name": topic}], "response_partition_limit": 100, "cursor": None})
        assert [(t.name, code(t.error_code)) for t in dtp.topics] == [(topic, TOPIC_AUTHZ)]
        pid = r(22, 4, {"transactional_id": None, "transaction_timeout": 60000, "producer_id": -1, "producer_epoch": -1})
        assert (code(pid.error_code), pid.producer_id) == (CLUSTER_AUTHZ, -1)
        pid = r(22, 4, {"transactional_id": "tx-1", "transaction_timeout": 60000, "producer_id": -1, "producer_epoch": -1})
        assert code(pid.error_code) == TXN_AUTHZ
        fc = r(10, 4, {"key_type": 0, "coordinator_keys": [group]})
        assert [(c.key, code(c.error_code), c.node_id) for c in fc.coordinators] == [(group, GROUP_AUTHZ, -1)]
        fc = r(10, 3, {"key": group, "key_type": 0})
        assert (code(fc.error_code), fc.error_message) == (GROUP_AUTHZ, "Group authorization failed.")
        join = r(11, 9, {"group_id": group, "session_timeout": 10000, "rebalance_timeout": 10000, "member_id": "",
                         "group_instance_id": None, "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}], "reason": None})
        assert (code(join.error_code), join.generation_id, join.member_id) == (GROUP_AUTHZ, -1, "")
        assert code(r(12, 4, {"group_id": group, "generation_id": 1, "member_id": "m", "group_instance_id": None}).error_code) == GROUP_AUTHZ
        assert code(r(14, 5, {"group_id": group, "generation_id": 1, "member_id": "m", "group_instance_id": None,
                               "protocol_type": "consumer", "protocol_name": "range", "assignments": []}).error_code) == GROUP_AUTHZ
        assert code(r(13, 5, {"group_id": group, "members": [{"member_id": "m", "group_instance_id": None, "reason": None}]}).error_code) == GROUP_AUTHZ
        oc = r(8, 9, {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
                      "topics": [{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1, "committed_metadata": ""}]}]})
        assert code(oc.topics[0].partitions[0].error_code) == GROUP_AUTHZ
        of = r(9, 8, {"groups": [{"group_id": group, "topics": None}], "require_stable": False})
        assert code(of.groups[0].error_code) == GROUP_AUTHZ
        dg = r(15, 5, {"groups": [group], "include_authorized_operations": True})
        assert (dg.groups[0].group_id, code(dg.groups[0].error_code)) == (group, GROUP_AUTHZ)
        assert code(r(42, 2, {"groups_names": [group]}).results[0].error_code) == GROUP_AUTHZ
        assert code(r(47, 0, {"group_id": group, "topics": []}).error_code) == GROUP_AUTHZ
        # DESCRIBE on the cluster comes with ALTER (implied), so DescribeLogDirs answers.
        assert code(r(35, 4, {"topics": None}).error_code) == 0
    finally:
        r.close()

    # -- the ACLs that let User:ANONYMOUS produce and consume, added over the wire (kafka-python)
    client = kp_admin(server)
    try:
        result = client.create_acls([
            ACL(ANON, "*", op, ACLPermissionType.ALLOW, ResourcePattern(ResourceType.TOPIC, topic)) for op in (ACLOperation.WRITE, ACLOperation.READ)
        ] + [ACL(ANON, "*", ACLOperation.READ, ACLPermissionType.ALLOW, ResourcePattern(ResourceType.GROUP, group))])
        assert len(result["succeeded"]) == 3
    finally:
        client.close()
    assert ck_produce(server, topic, 3) == [None] * 3
    assert kp_produce(server, topic).offset >= 0  # idempotent: InitProducerId allowed by WRITE on a topic
    assert topic in ck_topics(server)
    values, errors = ck_consume(server, topic, group, 4)
    assert len(values) == 4, errors
    r = raw(server)
    try:
        of = r(9, 8, {"groups": [{"group_id": group, "topics": None}], "require_stable": False})
        assert code(of.groups[0].error_code) == 0
        assert sum(p.committed_offset for t in of.groups[0].topics for p in t.partitions if p.committed_offset > 0) == 4
        ops = r(3, 12, {"topics": [{"name": topic, "topic_id": None}], "allow_auto_topic_creation": False,
                        "include_topic_authorized_operations": True}).topics[0].topic_authorized_operations
        assert ops == (1 << 3) | (1 << 4) | (1 << 8)  # READ, WRITE and the DESCRIBE they imply
    finally:
        r.close()
    log = server.log_text()
    assert ("Principal = User:ANONYMOUS is Denied operation = DESCRIBE from host = 127.0.0.1 on resource = Topic:LITERAL:secured "
            "for request = Metadata based on rule DefaultDeny") in log
    assert "is Denied operation = READ from host = 127.0.0.1 on resource = Group:LITERAL:team-1 for request = JoinGroup" in log


def test_cluster_operations_denied(sidecar_factory):
    """With no ACL at all (and no super user), cluster-level requests fail with CLUSTER_AUTHORIZATION_FAILED."""
    server = sidecar_factory(ENFORCING)
    client = kp_admin(server)
    try:
        flt = ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY, ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY))
        with pytest.raises(kerrors.ClusterAuthorizationFailedError):
            client.describe_acls(flt)
        created = client.create_acls([ACL(ANON, "*", ACLOperation.ALL, ACLPermissionType.ALLOW, ResourcePattern(ResourceType.CLUSTER, "kafka-cluster"))])
        assert created["failed"] == [kerrors.ClusterAuthorizationFailedError]
        assert [e for _f, _m, e in client.delete_acls([flt])] == [kerrors.ClusterAuthorizationFailedError]
    finally:
        client.close()
    r = raw(server)
    try:
        answer = r(30, 3, {"creations": [acl_creation(2, "t", 3, ANON, "*", 2, 3)]})
        assert code(answer.results[0].error_code) == CLUSTER_AUTHZ
        assert answer.results[0].error_message.endswith("needs ALTER permission.")
        assert code(r(29, 3, acl_filter()).error_code) == CLUSTER_AUTHZ
        logdirs = r(35, 4, {"topics": None})
        assert (code(logdirs.error_code), logdirs.results) == (CLUSTER_AUTHZ, ())
        dc = r(60, 1, {"include_cluster_authorized_operations": True, "endpoint_type": 1})
        assert (code(dc.error_code), dc.cluster_authorized_operations) == (0, 0)  # answered to anyone, no operations
        md = r(3, 10, {"topics": None, "allow_auto_topic_creation": False, "include_cluster_authorized_operations": True,
                       "include_topic_authorized_operations": True})
        assert md.cluster_authorized_operations == 0
        assert code(r(16, 4, {"states_filter": []}).error_code) == 0
    finally:
        r.close()
    assert ck_create_topic_error(server, "x") == CkError.TOPIC_AUTHORIZATION_FAILED


def test_deny_overrides_allow_prefixed_and_wildcard(sidecar_factory, tmp_path):
    server = sidecar_factory(SUPER, data_dir=tmp_path / "deny")
    for t in ("team-a", "team-b", "other"):
        create_topic(server, t)
    acls = [
        CkAcl(CkType.TOPIC, "team-", CkPattern.PREFIXED, "User:*", "*", CkOp.ALL, CkPerm.ALLOW),
        CkAcl(CkType.TOPIC, "team-b", CkPattern.LITERAL, ANON, "*", CkOp.READ, CkPerm.DENY),
        CkAcl(CkType.GROUP, "*", CkPattern.LITERAL, ANON, "*", CkOp.READ, CkPerm.ALLOW),
        CkAcl(CkType.BROKER, "kafka-cluster", CkPattern.LITERAL, ANON, "*", CkOp.IDEMPOTENT_WRITE, CkPerm.ALLOW),
        # DENY ACLs for User:ANONYMOUS that a super user does not feel
        CkAcl(CkType.TOPIC, "other", CkPattern.LITERAL, ANON, "*", CkOp.ALL, CkPerm.DENY),
        CkAcl(CkType.GROUP, "sealed", CkPattern.LITERAL, ANON, "*", CkOp.DESCRIBE, CkPerm.DENY),
    ]
    ck_create_acls(server, acls)
    assert ck_produce(server, "other", 1) == [None]  # super user
    values, errors = ck_consume(server, "other", "sealed", 1)
    assert len(values) == 1, errors
    server = restart(server, ENFORCING)
    assert ck_produce(server, "team-a", 2) == [None, None]
    assert ck_produce(server, "team-b", 2) == [None, None]  # WRITE still allowed by the prefixed ALL
    assert {e.code() for e in ck_produce(server, "other", 1)} == {CkError.TOPIC_AUTHORIZATION_FAILED}
    values, errors = ck_consume(server, "team-a", "any-group", 2)
    assert len(values) == 2, errors
    # team-b: READ denied (the DENY wins over the ALLOW ALL), DESCRIBE still allowed.
    values, errors = ck_consume(server, "team-b", "any-group-2", 1, timeout=10)
    assert values == [] and [e for e in errors if e.code() == CkError.TOPIC_AUTHORIZATION_FAILED], errors
    topics = ck_topics(server)
    assert topics >= {"team-a", "team-b"} and "other" not in topics
    # ListGroups without DESCRIBE on the cluster: only the groups User:ANONYMOUS may describe.
    r = raw(server)
    listed = {g.group_id for g in r(16, 4, {"states_filter": []}).groups}
    r.close()
    assert listed == {"any-group", "any-group-2"}


def test_allow_everyone_if_no_acl_found(sidecar_factory):
    server = sidecar_factory({**ENFORCING, "allow.everyone.if.no.acl.found": "true"})
    # No ACL anywhere: everything is allowed, topic creation included.
    create_topic(server, "open")
    create_topic(server, "guarded")
    assert ck_produce(server, "open", 2) == [None, None]
    values, _ = ck_consume(server, "open", "g-open", 2)
    assert len(values) == 2
    # An ACL naming "guarded" (for someone else): now only what ACLs allow, and not to User:ANONYMOUS.
    alice = CkAcl(CkType.TOPIC, "guarded", CkPattern.LITERAL, "User:alice", "*", CkOp.WRITE, CkPerm.ALLOW)
    ck_create_acls(server, [alice])
    assert {e.code() for e in ck_produce(server, "guarded", 1)} == {CkError.TOPIC_AUTHORIZATION_FAILED}
    assert ck_produce(server, "open", 1) == [None]
    mine = CkAcl(CkType.TOPIC, "guarded", CkPattern.LITERAL, ANON, "*", CkOp.WRITE, CkPerm.ALLOW)
    ck_create_acls(server, [mine])
    assert ck_produce(server, "guarded", 1) == [None]


def test_acls_survive_restart_and_crash(sidecar_factory, tmp_path):
    data = tmp_path / "persist"
    server = sidecar_factory(SUPER, data_dir=data)
    acls = [CkAcl(CkType.TOPIC, f"keep-{i}", CkPattern.LITERAL, "User:alice", "*", CkOp.READ, CkPerm.ALLOW) for i in range(3)]
    ck_create_acls(server, acls)
    server.kill()  # SIGKILL right after the answers: they were written (fsync) before them
    everything = CkFilter(CkType.ANY, None, CkPattern.ANY, None, None, CkOp.ANY, CkPerm.ANY)
    server = sidecar_factory(SUPER, data_dir=data)
    assert set(ck_describe_acls(server, everything)) == set(acls)
    assert ck_delete_acls(server, CkFilter(CkType.TOPIC, "keep-0", CkPattern.LITERAL, None, None, CkOp.ANY, CkPerm.ANY)) == acls[:1]
    server = restart(server, SUPER)
    assert set(ck_describe_acls(server, everything)) == set(acls[1:])
    assert len(AclFile(data).load()) == 2
    # Without an authorizer the file is kept (not enforced, said so); with it again, the ACLs are back.
    server = restart(server, {})
    r = raw(server)
    assert code(r(29, 3, acl_filter()).error_code) == SECURITY_DISABLED
    r.close()
    assert "are not enforced: authorizer.class.name is not set" in server.log_text()
    server = restart(server, SUPER)
    assert set(ck_describe_acls(server, everything)) == set(acls[1:])
    server.stop()


def test_damaged_acl_file_or_unknown_authorizer_stop_the_start(tmp_path):
    data = tmp_path / "data"
    server = SidecarProcess(data, SUPER).start()
    ck = CkAcl(CkType.TOPIC, "t", CkPattern.LITERAL, "User:alice", "*", CkOp.READ, CkPerm.ALLOW)
    ck_create_acls(server, [ck])
    server.stop()
    for name in (ACLS_FILE, ACLS_FILE + ".bak"):
        (data / name).write_text((data / name).read_text().replace("alice", "alicf"))  # parses, fails its checksum

    def serve(*overrides: str) -> subprocess.CompletedProcess[str]:
        cmd = [*sidecar_command(), "serve", "--data-dir", str(data), "--listen", "127.0.0.1:0"]
        for o in overrides:
            cmd += ["--override", o]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60)

    done = serve(f"authorizer.class.name={AUTHORIZER}")
    assert done.returncode == 2
    assert "cannot read the ACLs" in done.stderr and "checksum mismatch" in done.stderr
    done = serve("authorizer.class.name=com.example.MyAuthorizer")
    assert done.returncode == 2
    assert "authorizer.class.name=com.example.MyAuthorizer is not supported" in done.stderr
    done = serve(f"authorizer.class.name={AUTHORIZER}", "super.users=admin")
    assert done.returncode == 2 and "super.users" in done.stderr


def test_denied_client_does_not_disturb_others(sidecar_factory, tmp_path):
    server = sidecar_factory(SUPER, data_dir=tmp_path / "busy")
    create_topic(server, "allowed")
    create_topic(server, "forbidden")
    acls = [CkAcl(CkType.TOPIC, "allowed", CkPattern.LITERAL, ANON, "*", CkOp.ALL, CkPerm.ALLOW),
            CkAcl(CkType.BROKER, "kafka-cluster", CkPattern.LITERAL, ANON, "*", CkOp.IDEMPOTENT_WRITE, CkPerm.ALLOW)]
    ck_create_acls(server, acls)
    server = restart(server, ENFORCING)
    stop = threading.Event()
    denied_answers = [0]

    def hammer() -> None:
        r = raw(server)  # one connection, denied again and again: it stays open
        try:
            while not stop.is_set():
                answer = r(0, 9, {"transactional_id": None, "acks": -1, "timeout": 5000,
                                  "topic_data": [{"name": "forbidden", "partition_data": [{"index": 0, "records": records()}]}]})
                md = r(3, 12, {"topics": [{"name": "forbidden", "topic_id": None}], "allow_auto_topic_creation": False,
                               "include_topic_authorized_operations": False})
                assert code(md.topics[0].error_code) == TOPIC_AUTHZ
                assert answer.responses[0].partition_responses[0].index == 0
                denied_answers[0] += 1
        finally:
            r.close()

    threads = [threading.Thread(target=hammer) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        assert ck_produce(server, "allowed", 50) == [None] * 50
        # No group ACL: read by assignment, without committing.
        consumer = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "unused", "enable.auto.commit": False, **QUIET})
        consumer.assign([TopicPartition("allowed", 0, 0)])
        values = []
        deadline = time.monotonic() + 20
        while len(values) < 50 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                values.append(msg.value())
        consumer.close()
        assert len(values) == 50
        # The denied connections keep being answered (not closed), request after request.
        wait_until(lambda: denied_answers[0] >= 30, timeout=30, message="30 denied round trips")
    finally:
        stop.set()
        for t in threads:
            t.join(20)
    # The denials are logged, but each distinct line at most once per 10 s, not once per request.
    lines = [line for line in server.log_text().splitlines() if "is Denied" in line and "Topic:LITERAL:forbidden" in line]
    assert 1 <= len(lines) <= 6, lines


# ---- Produce, ListOffsets and the config APIs ------------------------------------------------


def test_produce_list_offsets_and_configs_enforced(sidecar_factory, tmp_path):
    server = sidecar_factory(SUPER, data_dir=tmp_path / "snip")
    create_topic(server, "snip")
    grant = CkAcl(CkType.TOPIC, "snip", CkPattern.LITERAL, ANON, "*", CkOp.READ, CkPerm.ALLOW)
    ck_create_acls(server, [grant])
    server = restart(server, ENFORCING)
    r = raw(server)
    try:
        answer = r(0, 9, {"transactional_id": None, "acks": -1, "timeout": 5000,
                          "topic_data": [{"name": "snip", "partition_data": [{"index": 0, "records": records()}]}]})
        assert code(answer.responses[0].partition_responses[0].error_code) == TOPIC_AUTHZ
        answer = r(0, 9, {"transactional_id": "tx", "acks": -1, "timeout": 5000,
                          "topic_data": [{"name": "snip", "partition_data": [{"index": 0, "records": records(transactional=True)}]}]})
        assert code(answer.responses[0].partition_responses[0].error_code) == TXN_AUTHZ
        lo = r(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": "snip", "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]},
            {"name": "hidden", "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]})
        assert [(t.name, code(t.partitions[0].error_code)) for t in lo.topics] == [("snip", 0), ("hidden", TOPIC_AUTHZ)]
        dc = r(32, 4, {"resources": [{"resource_type": 2, "resource_name": "snip", "configuration_keys": None},
                                     {"resource_type": 4, "resource_name": "1", "configuration_keys": None}],
                       "include_synonyms": False, "include_documentation": False})
        assert [(code(x.error_code), x.error_message) for x in dc.results] == [
            (TOPIC_AUTHZ, "Topic authorization failed."), (CLUSTER_AUTHZ, "Cluster authorization failed.")]
        ia = r(44, 1, {"resources": [{"resource_type": 2, "resource_name": "snip", "configs": [
            {"name": "retention.ms", "config_operation": 0, "value": "1000"}]}], "validate_only": False})
        assert code(ia.responses[0].error_code) == TOPIC_AUTHZ
        # OffsetForLeaderEpoch: DESCRIBE on the topic (READ implies it) without CLUSTER_ACTION; the
        # others after, TOPIC_AUTHORIZATION_FAILED (KafkaApis.handleOffsetForLeaderEpochRequest).
        ep = r(23, 4, {"replica_id": -1, "topics": [
            {"topic": "hidden", "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]},
            {"topic": "snip", "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]})
        assert [(t.topic, code(t.partitions[0].error_code), t.partitions[0].end_offset) for t in ep.topics] == [
            ("snip", 0, 0), ("hidden", TOPIC_AUTHZ, -1)]
    finally:
        r.close()

