"""Per-listener security, built once at start-up from the config (errors are one-line ConfigErrors).

A listener's security protocol decides what its connections go through before their first
request: SSL and SASL_SSL a TLS handshake (``tls.py``), SASL_PLAINTEXT and SASL_SSL SASL
authentication (``sasl.py``). Every setting may be given per listener with Kafka's prefix
(``listener.name.<listener>.ssl.keystore.location``), SASL ones per mechanism too
(``listener.name.<listener>.plain.sasl.jaas.config``); see ``BrokerConfig.for_listener``.

JAAS configs, as Kafka reads them: ``listener.name.<l>.<mechanism>.sasl.jaas.config``. Kafka's
broker ignores a plain ``sasl.jaas.config`` (it wants a JAAS file); kafka-sidecar has no JAAS file,
so it falls back to ``listener.name.<l>.sasl.jaas.config``, then ``sasl.jaas.config``.
"""

from __future__ import annotations

import logging
import ssl
from dataclasses import dataclass

from kafka_sidecar.client.jaas import JaasError, parse_jaas
from kafka_sidecar.client.tls import SslSettings
from kafka_sidecar.storage.log_config import ConfigError

from ..config import BrokerConfig, listener_key
from ..listeners import Endpoint
from .credentials import (
    PLAIN_LOGIN_MODULE,
    SCRAM_LOGIN_MODULE,
    SCRAM_MECHANISMS,
    ScramCredential,
    jaas_users,
    scram_credential,
)
from .sasl import PLAIN, SUPPORTED_MECHANISMS, SaslSettings
from .tls import PrincipalMapper, build_server_context

log = logging.getLogger(__name__)

SSL_PROTOCOLS = {"SSL", "SASL_SSL"}
SASL_PROTOCOLS = {"SASL_PLAINTEXT", "SASL_SSL"}
HANDSHAKE_TIMEOUT_S = 60.0  # asyncio's default TLS handshake timeout, also capped by connections.max.idle.ms


@dataclass
class ListenerSecurity:
    """What a connection on one listener goes through before its first request."""

    endpoint: Endpoint
    ssl_context: ssl.SSLContext | None = None
    principal_mapper: PrincipalMapper | None = None
    sasl: SaslSettings | None = None
    handshake_timeout: float = HANDSHAKE_TIMEOUT_S


def _ssl_settings(config: BrokerConfig, listener: str) -> SslSettings:
    def get(key: str):
        return config.for_listener(listener, key)

    def listed(key: str) -> tuple[str, ...]:
        return tuple(p.strip() for p in str(get(key) or "").split(",") if p.strip())

    return SslSettings(
        keystore_type=str(get("ssl.keystore.type") or "JKS"),
        keystore_location=get("ssl.keystore.location") or None,
        keystore_password=get("ssl.keystore.password"),
        key_password=get("ssl.key.password"),
        keystore_certificate_chain=get("ssl.keystore.certificate.chain") or None,
        keystore_key=get("ssl.keystore.key") or None,
        truststore_type=str(get("ssl.truststore.type") or "JKS"),
        truststore_location=get("ssl.truststore.location") or None,
        truststore_password=get("ssl.truststore.password"),
        truststore_certificates=get("ssl.truststore.certificates") or None,
        client_auth=str(get("ssl.client.auth") or "none"),
        enabled_protocols=listed("ssl.enabled.protocols"),
        cipher_suites=listed("ssl.cipher.suites"),
        principal_mapping_rules=str(get("ssl.principal.mapping.rules") or "DEFAULT"),
    )


def _jaas(config: BrokerConfig, listener: str, mechanism: str, where: str):
    """(entries, config name) of the JAAS config that applies, or (None, None)."""
    text = config.for_listener(listener, "sasl.jaas.config", mechanism)
    if not text:
        return None, None
    found = config.source_for_listener(listener, "sasl.jaas.config", mechanism)
    name = found[0] if found else "sasl.jaas.config"
    try:
        return parse_jaas(str(text)), name
    except JaasError as e:
        raise ConfigError(f"{where}: invalid {name}: {e}") from None


