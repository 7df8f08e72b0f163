"""TLS listeners and SASL authentication (issue 9), with real clients over loopback TCP.

One server for the module, six listeners: PLAINTEXT; SSL (client certificate requested); MTLS
(an SSL listener requiring a client certificate, its key store given inline as Kafka's
``ssl.keystore.key``/``ssl.keystore.certificate.chain``); SASL_PLAINTEXT and SASL_SSL (PLAIN,
SCRAM-SHA-256, SCRAM-SHA-512; SASL_SSL's key is encrypted, ``ssl.key.password``); REAUTH (a
SASL_PLAINTEXT listener with ``connections.max.reauth.ms`` 1500 ms, KIP-368). Certificates
are made here with trustme. Clients: confluent-kafka (librdkafka), kafka-python, a raw socket
driven with ``protocol/`` for the exact answers, and Kafka's own ``kafka-configs.sh`` (Java)
for SCRAM credentials, over SASL_SSL.
"""

from __future__ import annotations

import datetime
import logging
import os
import re
import selectors
import shutil
import socket
import stat
import struct
import subprocess
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest
from confluent_kafka import Consumer, Producer
from kafka_sidecar.protocol.messages import decode_response, encode_request

from tests.support import SidecarProcess, kafka_bin, sidecar_command, wait_until

trustme = pytest.importorskip("trustme")

KAFKA_BIN = kafka_bin("kafka-configs.sh").parent
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
JAAS = (f'{PLAIN_MODULE} required username="admin" password="admin-secret" user_admin="admin-secret" '
        f'user_alice="alice-secret"; {SCRAM_MODULE} required user_bob="bob-secret";')
SCRAM_FAILED = "Authentication failed during authentication due to invalid credentials with SASL mechanism {}"
TIMEOUT = 20.0


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("KAFKA_")}


