"""How a client connects, from Kafka client properties: TLS and SASL, as Kafka's clients read them.

``security.protocol`` (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL), the ``ssl.*`` trust and key
stores (PEM, or PKCS12 with the ``cryptography`` package: ``client.tls`` reads them as the
broker does for a listener), ``ssl.endpoint.identification.algorithm`` (``https``, the default,
checks the broker's host name; empty turns that off), ``sasl.mechanism`` (PLAIN, SCRAM-SHA-256,
SCRAM-SHA-512) with the user and password from ``sasl.jaas.config``. Other keys are ignored, as
Kafka's clients only warn about them.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

from kafka_sidecar.storage.log_config import ConfigError

from .jaas import JaasError, parse_jaas
from .tls import SslSettings, build_client_context

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


@dataclass(frozen=True)
class ClientSecurity:
    """How a client's connections authenticate: TLS context and SASL credentials (or none)."""

    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    mechanism: str | None = None
    username: str | None = None
    password: str | None = None

    @property
    def sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")


def _ssl_settings(props: dict[str, str]) -> SslSettings:
    def get(key: str) -> str | None:
        v = props.get(key)
        return v if v not in (None, "") else None

    return SslSettings(
        keystore_type=props.get("ssl.keystore.type", "JKS"),
        keystore_location=get("ssl.keystore.location"),
        keystore_password=get("ssl.keystore.password"),
        key_password=get("ssl.key.password"),
        keystore_certificate_chain=get("ssl.keystore.certificate.chain"),
        keystore_key=get("ssl.keystore.key"),
        truststore_type=props.get("ssl.truststore.type", "JKS"),
        truststore_location=get("ssl.truststore.location"),
        truststore_password=get("ssl.truststore.password"),
        truststore_certificates=get("ssl.truststore.certificates"),
    )


def client_security(props: dict[str, str] | None) -> ClientSecurity:
    """ClientSecurity from client properties; ConfigError for a value Kafka's client would refuse."""
    props = props or {}
    protocol = props.get("security.protocol", "PLAINTEXT").strip().upper()
    if protocol not in PROTOCOLS:
        raise ConfigError(f"Invalid value {props['security.protocol']} for configuration security.protocol: "
                          f"String must be one of: {', '.join(PROTOCOLS)}")
    context = None
    if protocol in ("SSL", "SASL_SSL"):
        check = props.get("ssl.endpoint.identification.algorithm", "https").strip() != ""
        context = build_client_context(_ssl_settings(props), "--command-config", check_hostname=check)
    if protocol not in ("SASL_PLAINTEXT", "SASL_SSL"):
        return ClientSecurity(protocol, context)
    mechanism = props.get("sasl.mechanism", "GSSAPI").strip()
    if mechanism not in MECHANISMS:
        raise ConfigError(f"sasl.mechanism {mechanism}: kafka-sidecar's tools speak {', '.join(MECHANISMS)}")
    jaas = props.get("sasl.jaas.config")
    if not jaas:
        raise ConfigError(f"security.protocol {protocol} needs sasl.jaas.config (username and password)")
    try:
        options = parse_jaas(jaas)[0].options
    except JaasError as e:
        raise ConfigError(f"sasl.jaas.config: {e}") from None
    if "username" not in options or "password" not in options:
        raise ConfigError("sasl.jaas.config: needs username=\"...\" and password=\"...\"")
    return ClientSecurity(protocol, context, mechanism, options["username"], options["password"])
