"""Authentication and authorization together (issue 9): SASL users, ACLs set by an admin over
SASL, and real clients allowed or refused per user with Kafka's errors, on one server.

users: admin (super user), alice (may write and read ``orders``, read group ``billing``), bob
(no ACL). Every client goes through a SASL_PLAINTEXT listener with PLAIN.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kafka import KafkaProducer
from kafka.errors import TopicAuthorizationFailedError

from tests.integration.test_operability import scrape
from tests.integration.test_operability import servers as servers  # a fixture, shared
from tests.integration.test_security_auth import PLAIN_MODULE, SecureServer
from tests.support import wait_until

JAAS = (f'{PLAIN_MODULE} required user_admin="admin-secret" user_alice="alice-secret" '
        'user_bob="bob-secret";')
TIMEOUT = 20.0


def sasl(user: str) -> dict[str, str]:
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.username": user, "sasl.password": f"{user}-secret"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    d: Path = tmp_path_factory.mktemp("authz")
    srv = SecureServer(d / "data", {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
        "group.initial.rebalance.delay.ms": "0",
    }).start()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def orders(server) -> str:
    """Topic ``orders-*`` and alice's ACLs, made by admin over SASL."""
    bootstrap = server.bootstrap
    topic = f"orders-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap, **sasl("admin")})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(TIMEOUT)
    acls = [AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:alice", "*", op, AclPermissionType.ALLOW)
            for op in (AclOperation.WRITE, AclOperation.READ)]
    acls.append(AclBinding(ResourceType.GROUP, "billing", ResourcePatternType.LITERAL, "User:alice", "*",
                           AclOperation.READ, AclPermissionType.ALLOW))
    for acl, fut in admin.create_acls(acls).items():
        assert fut.result(TIMEOUT) is None, acl
    return topic


def produce(bootstrap: str, user: str, topic: str, values: list[bytes]) -> list[KafkaError | None]:
    outcomes: list[KafkaError | None] = []
    p = Producer({"bootstrap.servers": bootstrap, **sasl(user), "message.timeout.ms": 10_000, "retries": 0})
    for v in values:
        p.produce(topic, v, callback=lambda err, _msg: outcomes.append(err))
    assert p.flush(TIMEOUT) == 0
    return outcomes


def consume(bootstrap: str, user: str, topic: str, group: str, want: int) -> tuple[list[bytes], list[KafkaError]]:
    c = Consumer({"bootstrap.servers": bootstrap, **sasl(user), "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe([topic])
    values: list[bytes] = []
    errs: list[KafkaError] = []
    try:
        wait_until(lambda: _poll(c, values, errs) and (len(values) >= want or errs), timeout=TIMEOUT)
    finally:
        c.close()
    return values, errs


def _poll(c: Consumer, values: list[bytes], errs: list[KafkaError]) -> bool:
    m = c.poll(0.2)
    if m is not None:
        if m.error():
            errs.append(m.error())
        else:
            values.append(m.value())
    return True


def test_each_user_gets_what_its_acls_allow(server, orders):
    bootstrap = server.bootstrap
    # alice may write and read with her group.
    assert produce(bootstrap, "alice", orders, [b"a-1", b"a-2"]) == [None, None]
    values, errs = consume(bootstrap, "alice", orders, "billing", 2)
    assert (values, errs) == ([b"a-1", b"a-2"], [])

    # bob has no ACL: his produce is refused per partition with Kafka's error...
    refused = produce(bootstrap, "bob", orders, [b"b-1"])
    assert [e.code() for e in refused] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    # ...his consumer in alice's group is refused on the group...
    _, errs = consume(bootstrap, "bob", orders, "billing", 1)
    assert errs and errs[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    # ...and kafka-python raises TopicAuthorizationFailedError for him too.
    kp = KafkaProducer(bootstrap_servers=bootstrap, security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                       sasl_plain_username="bob", sasl_plain_password="bob-secret", max_block_ms=10_000)
    try:
        with pytest.raises(TopicAuthorizationFailedError):
            kp.send(orders, b"b-2").get(timeout=TIMEOUT)
    finally:
        kp.close()

    # Nothing of bob's was stored; alice is unaffected and carries on.
    assert produce(bootstrap, "alice", orders, [b"a-3"]) == [None]
    values, errs = consume(bootstrap, "alice", orders, f"billing-{uuid.uuid4().hex[:4]}", 3)
    assert errs and errs[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED  # a group she has no ACL for
    values, errs = consume(bootstrap, "alice", orders, "billing", 3)
    assert (values, errs) == ([b"a-1", b"a-2", b"a-3"], [])

    # Each denial is logged with the SASL principal, in Kafka's format. The clients met them first
    # where Kafka's clients do: Metadata (DESCRIBE on the topic) and FindCoordinator (DESCRIBE on
    # the group).
    log = server.log_text()
    assert (f"Principal = User:bob is Denied operation = DESCRIBE from host = 127.0.0.1 on resource = "
            f"Topic:LITERAL:{orders} for request = Metadata") in log
    assert ("Principal = User:bob is Denied operation = DESCRIBE from host = 127.0.0.1 on resource = "
            "Group:LITERAL:billing for request = FindCoordinator") in log
    assert "Principal = User:alice is Denied operation = DESCRIBE" in log  # her other group


def test_acl_admin_needs_alter_on_the_cluster(server):
    bootstrap = server.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap, **sasl("alice")})
    acl = AclBinding(ResourceType.TOPIC, "anything", ResourcePatternType.LITERAL, "User:alice", "*",
                     AclOperation.ALL, AclPermissionType.ALLOW)
    with pytest.raises(KafkaException) as e:
        admin.create_acls([acl])[acl].result(TIMEOUT)
    assert e.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED


def test_authentication_metrics(servers):  # noqa: F811 (the fixture imported above)
    """kafka_server_socketserver_{failed,successful}_authentication_total count SASL outcomes per listener."""
    s = servers(["--metrics-port", "0", "--override", "listeners=SASL_PLAINTEXT://127.0.0.1:0",
                 "--override", "sasl.enabled.mechanisms=PLAIN",
                 "--override", f"listener.name.sasl_plaintext.plain.sasl.jaas.config={JAAS}"])
    assert produce(s.bootstrap, "alice", f"m-{uuid.uuid4().hex[:6]}", [b"x"]) == [None]  # auto-created topic
    bad = Producer({"bootstrap.servers": s.bootstrap, **sasl("alice"), "sasl.password": "wrong", "message.timeout.ms": 3000})
    bad.produce("m", b"y")
    bad.flush(5)
    del bad  # librdkafka's threads stop retrying
    key = (("listener", "SASL_PLAINTEXT"),)
    wait_until(lambda: scrape(s).get(("kafka_server_socketserver_failed_authentication_total", key), 0) >= 1)
    got = scrape(s)
    assert got[("kafka_server_socketserver_successful_authentication_total", key)] >= 1
    assert got[("kafka_server_socketserver_failed_authentication_total", key)] >= 1