class SecureServer(SidecarProcess):
    """kafka-sidecar with its own ``listeners`` (no ``--listen``): every listener's bound port."""

    def __init__(self, data_dir: Path, overrides: dict[str, str], log_level: str = "INFO") -> None:
        super().__init__(data_dir, overrides)
        self.log_level = log_level
        self.ports: dict[str, int] = {}

    def start(self, timeout: float = TIMEOUT) -> SecureServer:
        cmd = [*sidecar_command(), "serve", "--data-dir", str(self.data_dir), "--log-level", self.log_level]
        for k, v in self.overrides.items():
            cmd += ["--override", f"{k}={v}"]
        self._log_file = open(self.log_path, "a")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self._log_file, env=_clean_env())
        assert self.proc.stdout is not None
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        out = b""
        deadline = time.monotonic() + timeout
        try:
            while b"\n" not in out:
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(left):
                    self.kill()
                    raise RuntimeError(f"kafka-sidecar did not start in {timeout}s: {self.log_text()[-2000:]}")
                chunk = os.read(self.proc.stdout.fileno(), 4096)
                if not chunk:
                    self.proc.wait(5)
                    raise RuntimeError(f"kafka-sidecar exited with {self.proc.returncode}: {self.log_text()[-2000:]}")
                out += chunk
        finally:
            sel.close()
        line = out.decode()
        where = line.split("listening on ", 1)[1].split(" (data dir", 1)[0]
        named = re.findall(r"(\S+):(\d+) \[(\w+)\]", where)
        self.ports = {name: int(port) for _h, port, name in named} or {"?": int(where.rsplit(":", 1)[1])}
        self.port = next(iter(self.ports.values()))
        return self

    def at(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    """A CA, the server's certificate, and client certificates: good, expired, not yet valid, untrusted."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    d = tmp_path_factory.mktemp("pki")
    ca = trustme.CA()
    server = ca.issue_cert("localhost", "127.0.0.1")
    now = datetime.datetime.now(datetime.UTC)
    ca.cert_pem.write_to_path(str(d / "ca.pem"))
    server.private_key_and_cert_chain_pem.write_to_path(str(d / "server.pem"))
    # The same server key, encrypted (PKCS#8), for ssl.key.password.
    key = load_pem_private_key(server.private_key_pem.bytes(), None)
    encrypted = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.BestAvailableEncryption(b"key-secret"))
    (d / "server-encrypted.pem").write_bytes(encrypted + b"".join(b.bytes() for b in server.cert_chain_pems))

    def client(name: str, issuer=ca, **kw) -> SimpleNamespace:
        leaf = issuer.issue_cert(f"{name}@example.com", common_name=name, organization_name="Sidecar, Inc.", **kw)
        leaf.cert_chain_pems[0].write_to_path(str(d / f"{name}.crt"))
        leaf.private_key_pem.write_to_path(str(d / f"{name}.key"))
        return SimpleNamespace(cert=str(d / f"{name}.crt"), key=str(d / f"{name}.key"), leaf=leaf)

    alice = client("alice")
    from cryptography import x509

    subject = x509.load_pem_x509_certificate(alice.leaf.cert_chain_pems[0].bytes()).subject
    ou = subject.get_attributes_for_oid(x509.NameOID.ORGANIZATIONAL_UNIT_NAME)[0].value
    return SimpleNamespace(
        dir=d, ca=str(d / "ca.pem"), server=str(d / "server.pem"), server_encrypted=str(d / "server-encrypted.pem"),
        server_key=server.private_key_pem.bytes().decode(),
        server_chain="".join(b.bytes().decode() for b in server.cert_chain_pems),
        alice=alice,
        # Java's RFC 2253 form: ',' '#' and '=' escaped, most specific RDN first.
        alice_dn="CN=alice,OU=" + ou.replace("#", "\\#") + ",O=Sidecar\\, Inc.",
        expired=client("expired", not_before=now - datetime.timedelta(days=10), not_after=now - datetime.timedelta(days=1)),
        future=client("future", not_before=now + datetime.timedelta(days=1), not_after=now + datetime.timedelta(days=10)),
        rogue=client("rogue", issuer=trustme.CA()),
    )


def _one_line(pem: str) -> str:
    """How an inline PEM value often sits in a properties file: on one line."""
    return " ".join(pem.split())


def secure_overrides(pki: SimpleNamespace, **extra: str) -> dict[str, str]:
    return {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,MTLS://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,"
                     "SASL_SSL://127.0.0.1:0,REAUTH://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,"
                                          "SASL_SSL:SASL_SSL,REAUTH:SASL_PLAINTEXT",
        "ssl.keystore.type": "PEM",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": pki.ca,
        "listener.name.ssl.ssl.keystore.location": pki.server,
        "listener.name.ssl.ssl.client.auth": "requested",
        "listener.name.mtls.ssl.keystore.key": _one_line(pki.server_key),
        "listener.name.mtls.ssl.keystore.certificate.chain": _one_line(pki.server_chain),
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.sasl_ssl.ssl.keystore.location": pki.server_encrypted,
        "listener.name.sasl_ssl.ssl.key.password": "key-secret",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "sasl.jaas.config": JAAS,
        "listener.name.reauth.connections.max.reauth.ms": "1500",
        "num.partitions": "1",
        "group.initial.rebalance.delay.ms": "0",
        **extra,
    }


@pytest.fixture(scope="module")
def secure(pki: SimpleNamespace, tmp_path_factory: pytest.TempPathFactory):
    server = SecureServer(tmp_path_factory.mktemp("secure") / "data", secure_overrides(pki), log_level="DEBUG").start()
    yield server
    server.stop()


@pytest.fixture
def fresh(tmp_path: Path):
    """Servers of one test, killed at its end whatever happens."""
    started: list[SecureServer] = []

    def make(overrides: dict[str, str], data_dir: Path | None = None) -> SecureServer:
        s = SecureServer(data_dir or tmp_path / f"data-{len(started)}", overrides).start()
        started.append(s)
        return s

    yield make
    for s in started:
        if s.proc is not None and s.proc.poll() is None:
            s.kill()


def _topic() -> str:
    return f"sec-{uuid.uuid4().hex[:10]}"


# ---- clients --------------------------------------------------------------------------------


def tls(pki: SimpleNamespace, cert: SimpleNamespace | None = None) -> dict[str, str]:
    conf = {"ssl.ca.location": pki.ca}
    if cert is not None:
        conf |= {"ssl.certificate.location": cert.cert, "ssl.key.location": cert.key}
    return conf


def sasl(mechanism: str, user: str, password: str) -> dict[str, str]:
    return {"sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password}


def confluent_roundtrip(bootstrap: str, conf: dict[str, str], n: int = 50) -> list[bytes]:
    """Produce ``n`` records to a new topic and consume them back (both sides on ``conf``)."""
    topic = _topic()
    errors: list[str] = []
    base = {"bootstrap.servers": bootstrap, "error_cb": lambda e: errors.append(str(e)), **conf}
    p = Producer({**base, "message.timeout.ms": 15000})
    for i in range(n):
        p.produce(topic, f"v{i}".encode() * 40, key=str(i).encode())
    assert p.flush(TIMEOUT) == 0, errors
    c = Consumer({**base, "group.id": f"g-{topic}", "auto.offset.reset": "earliest", "enable.auto.commit": False})
    got: list[bytes] = []
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + TIMEOUT
        while len(got) < n and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append(m.value())
    finally:
        c.close()
    assert len(got) == n, (len(got), errors)
    return got


def confluent_failure(bootstrap: str, conf: dict[str, str], until=None, timeout: float = 8.0) -> list[str]:
    """A client that cannot get through: the errors it reports (served by ``poll``), once it
    reported one (or ``until()`` holds); it never gets metadata."""
    errors: list[str] = []
    p = Producer({"bootstrap.servers": bootstrap, "error_cb": lambda e: errors.append(str(e)),
                  "reconnect.backoff.ms": 500, "reconnect.backoff.max.ms": 2000, **conf})
    deadline = time.monotonic() + timeout
    while not (until() if until is not None else errors) and time.monotonic() < deadline:
        p.poll(0.1)
    with pytest.raises(Exception):  # noqa: B017 - KafkaException: the metadata request never succeeds
        p.list_topics(timeout=0.5)
    return errors


def kafka_python_roundtrip(bootstrap: str, n: int = 30, **conf) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    topic = _topic()
    producer = KafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=15000, **conf)
    try:
        for i in range(n):
            producer.send(topic, f"kp{i}".encode())
        producer.flush(timeout=TIMEOUT)
    finally:
        producer.close(timeout=5)
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", group_id=None,
                             consumer_timeout_ms=int(TIMEOUT * 1000), **conf)
    try:
        got = []
        for m in consumer:
            got.append(m.value)
            if len(got) == n:
                break
    finally:
        consumer.close()
    assert got == [f"kp{i}".encode() for i in range(n)]


class Raw:
    """One connection, requests built and answers read with ``protocol/`` (no client library)."""

    def __init__(self, address: str) -> None:
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        self.cid = 0

    def send(self, api_key: int, version: int, data: dict) -> None:
        self.cid += 1
        self.sock.sendall(encode_request(api_key, version, self.cid, "raw", data))

    def receive(self, api_key: int, version: int):
        size = struct.unpack(">i", self._exactly(4))[0]
        cid, body = decode_response(api_key, version, self._exactly(size))
        assert cid == self.cid
        return body

    def call(self, api_key: int, version: int, data: dict):
        self.send(api_key, version, data)
        return self.receive(api_key, version)

    def _exactly(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed by the server")
            buf += chunk
        return buf

    def closed_by_server(self, timeout: float = 5.0) -> bool:
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False

    def plain(self, user: str, password: str, version: int = 2):
        assert int(self.call(17, 1, {"mechanism": "PLAIN"}).error_code) == 0
        return self.call(36, version, {"auth_bytes": f"\0{user}\0{password}".encode()})

    def metadata(self):
        return self.call(3, 4, {"topics": None, "allow_auto_topic_creation": False})

    def close(self) -> None:
        self.sock.close()


def _server_log_has(server: SecureServer, text: str, timeout: float = 10.0) -> str:
    return wait_until(lambda: text in server.log_text() and server.log_text(), timeout, message=repr(text))


# ---- TLS ------------------------------------------------------------------------------------


def test_clients_over_tls_with_and_without_client_certificates(secure, pki):
    """SSL with and without a client certificate (librdkafka and kafka-python), a required
    certificate on MTLS (key store given inline); Fetch over TLS writes instead of sendfile."""
    assert len(confluent_roundtrip(secure.at("SSL"), {"security.protocol": "SSL", **tls(pki)})) == 50
    assert len(confluent_roundtrip(secure.at("SSL"), {"security.protocol": "SSL", **tls(pki, pki.alice)})) == 50
    assert len(confluent_roundtrip(secure.at("MTLS"), {"security.protocol": "SSL", **tls(pki, pki.alice)}, n=300)) == 300
    kafka_python_roundtrip(secure.at("SSL"), security_protocol="SSL", ssl_cafile=pki.ca)
    kafka_python_roundtrip(secure.at("MTLS"), security_protocol="SSL", ssl_cafile=pki.ca,
                           ssl_certfile=pki.alice.cert, ssl_keyfile=pki.alice.key)
    # Principals (Kafka's DEFAULT mapping): the subject DN as Java prints it, else ANONYMOUS.
    log = _server_log_has(secure, f"TLS as User:{pki.alice_dn}\n")
    assert "TLS as User:ANONYMOUS" in log
    assert "sendfile" not in log


@pytest.mark.parametrize("who", ["none", "expired", "future", "rogue"])
def test_required_client_certificate_refuses_missing_expired_or_untrusted(secure, pki, who):
    cert = None if who == "none" else getattr(pki, who)
    before = secure.log_text().count("SSL handshake failed")
    # With TLS 1.3 the client learns of the refusal only after its handshake "completed": it sees
    # the connection closed (librdkafka logs it, and never gets the metadata).
    confluent_failure(secure.at("MTLS"), {"security.protocol": "SSL", **tls(pki, cert)},
                      until=lambda: secure.log_text().count("SSL handshake failed") > before)
    log = secure.log_text()
    expected = {"none": "peer did not return a certificate", "expired": "certificate has expired", "future": "certificate is not yet valid",
                "rogue": "unable to get local issuer certificate"}[who]
    lines = [ln for ln in log.splitlines() if "SSL handshake failed" in ln and "(listener MTLS)" in ln]
    assert any(expected in ln for ln in lines), lines[-3:]
    # The listener still serves a good client.
    good = Producer({"bootstrap.servers": secure.at("MTLS"), "security.protocol": "SSL", **tls(pki, pki.alice)})
    assert good.list_topics(timeout=TIMEOUT).brokers


# ---- SASL -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("listener", "mechanism", "user", "password"), [
    ("SASL_PLAINTEXT", "PLAIN", "alice", "alice-secret"),
    ("SASL_PLAINTEXT", "SCRAM-SHA-256", "bob", "bob-secret"),
    ("SASL_PLAINTEXT", "SCRAM-SHA-512", "bob", "bob-secret"),
    ("SASL_SSL", "PLAIN", "admin", "admin-secret"),
    ("SASL_SSL", "SCRAM-SHA-512", "bob", "bob-secret"),
])
def test_librdkafka_sasl(secure, pki, listener, mechanism, user, password):
    conf = {"security.protocol": listener, **sasl(mechanism, user, password)}
    if listener == "SASL_SSL":
        conf |= tls(pki)
    assert len(confluent_roundtrip(secure.at(listener), conf)) == 50


def test_kafka_python_sasl(secure, pki):
    kafka_python_roundtrip(secure.at("SASL_PLAINTEXT"), security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-256",
                           sasl_plain_username="bob", sasl_plain_password="bob-secret")
    kafka_python_roundtrip(secure.at("SASL_SSL"), security_protocol="SASL_SSL", ssl_cafile=pki.ca, sasl_mechanism="PLAIN",
                           sasl_plain_username="alice", sasl_plain_password="alice-secret")
    kafka_python_roundtrip(secure.at("SASL_SSL"), security_protocol="SASL_SSL", ssl_cafile=pki.ca,
                           sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="bob", sasl_plain_password="bob-secret")


def test_wrong_credentials_are_refused_with_kafkas_error_and_closed(secure):
    """Kafka's answers (58 and its message), then the connection closes; others go on working."""
    raw = Raw(secure.at("SASL_PLAINTEXT"))
    out = raw.plain("alice", "wrong")
    assert (int(out.error_code), out.error_message) == (58, "Authentication failed: Invalid username or password")
    assert raw.closed_by_server()
    raw.close()
    raw = Raw(secure.at("SASL_PLAINTEXT"))
    assert int(raw.call(17, 1, {"mechanism": "SCRAM-SHA-256"}).error_code) == 0
    out = raw.call(36, 2, {"auth_bytes": b"n,,n=nobody,r=abcdefgh"})
    assert (int(out.error_code), out.error_message) == (58, SCRAM_FAILED.format("SCRAM-SHA-256"))
    assert raw.closed_by_server()
    raw.close()
    # librdkafka with a wrong SCRAM password (the second SCRAM step fails) reports Kafka's message,
    # while a client with the right password works on the same listener.
    errors = confluent_failure(secure.at("SASL_PLAINTEXT"), {"security.protocol": "SASL_PLAINTEXT",
                                                            **sasl("SCRAM-SHA-512", "bob", "nope")})
    assert any(SCRAM_FAILED.format("SCRAM-SHA-512") in e for e in errors), errors
    assert len(confluent_roundtrip(secure.at("SASL_PLAINTEXT"), {"security.protocol": "SASL_PLAINTEXT",
                                                                 **sasl("SCRAM-SHA-512", "bob", "bob-secret")}, n=5)) == 5
    log = secure.log_text()
    assert re.search(r"failed authentication from 127\.0\.0\.1:\d+ \(listener SASL_PLAINTEXT, mechanism PLAIN, "
                     r"user 'alice'\): wrong password", log)
    assert re.search(r"failed authentication from 127\.0\.0\.1:\d+ \(listener SASL_PLAINTEXT, mechanism SCRAM-SHA-256, "
                     r"user 'nobody'\)", log)
    assert "alice-secret" not in log and "bob-secret" not in log and "nope" not in log


def test_sasl_listener_before_authentication(secure):
    # A request other than ApiVersions/SaslHandshake: closed, no answer.
    raw = Raw(secure.at("SASL_PLAINTEXT"))
    raw.send(3, 4, {"topics": None, "allow_auto_topic_creation": False})
    assert raw.closed_by_server()
    raw.close()
    _server_log_has(secure, "unexpected Metadata request during SASL authentication")
    # ApiVersions first is fine; an unknown mechanism: UNSUPPORTED_SASL_MECHANISM with the list, then closed.
    raw = Raw(secure.at("SASL_PLAINTEXT"))
    versions = raw.call(18, 3, {"client_software_name": "raw", "client_software_version": "1"})
    keys = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in versions.api_keys}
    assert keys[17] == (0, 1) and keys[36] == (0, 2) and keys[50] == (0, 0) and keys[51] == (0, 0)
    out = raw.call(17, 1, {"mechanism": "GSSAPI"})
    assert int(out.error_code) == 33 and list(out.mechanisms) == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
    assert raw.closed_by_server()
    raw.close()
    # Frames before authentication are limited to sasl.server.max.receive.size (512 KiB).
    raw = Raw(secure.at("SASL_PLAINTEXT"))
    raw.sock.sendall(struct.pack(">i", 600_000) + b"\0" * 1024)
    assert raw.closed_by_server()
    raw.close()
    # SaslHandshake v0: the legacy flow, bare tokens; then requests are served.
    token = b"\0alice\0alice-secret"
    raw = Raw(secure.at("SASL_PLAINTEXT"))
    assert int(raw.call(17, 0, {"mechanism": "PLAIN"}).error_code) == 0
    raw.sock.sendall(struct.pack(">i", len(token)) + token)
    assert raw._exactly(4) == b"\0\0\0\0"  # PLAIN's empty answer, size-prefixed
    assert raw.metadata().brokers
    raw.close()
    # On a listener without SASL, Kafka's request handler answers ILLEGAL_SASL_STATE.
    raw = Raw(secure.at("PLAINTEXT"))
    assert int(raw.call(17, 1, {"mechanism": "PLAIN"}).error_code) == 34
    out = raw.call(36, 2, {"auth_bytes": b""})
    assert (int(out.error_code), out.error_message) == (34, "SaslAuthenticate request received after successful authentication")
    raw.close()