def _sasl_settings(config: BrokerConfig, ep: Endpoint, where: str) -> SaslSettings:
    listener = ep.name
    configured = [m.strip() for m in str(config.for_listener(listener, "sasl.enabled.mechanisms") or "").split(",") if m.strip()]
    served = [m for m in dict.fromkeys(configured) if m in SUPPORTED_MECHANISMS]
    dropped = [m for m in configured if m not in SUPPORTED_MECHANISMS]
    found = config.source_for_listener(listener, "sasl.enabled.mechanisms")
    name = found[0] if found else "sasl.enabled.mechanisms"
    if not served:
        shown = (",".join(configured) or "empty") + (" (Kafka's default)" if found is None else "")
        raise ConfigError(f"{where}: {name} is {shown}, and kafka-sidecar "
                          f"serves only {', '.join(SUPPORTED_MECHANISMS)}: set {listener_key(listener, 'sasl.enabled.mechanisms')} "
                          f"(or sasl.enabled.mechanisms), e.g. to PLAIN,SCRAM-SHA-256")
    if dropped:
        log.warning("%s: SASL mechanism(s) %s in %s are not supported by kafka-sidecar and not offered",
                    where, ", ".join(dropped), name)
    settings = SaslSettings(
        listener=listener, mechanisms=served,
        max_receive_size=int(config.for_listener(listener, "sasl.server.max.receive.size") or 524288),
        failed_delay_ms=int(config.get("connection.failed.authentication.delay.ms") or 0),
    )
    for mech in served:
        settings.reauth_ms[mech] = int(config.for_listener(listener, "connections.max.reauth.ms", mech) or 0)
        entries, jaas_name = _jaas(config, listener, mech, where)
        if mech == PLAIN:
            key = listener_key(listener, "sasl.jaas.config", mech)
            if entries is None:
                raise ConfigError(f"{where}: SASL mechanism PLAIN needs users: set {key} (or sasl.jaas.config) to "
                                  f'{PLAIN_LOGIN_MODULE} required user_<name>="<password>";')
            if not any(e.login_module == PLAIN_LOGIN_MODULE for e in entries):
                raise ConfigError(f"{where}: {jaas_name} has no {PLAIN_LOGIN_MODULE} entry, so SASL mechanism PLAIN has no users")
            settings.plain_users = jaas_users(entries, PLAIN_LOGIN_MODULE)
            if not settings.plain_users:
                log.warning("%s: %s lists no user_<name> for PLAIN: every PLAIN login will fail", where, jaas_name)
        elif mech in SCRAM_MECHANISMS and entries is not None:
            # Ours, not Kafka's: user_<name>="<password>" of a ScramLoginModule entry are SCRAM users
            # (salted here, never stored); credentials made with AlterUserScramCredentials win.
            creds: dict[str, ScramCredential] = {}
            for user, password in jaas_users(entries, SCRAM_LOGIN_MODULE).items():
                creds[user] = scram_credential(mech, password)
            settings.jaas_scram[mech] = creds
    return settings


def build_listener_security(config: BrokerConfig, endpoints: list[Endpoint]) -> dict[str, ListenerSecurity]:
    """Security of every listener that has some (PLAINTEXT listeners are left out)."""
    out: dict[str, ListenerSecurity] = {}
    idle_ms = config.get("connections.max.idle.ms")
    timeout = HANDSHAKE_TIMEOUT_S if idle_ms is None or idle_ms < 0 else min(HANDSHAKE_TIMEOUT_S, max(idle_ms / 1000, 1.0))
    for ep in endpoints:
        proto = ep.security_protocol
        if proto not in SSL_PROTOCOLS and proto not in SASL_PROTOCOLS:
            continue
        where = f"listener {ep.uri()} ({proto})"
        sec = ListenerSecurity(ep, handshake_timeout=timeout)
        if proto in SSL_PROTOCOLS:
            s = _ssl_settings(config, ep.name)
            sec.ssl_context = build_server_context(s, where)
            sec.principal_mapper = PrincipalMapper(s.principal_mapping_rules)
        if proto in SASL_PROTOCOLS:
            sec.sasl = _sasl_settings(config, ep, where)
        out[ep.name] = sec
    return out
