"""Kafka's ssl.* key material and a client's TLS context: shared by the broker's listeners and the clients.

Key material as Kafka takes it (DefaultSslEngineFactory's rules and messages, which Kafka
keeps in its clients module for both sides):
- ``ssl.keystore.type=PEM`` with ``ssl.keystore.location`` (one PEM file: private key and
  certificate chain) or inline ``ssl.keystore.key`` + ``ssl.keystore.certificate.chain``;
  ``ssl.key.password`` decrypts an encrypted key. ``PKCS12`` is read when the ``cryptography``
  package is installed; ``JKS`` cannot be read by Python: a one-line error says so.
- trust store (``ssl.truststore.type=PEM``, ``ssl.truststore.location`` or inline
  ``ssl.truststore.certificates``); without one, the system's CAs (Java's default trust store
  plays that role in Kafka).

The server's context and the principal of a connection are ``server.security.tls``'s.
"""

from __future__ import annotations

import os
import re
import ssl
import tempfile
from dataclasses import dataclass

from kafka_sidecar.storage.log_config import ConfigError


@dataclass(frozen=True)
class SslSettings:
    """Kafka's ssl.* values: a listener's (listener-prefixed ones already applied) or a client's."""

    keystore_type: str = "JKS"
    keystore_location: str | None = None
    keystore_password: str | None = None
    key_password: str | None = None
    keystore_certificate_chain: str | None = None
    keystore_key: str | None = None
    truststore_type: str = "JKS"
    truststore_location: str | None = None
    truststore_password: str | None = None
    truststore_certificates: str | None = None
    client_auth: str = "none"
    enabled_protocols: tuple[str, ...] = ("TLSv1.2", "TLSv1.3")
    cipher_suites: tuple[str, ...] = ()
    principal_mapping_rules: str = "DEFAULT"


_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.S)


def normalize_pem(text: str) -> str:
    """PEM blocks re-wrapped, so a value written on one line (or joined by a properties
    file's ``\\`` continuations, as Kafka's inline PEM values often are) reads as a file would."""
    blocks = []
    for kind, body in _PEM_BLOCK.findall(text):
        b64 = "".join(body.split())
        lines = [b64[i:i + 64] for i in range(0, len(b64), 64)]
        blocks.append("\n".join([f"-----BEGIN {kind}-----", *lines, f"-----END {kind}-----"]))
    return "\n".join(blocks) + "\n"


def _load_chain(ctx: ssl.SSLContext, pem: str, password: str | None, where: str, what: str) -> None:
    """``load_cert_chain`` from PEM text (Python reads key material from files only): a
    private file that lives just for the call."""
    for marker, missing in (("PRIVATE KEY-----", "private key"), ("-----BEGIN CERTIFICATE-----", "certificate")):
        if marker not in pem:
            raise ConfigError(f"{where}: cannot load {what}: no PEM {missing} in it "
                              f"(a PEM key store holds the private key and the certificate chain)")
    fd, path = tempfile.mkstemp(prefix="kafka-sidecar-key-", suffix=".pem")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(pem)
        # Never let OpenSSL prompt on a terminal for a missing password: "" fails instead.
        ctx.load_cert_chain(path, password=password if password is not None else "")
    except ssl.SSLError as e:
        encrypted = "ENCRYPTED PRIVATE KEY" in pem or "Proc-Type: 4,ENCRYPTED" in pem
        hint = " (the private key is encrypted: is ssl.key.password set and right?)" if encrypted else ""
        raise ConfigError(f"{where}: cannot load {what}: {_ssl_reason(e)}{hint}") from None
    finally:
        os.unlink(path)


def _ssl_reason(e: ssl.SSLError) -> str:
    return re.sub(r" \(_ssl\.c:\d+\)$", "", str(e))