def test_reauthentication_on_the_same_connection(secure):
    """KIP-368 over the wire: the session lifetime is answered, the same principal may
    re-authenticate, another one may not, and an expired session is closed."""
    raw = Raw(secure.at("REAUTH"))
    out = raw.plain("alice", "alice-secret")
    assert (int(out.error_code), int(out.session_lifetime.total_seconds() * 1000)) == (0, 1500)
    time.sleep(1.1)  # Kafka starts at most one re-authentication a second
    out = raw.plain("alice", "alice-secret")
    assert (int(out.error_code), int(out.session_lifetime.total_seconds() * 1000)) == (0, 1500)
    assert raw.metadata().brokers
    time.sleep(1.1)
    out = raw.plain("admin", "admin-secret")
    assert (int(out.error_code), out.error_message) == (58, "Cannot change principals during re-authentication from User.alice: User.admin")
    assert raw.closed_by_server()
    raw.close()
    # SaslAuthenticate v0 has no lifetime field; the session still expires, and the next
    # request that is not a re-authentication closes the connection.
    raw = Raw(secure.at("REAUTH"))
    assert int(raw.plain("alice", "alice-secret", version=0).error_code) == 0
    assert raw.metadata().brokers
    time.sleep(1.7)
    raw.send(3, 4, {"topics": None, "allow_auto_topic_creation": False})
    assert raw.closed_by_server()
    raw.close()
    _server_log_has(secure, "session expired (connections.max.reauth.ms)")


