"""The ACL rules (server/security/acls.py) as Kafka's StandardAuthorizer applies them, with several
principals and hosts; the ACL file; the authorizer's configuration."""

from __future__ import annotations

import json
import logging

import pytest
from kafka_sidecar.server.config import BrokerConfig
from kafka_sidecar.server.security.acls import (
    ANY_FILTER,
    AclBinding,
    AclBindingFilter,
    AclCache,
    AclFile,
    AclFileError,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    authorize,
    java_host_address,
    operations_bit_field,
    validate_new_acl,
)
from kafka_sidecar.server.security.authorizer import (
    ACL_AUTHORIZER,
    STANDARD_AUTHORIZER,
    NoAuthorizer,
    StandardAuthorizer,
    create_authorizer,
    parse_super_users,
)
from kafka_sidecar.storage.log_config import ConfigError

T, G, C, TX = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
Op = AclOperation
ALICE, BOB, CAROL, ANON = "User:alice", "User:bob", "User:carol", "User:ANONYMOUS"
HOST = "127.0.0.1"


def acl(rtype=T, name="orders", pattern=LIT, principal=ALICE, host="*", op=Op.READ, perm=ALLOW) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


def allowed(acls, principal=ALICE, op=Op.READ, rtype=T, name="orders", host=HOST, supers=(), everyone=False) -> bool:
    return authorize(AclCache(acls), frozenset(supers), everyone, principal, host, op, rtype, name).allowed


# ---- who, where, what --------------------------------------------------------------------------


def test_no_acls_deny_by_default_and_allow_everyone_allows():
    assert not allowed([])
    assert allowed([], everyone=True)
    # allow.everyone.if.no.acl.found applies only where no ACL names the resource at all.
    assert not allowed([acl(principal=BOB)], everyone=True)
    assert allowed([acl(principal=BOB, name="other")], everyone=True)
    assert allowed([acl(rtype=G, principal=BOB)], everyone=True)  # another resource type


def test_principal_must_match_or_be_the_user_wildcard():
    acls = [acl(principal=ALICE)]
    assert allowed(acls, ALICE)
    assert not allowed(acls, BOB)
    assert not allowed(acls, "User:alice2")
    assert not allowed(acls, "Group:alice")  # principal type counts
    everyone = [acl(principal="User:*")]
    for who in (ALICE, BOB, ANON):
        assert allowed(everyone, who)
    assert not allowed([acl(principal="Group:*")], ALICE)  # only User:* is a wildcard


def test_host_must_match_or_be_the_wildcard():
    acls = [acl(host="10.0.0.5")]
    assert allowed(acls, host="10.0.0.5")
    assert not allowed(acls, host="10.0.0.6")
    assert allowed([acl(host="*")], host="10.0.0.6")
    # Hosts compare as Java prints addresses: IPv6 in full, IPv4-mapped as IPv4.
    assert allowed([acl(host="0:0:0:0:0:0:0:1")], host=java_host_address("::1"))
    assert not allowed([acl(host="::1")], host=java_host_address("::1"))
    assert allowed([acl(host="127.0.0.1")], host=java_host_address("::ffff:127.0.0.1"))


def test_java_host_address():
    assert java_host_address("127.0.0.1") == "127.0.0.1"
    assert java_host_address("::1") == "0:0:0:0:0:0:0:1"
    assert java_host_address("fe80::1%eth0") == "fe80:0:0:0:0:0:0:1%eth0"
    assert java_host_address("2001:db8::ff00:42:8329") == "2001:db8:0:0:0:ff00:42:8329"
    assert java_host_address("::ffff:10.1.2.3") == "10.1.2.3"
    assert java_host_address("not-an-address") == "not-an-address"


def test_operation_all_and_implied_operations():
    assert allowed([acl(op=Op.ALL)], op=Op.WRITE)
    assert allowed([acl(op=Op.ALL)], op=Op.DESCRIBE_CONFIGS)
    # An ALLOW for READ, WRITE, DELETE or ALTER also allows DESCRIBE; ALTER_CONFIGS allows DESCRIBE_CONFIGS.
    for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.DESCRIBE):
        assert allowed([acl(op=op)], op=Op.DESCRIBE), op
    for op in (Op.CREATE, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS, Op.IDEMPOTENT_WRITE):
        assert not allowed([acl(op=op)], op=Op.DESCRIBE), op
    assert allowed([acl(op=Op.ALTER_CONFIGS)], op=Op.DESCRIBE_CONFIGS)
    assert not allowed([acl(op=Op.ALTER)], op=Op.DESCRIBE_CONFIGS)
    assert not allowed([acl(op=Op.READ)], op=Op.WRITE)
    assert not allowed([acl(op=Op.DESCRIBE)], op=Op.READ)  # no implication downwards


def test_deny_wins_and_implies_nothing():
    assert not allowed([acl(op=Op.ALL), acl(op=Op.WRITE, perm=DENY)], op=Op.WRITE)
    assert allowed([acl(op=Op.ALL), acl(op=Op.WRITE, perm=DENY)], op=Op.READ)
    # A DENY on READ does not deny DESCRIBE (implications are for ALLOW ACLs only).
    assert allowed([acl(op=Op.DESCRIBE), acl(op=Op.READ, perm=DENY)], op=Op.DESCRIBE)
    # DENY ALL denies everything, for everyone through User:*.
    acls = [acl(principal=BOB, op=Op.ALL), acl(principal="User:*", op=Op.ALL, perm=DENY)]
    assert not allowed(acls, BOB, op=Op.DESCRIBE)
    # A DENY through any matching pattern wins over a literal ALLOW.
    assert not allowed([acl(op=Op.READ), acl(name="*", op=Op.READ, perm=DENY)])
    assert not allowed([acl(op=Op.READ), acl(name="ord", pattern=PRE, op=Op.READ, perm=DENY)])
    # A DENY for another principal or host does not.
    assert allowed([acl(op=Op.READ), acl(principal=BOB, perm=DENY), acl(host="10.9.9.9", perm=DENY)])


def test_prefixed_and_wildcard_patterns():
    acls = [acl(name="team-", pattern=PRE, op=Op.WRITE)]
    assert allowed(acls, op=Op.WRITE, name="team-a")
    assert allowed(acls, op=Op.WRITE, name="team-")
    assert not allowed(acls, op=Op.WRITE, name="team")
    assert not allowed(acls, op=Op.WRITE, name="other-team-a")
    assert not allowed([acl(name="team")], name="team-a")  # a LITERAL name is not a prefix
    assert allowed([acl(name="*")], name="anything")
    assert not allowed([acl(name="*", pattern=PRE)], name="anything")  # a PREFIXED "*" is just the character
    assert allowed([acl(name="*", pattern=PRE)], name="*star")
    # Many prefixes, one matching.
    many = [acl(name=f"p{i}-", pattern=PRE, principal=BOB) for i in range(50)] + [acl(name="p7", pattern=PRE)]
    assert allowed(many, name="p7-x")
    assert not allowed(many, name="p8-x")


def test_resource_types_are_separate():
    acls = [acl(rtype=G, name="orders", op=Op.READ)]
    assert allowed(acls, rtype=G)
    assert not allowed(acls, rtype=T)
    cluster = [acl(rtype=C, name="kafka-cluster", op=Op.ALTER)]
    assert allowed(cluster, rtype=C, name="kafka-cluster", op=Op.ALTER)
    assert allowed(cluster, rtype=C, name="kafka-cluster", op=Op.DESCRIBE)
    assert not allowed(cluster, rtype=C, name="kafka-cluster", op=Op.CREATE)


def test_super_users_are_allowed_everything():
    acls = [acl(principal=ALICE, op=Op.ALL, perm=DENY)]
    assert allowed(acls, ALICE, op=Op.WRITE, supers={ALICE})
    assert allowed([], CAROL, rtype=C, name="kafka-cluster", op=Op.ALTER, supers={ALICE, CAROL})
    assert not allowed(acls, ALICE, op=Op.WRITE, supers={BOB})


def test_several_principals_on_one_topic():
    acls = [
        acl(principal=ALICE, op=Op.WRITE),
        acl(principal=BOB, op=Op.READ),
        acl(principal="User:*", op=Op.DESCRIBE),
        acl(principal=CAROL, op=Op.ALL, perm=DENY),
    ]
    table = {
        (ALICE, Op.WRITE): True, (ALICE, Op.READ): False, (ALICE, Op.DESCRIBE): True,
        (BOB, Op.WRITE): False, (BOB, Op.READ): True, (BOB, Op.DESCRIBE): True,
        (CAROL, Op.WRITE): False, (CAROL, Op.READ): False, (CAROL, Op.DESCRIBE): False,
        (ANON, Op.WRITE): False, (ANON, Op.READ): False, (ANON, Op.DESCRIBE): True,
    }
    for (who, op), expected in table.items():
        assert allowed(acls, who, op=op) is expected, (who, op)