def _read(path: str, where: str, key: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise ConfigError(f"{where}: cannot read {key} {path}: {e.strerror or e}") from None


def _pkcs12(data: bytes, password: str | None, where: str, what: str):
    try:
        from cryptography.hazmat.primitives.serialization import pkcs12
    except ImportError:
        raise ConfigError(f"{where}: {what} is PKCS12, which kafka-sidecar reads only with the 'cryptography' package "
                          f"installed (pip install cryptography); or convert it to PEM and set the type to PEM") from None
    try:
        return pkcs12.load_key_and_certificates(data, password.encode() if password is not None else None)
    except ValueError as e:
        raise ConfigError(f"{where}: cannot load {what}: {e}") from None


def load_keystore(ctx: ssl.SSLContext, s: SslSettings, where: str) -> None:
    kind = (s.keystore_type or "").upper()
    if s.keystore_key is not None:
        if kind != "PEM":
            raise ConfigError(f"{where}: SSL private key can be specified only for PEM, but key store type is {s.keystore_type}.")
        if s.keystore_certificate_chain is None:
            raise ConfigError(f"{where}: SSL private key is specified, but certificate chain is not specified.")
        if s.keystore_location is not None:
            raise ConfigError(f"{where}: Both SSL key store location and separate private key are specified.")
        if s.keystore_password is not None:
            raise ConfigError(f"{where}: SSL key store password cannot be specified with PEM format, only key password may be specified.")
        pem = normalize_pem(s.keystore_key) + normalize_pem(s.keystore_certificate_chain)
        _load_chain(ctx, pem, s.key_password, where, "ssl.keystore.key / ssl.keystore.certificate.chain")
        return
    if s.keystore_certificate_chain is not None:
        raise ConfigError(f"{where}: SSL certificate chain is specified, but private key is not specified")
    if s.keystore_location is None:
        raise ConfigError(f"{where}: no server certificate: set ssl.keystore.type=PEM and ssl.keystore.location "
                          f"(a PEM file with the private key and certificate chain), or ssl.keystore.key and "
                          f"ssl.keystore.certificate.chain")
    what = f"ssl.keystore.location {s.keystore_location}"
    if kind == "PEM":
        if s.keystore_password is not None:
            raise ConfigError(f"{where}: SSL key store password cannot be specified with PEM format, only key password may be specified")
        pem = _read(s.keystore_location, where, "ssl.keystore.location").decode("utf-8", "replace")
        _load_chain(ctx, pem, s.key_password, where, what)
    elif kind == "PKCS12":
        if s.keystore_password is None:
            raise ConfigError(f"{where}: SSL key store is specified, but key store password is not specified.")
        from cryptography.hazmat.primitives import serialization as ser

        key, cert, extra = _pkcs12(_read(s.keystore_location, where, "ssl.keystore.location"), s.keystore_password, where, what)
        if key is None or cert is None:
            raise ConfigError(f"{where}: cannot load {what}: no private key and certificate in it")
        pem = key.private_bytes(ser.Encoding.PEM, ser.PrivateFormat.PKCS8, ser.NoEncryption()).decode()
        pem += "".join(c.public_bytes(ser.Encoding.PEM).decode() for c in [cert, *(extra or [])])
        _load_chain(ctx, pem, None, where, what)
    else:
        raise ConfigError(f"{where}: ssl.keystore.type {s.keystore_type} cannot be read by kafka-sidecar: "
                          f"use ssl.keystore.type=PEM (or PKCS12 with the 'cryptography' package)")


def load_truststore(ctx: ssl.SSLContext, s: SslSettings, where: str) -> bool:
    """Load the trust store; False if none is configured."""
    kind = (s.truststore_type or "").upper()
    if s.truststore_certificates is not None:
        if kind != "PEM":
            raise ConfigError(f"{where}: SSL trust store certs can be specified only for PEM, but trust store type is {s.truststore_type}.")
        if s.truststore_location is not None:
            raise ConfigError(f"{where}: Both SSL trust store location and separate trust certificates are specified.")
        if s.truststore_password is not None:
            raise ConfigError(f"{where}: SSL trust store password cannot be specified for PEM format.")
        pem = normalize_pem(s.truststore_certificates)
    elif s.truststore_location is not None:
        what = f"ssl.truststore.location {s.truststore_location}"
        if kind == "PEM":
            if s.truststore_password is not None:
                raise ConfigError(f"{where}: SSL trust store password cannot be specified for PEM format.")
            pem = _read(s.truststore_location, where, "ssl.truststore.location").decode("utf-8", "replace")
        elif kind == "PKCS12":
            from cryptography.hazmat.primitives import serialization as ser

            _key, cert, extra = _pkcs12(_read(s.truststore_location, where, "ssl.truststore.location"), s.truststore_password, where, what)
            pem = "".join(c.public_bytes(ser.Encoding.PEM).decode() for c in [*([cert] if cert else []), *(extra or [])])
        else:
            raise ConfigError(f"{where}: ssl.truststore.type {s.truststore_type} cannot be read by kafka-sidecar: "
                              f"use ssl.truststore.type=PEM (or PKCS12 with the 'cryptography' package)")
    elif s.truststore_password is not None:
        raise ConfigError(f"{where}: SSL trust store is not specified, but trust store password is specified.")
    else:
        return False
    if "-----BEGIN CERTIFICATE-----" not in pem:
        raise ConfigError(f"{where}: the trust store has no certificate")
    try:
        ctx.load_verify_locations(cadata=normalize_pem(pem))
    except ssl.SSLError as e:
        raise ConfigError(f"{where}: cannot load the trust store: {_ssl_reason(e)}") from None
    return True



def build_client_context(s: SslSettings, where: str, check_hostname: bool = True) -> ssl.SSLContext:
    """A client SSLContext from Kafka client ssl.* settings (a tool's --command-config): the trust
    store (else the system's CAs), a client certificate when a key store is set, and host name
    verification unless ``ssl.endpoint.identification.algorithm`` is empty."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if not load_truststore(ctx, s, where):
        ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
    if s.keystore_location is not None or s.keystore_key is not None:
        load_keystore(ctx, s, where)
    ctx.check_hostname = check_hostname
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx
