"""Security building blocks without sockets: Kafka's JAAS syntax, SCRAM (RFC 7677's vector),
the SASL state machine's rules, the RFC 2253 DN as Java prints it, ssl.principal.mapping.rules,
listener-prefixed config keys."""

from __future__ import annotations

import base64

import pytest
from kafka_sidecar.client.jaas import JaasError, parse_jaas
from kafka_sidecar.client.tls import normalize_pem
from kafka_sidecar.server.config import BrokerConfig
from kafka_sidecar.server.security import sasl as sasl_mod
from kafka_sidecar.server.security.credentials import (
    PLAIN_LOGIN_MODULE,
    jaas_users,
    scram_credential,
)
from kafka_sidecar.server.security.sasl import (
    AuthenticationClose,
    Gate,
    PlainServer,
    SaslFailure,
    SaslServerAuthenticator,
    SaslSettings,
    ScramServer,
)
from kafka_sidecar.server.security.tls import PrincipalMapper
from kafka_sidecar.storage.log_config import ConfigError

# ---- JAAS -------------------------------------------------------------------------------------


def test_jaas_parses_kafkas_syntax_quotes_escapes_comments():
    text = ('org.apache.kafka.common.security.plain.PlainLoginModule required /* admin */ username="admin" '
            'password="admin-secret" user_admin="admin-secret" // the broker itself\n'
            "user_alice='alice \\\"q\\\" \\101' user_bob=bare-word.2 user_e=\"\";\n"
            "org.apache.kafka.common.security.scram.ScramLoginModule optional user_x=\"y\";")
    entries = parse_jaas(text)
    assert [e.login_module for e in entries] == [PLAIN_LOGIN_MODULE, "org.apache.kafka.common.security.scram.ScramLoginModule"]
    assert entries[0].control_flag == "REQUIRED" and entries[1].control_flag == "OPTIONAL"
    users = jaas_users(entries, PLAIN_LOGIN_MODULE)
    assert users == {"admin": "admin-secret", "alice": 'alice "q" A', "bob": "bare-word.2", "e": ""}


@pytest.mark.parametrize(("text", "message"), [
    ("", "Login module not specified in JAAS config"),
    ("Module", "Login module control flag not specified in JAAS config"),
    ("Module sometimes;", "Invalid login module control flag 'sometimes' in JAAS config"),
    ('Module required user_a="x"', "JAAS config entry not terminated by semi-colon"),
    ("Module required user_a=123;", "Value not specified for key 'user_a' in JAAS config"),
    ("Module required user_a;", "Value not specified for key 'user_a' in JAAS config"),
])
def test_jaas_errors_are_kafkas(text, message):
    with pytest.raises(JaasError) as e:
        parse_jaas(text)
    assert str(e.value) == message


# ---- SCRAM ------------------------------------------------------------------------------------