def test_decision_names_the_rule():
    cache = AclCache([acl(op=Op.WRITE, perm=DENY)])
    d = authorize(cache, frozenset(), False, ALICE, HOST, Op.WRITE, T, "orders")
    assert not d.allowed and d.rule.startswith("MatchingAcl(acl=StandardAcl(resourceType=TOPIC, resourceName=orders")
    assert authorize(cache, frozenset({ALICE}), False, ALICE, HOST, Op.WRITE, T, "orders").rule == "SuperUser"
    assert authorize(cache, frozenset(), False, ALICE, HOST, Op.WRITE, T, "x").rule == "DefaultDeny"
    assert authorize(cache, frozenset(), True, ALICE, HOST, Op.WRITE, T, "x").rule == "DefaultAllow"


# ---- authorizeByResourceType (InitProducerId) ----------------------------------------------------


def by_type(acls, principal=ALICE, op=Op.WRITE, rtype=T, host=HOST) -> bool:
    return AclCache(acls).authorize_by_resource_type(principal, host, op, rtype)


def test_authorize_by_resource_type():
    # Kafka's AuthorizerInterfaceDefaultTest cases.
    assert not by_type([])
    assert by_type([acl(op=Op.WRITE)])
    assert by_type([acl(op=Op.ALL)])
    assert by_type([acl(name="*", op=Op.WRITE)])
    assert by_type([acl(name="a", pattern=PRE, op=Op.WRITE)])
    assert not by_type([acl(op=Op.READ)])
    assert not by_type([acl(principal=BOB, op=Op.WRITE)])
    assert by_type([acl(principal="User:*", op=Op.WRITE)])
    assert not by_type([acl(host="10.0.0.9", op=Op.WRITE)])
    # A DENY of the same literal, or of a prefix of it, dominates; a wildcard DENY denies all.
    assert not by_type([acl(op=Op.WRITE), acl(op=Op.WRITE, perm=DENY)])
    assert not by_type([acl(op=Op.WRITE), acl(name="ord", pattern=PRE, op=Op.WRITE, perm=DENY)])
    assert not by_type([acl(name="orders-", pattern=PRE, op=Op.WRITE), acl(name="o", pattern=PRE, op=Op.WRITE, perm=DENY)])
    assert not by_type([acl(op=Op.WRITE), acl(name="*", op=Op.WRITE, perm=DENY)])
    # A literal DENY does not dominate a prefixed ALLOW, nor another literal.
    assert by_type([acl(name="orders", pattern=PRE, op=Op.WRITE), acl(op=Op.WRITE, perm=DENY)])
    assert by_type([acl(name="a", op=Op.WRITE), acl(name="b", op=Op.WRITE, perm=DENY)])
    # A DENY for another principal is irrelevant.
    assert by_type([acl(op=Op.WRITE), acl(name="*", principal=BOB, op=Op.WRITE, perm=DENY)])


# ---- filters (DescribeAcls, DeleteAcls) --------------------------------------------------------


def test_filters_match_like_kafka():
    lit, pre, star = acl(name="orders"), acl(name="ord", pattern=PRE), acl(name="*")
    grp = acl(rtype=G, name="orders", principal=BOB, host="10.0.0.1", op=Op.DESCRIBE, perm=DENY)
    everything = [lit, pre, star, grp]

    def matched(**kw):
        return [a for a in everything if AclBindingFilter(**kw).matches(a)]

    assert matched() == everything
    assert ANY_FILTER.matches(grp)
    assert matched(resource_type=G) == [grp]
    assert matched(resource_name="orders") == [lit, grp]  # ANY pattern type: the exact name
    assert matched(resource_name="orders", pattern_type=LIT) == [lit, grp]
    assert matched(resource_name="ord", pattern_type=PRE) == [pre]
    assert matched(resource_type=T, resource_name="orders", pattern_type=PatternType.MATCH) == [lit, pre, star]
    assert matched(resource_type=T, resource_name="other", pattern_type=PatternType.MATCH) == [star]
    assert matched(resource_name="*", pattern_type=LIT) == [star]
    assert matched(principal=BOB) == [grp]
    assert matched(host="10.0.0.1") == [grp]
    assert matched(operation=Op.DESCRIBE) == [grp]
    assert matched(permission_type=DENY) == [grp]
    # Unknown codes match nothing (DeleteAcls refuses such filters before matching).
    assert matched(resource_type=ResourceType.UNKNOWN) == []
    assert AclBindingFilter(pattern_type=PatternType.UNKNOWN).pattern_unknown()
    assert AclBindingFilter(operation=Op.UNKNOWN).entry_unknown()


def test_cache_lists_in_order_and_keeps_one_copy():
    cache = AclCache()
    b, a = acl(name="b"), acl(name="a", principal=BOB)
    assert cache.add(b) and cache.add(a)
    assert not cache.add(acl(name="b"))
    assert len(cache) == 2
    assert cache.acls(ANY_FILTER) == [a, b]
    cache.remove(a)
    cache.remove(a)  # removing twice is harmless
    assert cache.acls(ANY_FILTER) == [b]
    assert not allowed(cache.acls(ANY_FILTER), BOB, name="a")


def test_validate_new_acl_messages():
    assert validate_new_acl(acl()) is None
    assert validate_new_acl(acl(rtype=ResourceType.UNKNOWN)) == "Invalid resourceType UNKNOWN"
    assert validate_new_acl(acl(pattern=PatternType.UNKNOWN)) == "Invalid patternType UNKNOWN"
    assert validate_new_acl(acl(op=Op.UNKNOWN)) == "Invalid operation UNKNOWN"
    assert validate_new_acl(acl(perm=AclPermissionType.UNKNOWN)) == "Invalid permissionType UNKNOWN"
    assert validate_new_acl(acl(name="")) == "Resource name should not be empty"
    assert validate_new_acl(acl(principal="alice")) == (
        "Could not parse principal from `alice` (no colon is present separating the principal type from the principal name)")
    assert validate_new_acl(acl(principal="User:", host="")) is None  # Kafka accepts both


def test_operations_bit_field():
    assert operations_bit_field([Op.READ, Op.WRITE, Op.CREATE, Op.DESCRIBE, Op.DELETE, Op.ALTER, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS]) == 3576


# ---- the ACL file ------------------------------------------------------------------------------


def test_acl_file_round_trip_and_copy(tmp_path):
    f = AclFile(tmp_path)
    assert f.load() == [] and not f.exists()
    acls = [acl(name="z"), acl(rtype=G, name="g", pattern=PRE, principal="User:*", host="10.0.0.1", op=Op.ALL, perm=DENY)]
    f.save(acls)
    assert sorted(f.load()) == sorted(acls)
    data = json.loads(f.path.read_text())
    assert data["version"] == 1 and len(data["acls"]) == 2 and isinstance(data["crc32"], int)
    assert f.backup.read_bytes() == f.path.read_bytes()
    assert not (tmp_path / "sidecar-acls.json.tmp").exists()


def test_acl_file_damage(tmp_path, caplog):
    f = AclFile(tmp_path)
    f.save([acl()])
    good = f.path.read_text()
    # A flipped character that still parses fails the checksum: the copy is used.
    f.path.write_text(good.replace('"orders"', '"ordert"'))
    with caplog.at_level(logging.WARNING):
        assert f.load() == [acl()]
    assert "checksum mismatch" in caplog.text
    # Both damaged: refuse (DENY ACLs must not silently disappear).
    f.backup.write_text("{not json")
    with pytest.raises(AclFileError, match="cannot read the ACLs"):
        f.load()
    # Only the copy left (the file removed): it is used.
    f.path.unlink()
    f.backup.write_text(good)
    assert f.load() == [acl()]
    for bad in ('{"version": 2, "acls": [], "crc32": 0}', '{"version": 1, "acls": [{"resource_type": "TOPIC"}], "crc32": 0}', "[]"):
        f.path.write_text(bad)
        f.backup.write_text(bad)
        with pytest.raises(AclFileError):
            f.load()


# ---- configuration -----------------------------------------------------------------------------


def test_super_users_parsing():
    assert parse_super_users(None) == frozenset()
    assert parse_super_users(" User:admin ; User:ops;;") == {"User:admin", "User:ops"}
    with pytest.raises(ConfigError, match="principalType:principalName"):
        parse_super_users("User:admin;admin")


def test_create_authorizer(tmp_path):
    assert not create_authorizer(BrokerConfig.load(), tmp_path).enabled
    assert isinstance(create_authorizer(BrokerConfig.load(), tmp_path), NoAuthorizer)
    for name in (STANDARD_AUTHORIZER, ACL_AUTHORIZER):
        az = create_authorizer(BrokerConfig.load(overrides={
            "authorizer.class.name": name, "super.users": "User:admin", "allow.everyone.if.no.acl.found": "true"}), tmp_path)
        assert isinstance(az, StandardAuthorizer) and az.enabled
        assert az.super_users == {"User:admin"} and az.allow_if_no_acl
    with pytest.raises(ConfigError, match="authorizer.class.name=com.example.MyAuthorizer is not supported"):
        create_authorizer(BrokerConfig.load(overrides={"authorizer.class.name": "com.example.MyAuthorizer"}), tmp_path)