def test_librdkafka_reauthenticates(secure):
    lines: list[str] = []

    class Capture(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    logger = logging.getLogger(f"rdkafka-{uuid.uuid4().hex[:6]}")
    logger.addHandler(Capture())
    logger.setLevel(logging.DEBUG)
    topic = _topic()
    errors: list[str] = []
    p = Producer({"bootstrap.servers": secure.at("REAUTH"), "security.protocol": "SASL_PLAINTEXT",
                  **sasl("SCRAM-SHA-256", "bob", "bob-secret"), "debug": "security",
                  "error_cb": lambda e: errors.append(str(e))}, logger=logger)
    delivered = []
    deadline = time.monotonic() + 4.5
    while time.monotonic() < deadline:
        p.produce(topic, b"x", on_delivery=lambda err, m: delivered.append(err))
        p.flush(5)
        time.sleep(0.25)
    assert delivered and all(e is None for e in delivered), delivered
    assert not errors, errors
    reauths = [ln for ln in lines if "Auth in state REAUTH" in ln]
    assert len(reauths) >= 2, lines[-10:]


# ---- SCRAM credentials with Kafka's tool ---------------------------------------------------


def _kafka_tool(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**_clean_env(), "KAFKA_HEAP_OPTS": "-Xmx256m", "LOG_DIR": str(tmp_path / "kafka-logs"),
           "KAFKA_JVM_PERFORMANCE_OPTS": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"}
    return subprocess.run([str(KAFKA_BIN / "kafka-configs.sh"), *args], capture_output=True, text=True, env=env, timeout=90)


def _need_java() -> None:
    if shutil.which("java") is None:
        pytest.skip("java is not installed: Kafka's tools cannot run")
    if not (KAFKA_BIN / "kafka-configs.sh").exists():
        pytest.skip(f"no Kafka distribution at {KAFKA_BIN.parent}")


def test_scram_credentials_from_kafka_configs_survive_restart(fresh, pki, tmp_path):
    _need_java()
    server = fresh({
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": pki.server,
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": f'{PLAIN_MODULE} required user_admin="admin-secret";',
        "group.initial.rebalance.delay.ms": "0",
    })
    admin = tmp_path / "admin.properties"
    admin.write_text("security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n"
                     f'sasl.jaas.config={PLAIN_MODULE} required username="admin" password="admin-secret";\n'
                     f"ssl.truststore.type=PEM\nssl.truststore.location={pki.ca}\n")
    # Java's client: TLS (PEM trust store) and SASL/PLAIN against kafka-sidecar, then AlterUserScramCredentials.
    r = _kafka_tool(tmp_path, "--bootstrap-server", server.at("SASL_SSL"), "--command-config", str(admin), "--alter",
                    "--add-config", "SCRAM-SHA-256=[iterations=8192,password=carol-secret]", "--entity-type", "users",
                    "--entity-name", "carol")
    assert r.returncode == 0 and "Completed updating config for user carol." in r.stdout, r.stdout + r.stderr
    r = _kafka_tool(tmp_path, "--bootstrap-server", server.at("PLAINTEXT"), "--describe", "--entity-type", "users")
    assert "SCRAM credential configs for user-principal 'carol' are SCRAM-SHA-256=iterations=8192" in r.stdout, r.stdout + r.stderr
    stored = server.data_dir / "sidecar-scram-credentials.json"
    assert stat.S_IMODE(stored.stat().st_mode) == 0o600 and "carol-secret" not in stored.read_text()
    carol = {"security.protocol": "SASL_SSL", **tls(pki), **sasl("SCRAM-SHA-256", "carol", "carol-secret")}
    assert len(confluent_roundtrip(server.at("SASL_SSL"), carol, n=5)) == 5
    errors = confluent_failure(server.at("SASL_SSL"), {**carol, "sasl.mechanism": "SCRAM-SHA-512"})
    assert any(SCRAM_FAILED.format("SCRAM-SHA-512") in e for e in errors), errors

    server.restart()
    assert len(confluent_roundtrip(server.at("SASL_SSL"), carol, n=5)) == 5
    r = _kafka_tool(tmp_path, "--bootstrap-server", server.at("PLAINTEXT"), "--alter", "--delete-config", "SCRAM-SHA-256",
                    "--entity-type", "users", "--entity-name", "carol")
    assert r.returncode == 0, r.stdout + r.stderr
    errors = confluent_failure(server.at("SASL_SSL"), carol)
    assert any(SCRAM_FAILED.format("SCRAM-SHA-256") in e for e in errors), errors
    r = _kafka_tool(tmp_path, "--bootstrap-server", server.at("PLAINTEXT"), "--alter", "--delete-config", "SCRAM-SHA-256",
                    "--entity-type", "users", "--entity-name", "carol")
    assert r.returncode != 0 and "ResourceNotFoundException: Attempt to delete a user credential that does not exist" in r.stderr + r.stdout


def test_subject_dn_is_what_java_prints(tmp_path):
    """The SSL principal's DN against Java's X500Principal.getName() on awkward subjects."""
    if shutil.which("java") is None:
        pytest.skip("java is not installed")
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    from kafka_sidecar.server.security.tls import subject_rfc2253

    key = ec.generate_private_key(ec.SECP256R1())
    A = x509.NameAttribute

    def rdn(*attrs):
        return x509.RelativeDistinguishedName(list(attrs))

    names = [
        x509.Name([A(NameOID.COUNTRY_NAME, "US"), A(NameOID.ORGANIZATION_NAME, 'a,b+c"d\\e<f>g;h=i#j'),
                   A(NameOID.ORGANIZATIONAL_UNIT_NAME, " lead#x trail "), A(NameOID.COMMON_NAME, "#hash")]),
        x509.Name([rdn(A(NameOID.COMMON_NAME, "bob"), A(NameOID.USER_ID, "u1")), rdn(A(NameOID.EMAIL_ADDRESS, "bob@example.com")),
                   rdn(A(NameOID.DOMAIN_COMPONENT, "com")), rdn(A(NameOID.SERIAL_NUMBER, "1234")),
                   rdn(A(NameOID.STATE_OR_PROVINCE_NAME, "Zürich")), rdn(A(NameOID.LOCALITY_NAME, "x\x00y")),
                   rdn(A(NameOID.STREET_ADDRESS, "Main St")), rdn(A(NameOID.GIVEN_NAME, "été"))]),
    ]
    files, ours = [], []
    start = datetime.datetime(2020, 1, 1)
    for i, name in enumerate(names):
        cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
                .serial_number(i + 1).not_valid_before(start).not_valid_after(start + datetime.timedelta(days=1))
                .sign(key, hashes.SHA256()))
        path = tmp_path / f"c{i}.pem"
        path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        files.append(str(path))
        ours.append(subject_rfc2253(cert.public_bytes(serialization.Encoding.DER)))
    src = tmp_path / "Dn.java"
    src.write_text("""
import java.io.*; import java.security.cert.*;
public class Dn { public static void main(String[] a) throws Exception {
  CertificateFactory cf = CertificateFactory.getInstance("X.509");
  PrintStream out = new PrintStream(System.out, true, "UTF-8");
  for (String f : a) try (InputStream in = new FileInputStream(f)) {
    out.println(((X509Certificate) cf.generateCertificate(in)).getSubjectX500Principal().getName()); } } }
""")
    r = subprocess.run(["java", "-Xmx64m", "-XX:TieredStopAtLevel=1", str(src), *files], capture_output=True, timeout=90)
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout.decode("utf-8").splitlines() == ours


# ---- start-up and config ----------------------------------------------------------------------


def _serve_error(tmp_path: Path, overrides: dict[str, str]) -> str:
    cmd = [*sidecar_command(), "serve", "--data-dir", str(tmp_path / "d")]
    for k, v in overrides.items():
        cmd += ["--override", f"{k}={v}"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=_clean_env())
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kafka-sidecar: error: "), r.stderr
    assert "listening on" not in r.stdout
    return lines[0]


def test_unusable_security_settings_are_one_line_at_start(tmp_path, pki):
    ssl_listener = {"listeners": "SSL://127.0.0.1:0"}
    sasl_listener = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0"}
    cases = [
        (ssl_listener, ["SSL://127.0.0.1:0", "no server certificate"]),
        ({**ssl_listener, "ssl.keystore.location": pki.server}, ["ssl.keystore.type JKS cannot be read", "PEM"]),
        ({**ssl_listener, "ssl.keystore.type": "PEM", "ssl.keystore.location": pki.server_encrypted},
         ["cannot load ssl.keystore.location", "ssl.key.password"]),
        ({**ssl_listener, "ssl.keystore.type": "PEM", "ssl.keystore.location": pki.server, "ssl.keystore.password": "x"},
         ["SSL key store password cannot be specified with PEM format"]),
        ({**ssl_listener, "ssl.keystore.type": "PEM", "ssl.keystore.location": pki.ca}, ["no PEM private key"]),
        (sasl_listener, ["sasl.enabled.mechanisms is GSSAPI (Kafka's default)", "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512"]),
        ({**sasl_listener, "sasl.enabled.mechanisms": "PLAIN"}, ["PLAIN needs users", "listener.name.sasl_plaintext.plain.sasl.jaas.config"]),
        ({**sasl_listener, "sasl.enabled.mechanisms": "PLAIN", "sasl.jaas.config": f'{PLAIN_MODULE} required user_a="b"'},
         ["invalid sasl.jaas.config: JAAS config entry not terminated by semi-colon"]),
        ({**sasl_listener, "listener.name.sasl_plaintext.ssl.client.auth": "sometimes"},
         ["listener.name.sasl_plaintext.ssl.client.auth", "String must be one of"]),
    ]
    for overrides, mentions in cases:
        line = _serve_error(tmp_path, overrides)
        for m in mentions:
            assert m in line, (overrides, line)
        assert "key-secret" not in line and "user_a" not in line


def test_config_show_knows_listener_prefixed_keys_and_hides_secrets(tmp_path):
    jaas = f'{PLAIN_MODULE} required user_admin="admin-secret";'
    r = subprocess.run([*sidecar_command(), "config", "--show", "--data-dir", str(tmp_path / "d"),
                        "--override", f"listener.name.sasl_ssl.plain.sasl.jaas.config={jaas}",
                        "--override", "listener.name.sasl_ssl.ssl.client.auth=required"],
                       capture_output=True, text=True, timeout=60, env=_clean_env())
    assert r.returncode == 0, r.stderr
    assert "unknown" not in r.stderr and "admin-secret" not in r.stdout
    rows = {ln.split()[0]: ln.split()[1:] for ln in r.stdout.splitlines() if ln.strip()}
    assert rows["listener.name.sasl_ssl.plain.sasl.jaas.config"] == ["[hidden]", "--override"]
    assert rows["listener.name.sasl_ssl.ssl.client.auth"] == ["required", "--override"]