def test_scram_sha256_matches_rfc7677(monkeypatch):
    monkeypatch.setattr(sasl_mod, "_server_nonce", lambda: "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    cred = scram_credential("SCRAM-SHA-256", "pencil", 4096, base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ=="))
    server = ScramServer("SCRAM-SHA-256", lambda user: cred if user == "user" else None)
    first = server.evaluate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert first == b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    final = server.evaluate(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                            b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert server.complete and server.user == "user"


def test_scram_failures_say_nothing_about_the_cause():
    cred = scram_credential("SCRAM-SHA-512", "right")
    generic = "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512"
    with pytest.raises(SaslFailure) as e:
        ScramServer("SCRAM-SHA-512", lambda u: None).evaluate(b"n,,n=ghost,r=abc")
    assert e.value.client_message == generic and "no such user" in e.value.reason
    server = ScramServer("SCRAM-SHA-512", lambda u: cred)
    first = server.evaluate(b"n,,n=alice,r=abc").decode()
    nonce = first.split(",")[0][2:]
    with pytest.raises(SaslFailure) as e:
        server.evaluate(f"c=biws,r={nonce},p={base64.b64encode(bytes(64)).decode()}".encode())
    assert e.value.client_message == generic and "wrong password" in e.value.reason
    with pytest.raises(SaslFailure) as e:
        ScramServer("SCRAM-SHA-512", lambda u: cred).evaluate(b"garbage")
    assert e.value.client_message == generic


def test_plain_messages_are_kafkas():
    assert PlainServer({"alice": "pw"}).evaluate(b"\0alice\0pw") == b""
    for token, message in [
        (b"\0alice\0nope", "Authentication failed: Invalid username or password"),
        (b"\0ghost\0pw", "Authentication failed: Invalid username or password"),
        (b"\0\0pw", "Authentication failed: username not specified"),
        (b"\0alice\0", "Authentication failed: password not specified"),
        (b"bob\0alice\0pw", "Authentication failed: Client requested an authorization id that is different from username"),
        (b"alice-pw", "Invalid SASL/PLAIN response: expected 3 tokens, got 1"),
        (b"a\0b\0c\0d", "Invalid SASL/PLAIN response: expected 3 tokens, got 4"),
    ]:
        with pytest.raises(SaslFailure) as e:
            PlainServer({"alice": "pw"}).evaluate(token)
        assert e.value.client_message == message, token


# ---- the authenticator's state machine ----------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _auth(reauth_ms: int = 0, clock: Clock | None = None) -> SaslServerAuthenticator:
    settings = SaslSettings("SASL_PLAINTEXT", ["PLAIN", "SCRAM-SHA-256"], plain_users={"alice": "pw", "bob": "pw2"},
                            reauth_ms={"PLAIN": reauth_ms, "SCRAM-SHA-256": reauth_ms})
    return SaslServerAuthenticator(settings, "127.0.0.1:1", clock or Clock())


def test_only_versions_handshake_authenticate_before_authentication():
    a = _auth()
    with pytest.raises(AuthenticationClose, match="Metadata"):
        a.gate(b"", 3)
    a = _auth()
    assert a.gate(b"", 18) is Gate.DISPATCH
    with pytest.raises(AuthenticationClose):  # ApiVersions only once, before the handshake
        a.gate(b"", 18)
    a = _auth()
    a.gate(b"", 18)
    assert a.gate(b"", 17) is Gate.DISPATCH
    assert a.handshake(1, "PLAIN") == (0, ["PLAIN", "SCRAM-SHA-256"])
    with pytest.raises(AuthenticationClose):
        a.gate(b"", 0)
    assert a.gate(b"", 36) is Gate.DISPATCH
    out = a.authenticate(2, b"\0alice\0pw")
    assert (out.error_code, out.session_lifetime_ms) == (0, 0) and a.principal == "User:alice"
    assert a.gate(b"", 3) is Gate.DISPATCH and a.receive_limit is None
    # After authentication: KafkaApis' answers.
    assert a.handshake(1, "PLAIN") == (34, [])
    assert a.authenticate(2, b"x").error_code == 34


def test_unsupported_mechanism_and_v0_raw_flow():
    a = _auth()
    a.gate(b"", 17)
    assert a.handshake(1, "GSSAPI") == (33, ["PLAIN", "SCRAM-SHA-256"]) and a.close_after_response
    a = _auth()
    a.gate(b"", 17)
    a.handshake(0, "PLAIN")
    assert a.gate(b"\0alice\0pw", None) is Gate.RAW_TOKEN
    assert a.evaluate_raw(b"\0alice\0pw") == b"" and a.authenticated


def test_reauthentication_rules():
    clock = Clock()
    a = _auth(reauth_ms=5000, clock=clock)
    a.gate(b"", 17)
    a.handshake(1, "PLAIN")
    assert a.authenticate(1, b"\0alice\0pw").session_lifetime_ms == 5000
    clock.now += 0.5
    assert a.gate(b"", 17) is Gate.DISPATCH  # re-authentication starts
    assert a.handshake(1, "PLAIN")[0] == 0
    assert a.authenticate(2, b"\0alice\0pw").session_lifetime_ms == 5000
    clock.now += 0.5  # less than a second since the last re-authentication began: a plain request
    assert a.gate(b"", 17) is Gate.DISPATCH and a.handshake(1, "PLAIN") == (34, [])
    clock.now += 6  # the session expired: only a re-authentication is accepted
    with pytest.raises(AuthenticationClose, match="expired"):
        a.gate(b"", 3)
    a.gate(b"", 17)
    a.handshake(1, "PLAIN")
    out = a.authenticate(2, b"\0bob\0pw2")
    assert out.error_code == 58 and out.error_message == "Cannot change principals during re-authentication from User.alice: User.bob"
    assert a.close_after_response
    b = _auth(reauth_ms=5000)
    b.gate(b"", 17)
    b.handshake(1, "PLAIN")
    b.authenticate(1, b"\0alice\0pw")
    b.clock.now += 2
    b.gate(b"", 17)
    assert b.handshake(1, "SCRAM-SHA-256")[0] == 0
    with pytest.raises(AuthenticationClose, match="not supported for re-authentication of mechanism 'PLAIN'"):
        b.gate(b"", 36)


# ---- principals ---------------------------------------------------------------------------------


def test_principal_mapping_rules_follow_kafka():
    dn = "CN=alice,OU=ServiceUsers,O=Example,C=US"
    assert PrincipalMapper("DEFAULT").name(dn) == dn
    m = PrincipalMapper("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,DEFAULT")
    assert m.name(dn) == "alice"
    assert m.name("CN=Bob,OU=Ops,O=E,L=x,ST=y,C=z") == "bob@ops"
    assert m.name("CN=carol") == "CN=carol"
    assert PrincipalMapper("RULE:^CN=(.*)$/$1/U").name("CN=dave") == "DAVE"
    with pytest.raises(Exception, match="No rules apply"):
        PrincipalMapper("RULE:^CN=x$/y/").name("CN=z")
    with pytest.raises(ConfigError):
        PrincipalMapper("RULE:^CN=(.*$/$1/")


def test_inline_pem_written_on_one_line_is_rewrapped():
    pem = "-----BEGIN CERTIFICATE-----\nQUJD\nREVG\n-----END CERTIFICATE-----\n"
    assert normalize_pem("-----BEGIN CERTIFICATE----- QUJD REVG -----END CERTIFICATE-----") == \
        "-----BEGIN CERTIFICATE-----\nQUJDREVG\n-----END CERTIFICATE-----\n"
    assert normalize_pem(pem.replace("\n", "")) == normalize_pem(pem)


# ---- config -------------------------------------------------------------------------------------


def test_listener_prefixed_keys_are_known_and_validated_like_the_plain_key(caplog):
    cfg = BrokerConfig.load(overrides={
        "listener.name.sasl_ssl.ssl.client.auth": "required",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": f'{PLAIN_LOGIN_MODULE} required user_a="b";',
        "listener.name.sasl_ssl.scram-sha-256.connections.max.reauth.ms": "5000",
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "PLAIN",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
    })
    assert cfg.unknown == []
    assert cfg.for_listener("SASL_SSL", "ssl.client.auth") == "required"
    assert cfg.for_listener("OTHER", "ssl.client.auth") == "none"
    assert cfg.for_listener("SASL_SSL", "connections.max.reauth.ms", "SCRAM-SHA-256") == 5000
    assert cfg.for_listener("SASL_SSL", "connections.max.reauth.ms", "PLAIN") == 0
    assert cfg.for_listener("SASL_SSL", "sasl.jaas.config", "PLAIN").endswith('user_a="b";')
    assert cfg.for_listener("SASL_SSL", "sasl.enabled.mechanisms") == "PLAIN"
    assert cfg.for_listener("SASL_PLAINTEXT", "sasl.enabled.mechanisms") == "SCRAM-SHA-512"
    with pytest.raises(ConfigError, match="listener.name.ssl.ssl.client.auth"):
        BrokerConfig.load(overrides={"listener.name.ssl.ssl.client.auth": "sometimes"})
    with pytest.raises(ConfigError, match="listener.name.x.plain.connections.max.reauth.ms"):
        BrokerConfig.load(overrides={"listener.name.x.plain.connections.max.reauth.ms": "soon"})
    unknown = BrokerConfig.load(overrides={"listener.name.x.num.partitions": "3"})
    assert unknown.unknown == ["listener.name.x.num.partitions"]