def test_no_authorizer_allows_everything():
    az = NoAuthorizer()
    assert az.authorize(None, None, Op.WRITE, T, "x")  # type: ignore[arg-type]
    assert az.filter(None, None, Op.READ, T, ["a", "b", "a"]) == {"a", "b"}  # type: ignore[arg-type]
    assert az.authorized_operations(None, T, "x") == 3576  # type: ignore[arg-type]
    assert az.authorized_operations(None, C, "kafka-cluster") == 8096  # type: ignore[arg-type]


# ---- the authorizer the handlers call --------------------------------------------------------


class FakeConn:
    def __init__(self, principal: str = ANON, client_host: str = HOST) -> None:
        self.principal = principal
        self.client_host = client_host


def standard(tmp_path, acls=(), supers=frozenset(), everyone=False) -> StandardAuthorizer:
    az = StandardAuthorizer(STANDARD_AUTHORIZER, tmp_path, frozenset(supers), everyone)
    for a in acls:
        az.cache.add(a)
    return az


def test_authorizer_uses_the_connection_principal_and_host(tmp_path):
    az = standard(tmp_path, [acl(principal=ALICE, host="10.0.0.1", op=Op.WRITE), acl(name="*", principal="User:*", op=Op.DESCRIBE)])
    assert az.authorize(FakeConn(ALICE, "10.0.0.1"), None, Op.WRITE, T, "orders")
    assert not az.authorize(FakeConn(ALICE, "10.0.0.2"), None, Op.WRITE, T, "orders")
    assert not az.authorize(FakeConn(BOB, "10.0.0.1"), None, Op.WRITE, T, "orders")
    assert az.filter(FakeConn(BOB), None, Op.DESCRIBE, T, ["a", "b", "a"]) == {"a", "b"}
    assert az.filter(FakeConn(ALICE, "::ffff:10.0.0.1"), None, Op.WRITE, T, ["orders", "other"]) == {"orders"}
    # READ, WRITE and the DESCRIBE they imply (AuthHelper.authorizedOperations).
    assert az.authorized_operations(FakeConn(ALICE, "10.0.0.1"), T, "orders") == (1 << Op.WRITE) | (1 << Op.DESCRIBE)
    assert az.authorized_operations(FakeConn(ALICE, "10.0.0.1"), C, "kafka-cluster") == 0
    assert standard(tmp_path, supers={ALICE}).authorized_operations(FakeConn(ALICE), C, "kafka-cluster") == 8096


def test_authorize_by_resource_type_probes_hardcode_first(tmp_path):
    # Super users and allow.everyone.if.no.acl.found pass through Kafka's "hardcode" probe.
    assert standard(tmp_path, supers={ANON}).authorize_by_resource_type(FakeConn(), None, Op.WRITE, T)
    assert standard(tmp_path, everyone=True).authorize_by_resource_type(FakeConn(), None, Op.WRITE, T)
    assert not standard(tmp_path).authorize_by_resource_type(FakeConn(), None, Op.WRITE, T)
    assert standard(tmp_path, [acl(principal=ANON, op=Op.WRITE)]).authorize_by_resource_type(FakeConn(), None, Op.WRITE, T)


def test_denials_are_logged_once_per_interval(tmp_path, caplog):
    az = standard(tmp_path)
    conn = FakeConn()
    with caplog.at_level(logging.INFO, logger="kafka_sidecar.server.security.authorizer"):
        for _ in range(5):
            assert az.filter(conn, None, Op.WRITE, T, ["a", "b"]) == set()
        assert not az.authorize(conn, None, Op.READ, G, "g1")
        assert not az.authorize(conn, None, Op.READ, G, "g2", log_denied=False)
    lines = [r.getMessage() for r in caplog.records if "is Denied" in r.getMessage()]
    assert lines == [
        "Principal = User:ANONYMOUS is Denied operation = WRITE from host = 127.0.0.1 on resource = Topic:LITERAL:a, "
        "Topic:LITERAL:b for request = ? based on rule DefaultDeny",
        "Principal = User:ANONYMOUS is Denied operation = READ from host = 127.0.0.1 on resource = Group:LITERAL:g1 "
        "for request = ? based on rule DefaultDeny",
    ]
    az._denied.interval = 0.0  # the interval over: the next line says how many were not logged
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="kafka_sidecar.server.security.authorizer"):
        az.filter(conn, None, Op.WRITE, T, ["a", "b"])
    assert caplog.records[0].getMessage().endswith("(4 more times since the last report)")
