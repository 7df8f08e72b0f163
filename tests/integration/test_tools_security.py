"""Our tools reach TLS and SASL listeners through ``--command-config``, as Kafka's tools do:
topics, groups, delete-records, produce and consume against the module's secure server
(the listeners of ``test_security_auth``), over real TCP."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.integration.test_security_auth import PLAIN_MODULE, SCRAM_MODULE, pki, secure  # noqa: F401 - fixtures
from tests.support import sidecar_command

TIMEOUT = 60


def cli(*args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*sidecar_command(), *args], input=input, capture_output=True, text=True, timeout=TIMEOUT)


def properties(path: Path, **props: str) -> Path:
    # A Java properties file as users write them: a comment, `key=value` and `key: value` lines.
    lines = ["# kafka-sidecar --command-config"]
    for i, (k, v) in enumerate(props.items()):
        lines.append(f"{k}: {v}" if i % 2 else f"{k}={v}")
    path.write_text("\n".join(lines) + "\n")
    return path


def _pkcs12_truststore(certs: SimpleNamespace, path: Path) -> str:
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import BestAvailableEncryption, pkcs12

    ca = x509.load_pem_x509_certificate(Path(certs.ca).read_bytes())
    path.write_bytes(pkcs12.serialize_key_and_certificates(b"ca", None, None, [ca], BestAvailableEncryption(b"trust-secret")))
    return str(path)


def configs(certs: SimpleNamespace, d: Path) -> dict[str, tuple[str, Path]]:
    """Listener name -> (listener, its command-config file)."""
    scram = lambda user, pw: f'{SCRAM_MODULE} required username="{user}" password="{pw}";'  # noqa: E731
    return {
        "ssl-pem": ("SSL", properties(d / "ssl.properties", **{
            "security.protocol": "SSL", "ssl.truststore.type": "PEM", "ssl.truststore.location": certs.ca})),
        "ssl-pkcs12": ("SSL", properties(d / "ssl-p12.properties", **{
            "security.protocol": "SSL", "ssl.truststore.type": "PKCS12",
            "ssl.truststore.location": _pkcs12_truststore(certs, d / "trust.p12"), "ssl.truststore.password": "trust-secret"})),
        "mtls": ("MTLS", properties(d / "mtls.properties", **{
            "security.protocol": "SSL", "ssl.truststore.type": "PEM", "ssl.truststore.location": certs.ca,
            "ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": " ".join(Path(certs.alice.cert).read_text().split()),
            "ssl.keystore.key": " ".join(Path(certs.alice.key).read_text().split())})),
        "plain": ("SASL_PLAINTEXT", properties(d / "plain.properties", **{
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.jaas.config": f'{PLAIN_MODULE} required username="alice" password="alice-secret";'})),
        "scram-256": ("SASL_PLAINTEXT", properties(d / "scram256.properties", **{
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256", "sasl.jaas.config": scram("bob", "bob-secret")})),
        "scram-512": ("SASL_PLAINTEXT", properties(d / "scram512.properties", **{
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config": scram("bob", "bob-secret")})),
        "sasl-ssl": ("SASL_SSL", properties(d / "sasl-ssl.properties", **{
            "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256", "sasl.jaas.config": scram("bob", "bob-secret"),
            "ssl.truststore.type": "PEM", "ssl.truststore.location": certs.ca})),
    }


@pytest.mark.parametrize("name", ["ssl-pem", "ssl-pkcs12", "mtls", "plain", "scram-256", "scram-512", "sasl-ssl"])
def test_tools_with_command_config(name: str, secure, pki: SimpleNamespace, tmp_path: Path) -> None:  # noqa: F811
    listener, config = configs(pki, tmp_path)[name]
    b, cc = secure.at(listener), ["--command-config", str(config)]
    topic, group = f"secure-tools-{name}-{uuid.uuid4().hex[:6]}", f"secure-group-{uuid.uuid4().hex[:6]}"
    created = cli("topics", "--bootstrap-server", b, *cc, "--create", "--topic", topic, "--partitions", "2")
    assert created.returncode == 0 and created.stdout == f"Created topic {topic}.\n", created.stderr
    assert topic in cli("topics", "--bootstrap-server", b, *cc, "--list").stdout.split()
    assert cli("produce", "-b", b, *cc, "-t", topic, "-p", "0", "a", "b", "c").returncode == 0
    consumed = cli("consume", "-b", b, *cc, "-t", topic, "--from-beginning", "-e", "-g", group, "--json")
    assert [json.loads(line)["value"] for line in consumed.stdout.splitlines()] == ["a", "b", "c"], consumed.stderr
    described = cli("groups", "--bootstrap-server", b, *cc, "--describe", "--group", group)
    assert described.returncode == 0 and f"{group} {topic}" in " ".join(described.stdout.split()), described.stdout
    offsets = tmp_path / "offsets.json"
    offsets.write_text(json.dumps({"partitions": [{"topic": topic, "partition": 0, "offset": 2}], "version": 1}))
    deleted = cli("delete-records", "--bootstrap-server", b, *cc, "--offset-json-file", str(offsets))
    assert deleted.returncode == 0 and f"partition: {topic}-0\tlow_watermark: 2" in deleted.stdout, deleted.stdout + deleted.stderr


def test_wrong_password_and_missing_config_fail_clearly(secure, pki: SimpleNamespace, tmp_path: Path) -> None:  # noqa: F811
    bad = properties(tmp_path / "bad.properties", **{
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.jaas.config": f'{SCRAM_MODULE} required username="bob" password="wrong";'})
    done = cli("topics", "--bootstrap-server", secure.at("SASL_PLAINTEXT"), "--command-config", str(bad), "--list")
    assert done.returncode == 1
    assert "SaslAuthenticationException: Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256" in done.stderr
    plain = properties(tmp_path / "plain-bad.properties", **{
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": f'{PLAIN_MODULE} required username="alice" password="nope";'})
    done = cli("consume", "-b", secure.at("SASL_PLAINTEXT"), "--command-config", str(plain), "-t", "x", "-e")
    assert done.returncode == 1 and "Authentication failed: Invalid username or password" in done.stderr
    # No --command-config against a SASL listener: the broker closes the connection, the tool says so.
    done = cli("topics", "--bootstrap-server", secure.at("SASL_PLAINTEXT"), "--list")
    assert done.returncode == 1 and done.stderr.startswith("kafka-sidecar: error:"), done.stderr
    # A value Kafka's client refuses.
    wrong = properties(tmp_path / "wrong.properties", **{"security.protocol": "TLS"})
    done = cli("groups", "--bootstrap-server", secure.at("SSL"), "--command-config", str(wrong), "--list")
    assert done.returncode == 2 and done.stderr == ("kafka-sidecar: error: Invalid value TLS for configuration security.protocol: "
                                                    "String must be one of: PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL\n")


def test_properties_parser(tmp_path: Path) -> None:
    from kafka_sidecar.client import client_security
    from kafka_sidecar.server.tools.command_config import read_properties

    f = tmp_path / "c.properties"
    f.write_text("# comment\n! also a comment\nsecurity.protocol = SASL_PLAINTEXT\nsasl.mechanism: PLAIN\n"
                 'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\\n'
                 '    username="u" password="p=q";\nunknown.key=ignored\n')
    props = read_properties(f)
    assert props["security.protocol"] == "SASL_PLAINTEXT" and props["sasl.mechanism"] == "PLAIN"
    sec = client_security(props)
    assert (sec.protocol, sec.mechanism, sec.username, sec.password, sec.ssl_context) == ("SASL_PLAINTEXT", "PLAIN", "u", "p=q", None)
