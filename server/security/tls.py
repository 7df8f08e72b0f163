"""TLS for SSL and SASL_SSL listeners: Kafka's ssl.* settings, server context, client principal.

Key material as Kafka takes it (DefaultSslEngineFactory's rules and messages):
- ``ssl.keystore.type=PEM`` with ``ssl.keystore.location`` (one PEM file: private key and
  certificate chain) or inline ``ssl.keystore.key`` + ``ssl.keystore.certificate.chain``;
  ``ssl.key.password`` decrypts an encrypted key. ``PKCS12`` is read when the ``cryptography``
  package is installed; ``JKS`` cannot be read by Python: a one-line start-up error says so.
- trust store (``ssl.truststore.type=PEM``, ``ssl.truststore.location`` or inline
  ``ssl.truststore.certificates``) verifies client certificates; without one, the system's
  CAs do (Java's default trust store plays that role in Kafka).
- ``ssl.client.auth`` none/requested/required, ``ssl.enabled.protocols``.

The principal of an SSL connection is ``User:`` + the client certificate's subject DN as
Java's ``X500Principal.getName()`` prints it (RFC 2253, with Java's keywords and escapes),
mapped by ``ssl.principal.mapping.rules`` (Kafka's SslPrincipalMapper); ``User:ANONYMOUS``
without a client certificate.
"""

from __future__ import annotations

import logging
import os
import re
import ssl
import tempfile
from collections.abc import Callable
from dataclasses import dataclass

from kafka_sidecar.storage.log_config import ConfigError

log = logging.getLogger(__name__)

ANONYMOUS = "User:ANONYMOUS"
_PROTOCOLS = {
    "TLSv1": ssl.TLSVersion.TLSv1, "TLSv1.1": ssl.TLSVersion.TLSv1_1,
    "TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


@dataclass(frozen=True)
class SslSettings:
    """One listener's ssl.* values (listener-prefixed ones already applied)."""

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


# ---- server context ---------------------------------------------------------------------------


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


def _load_keystore(ctx: ssl.SSLContext, s: SslSettings, where: str) -> None:
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


def _load_truststore(ctx: ssl.SSLContext, s: SslSettings, where: str) -> bool:
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


def build_server_context(s: SslSettings, where: str) -> ssl.SSLContext:
    """The listener's server SSLContext; ConfigError (one line, naming ``where``) if unusable."""
    if s.client_auth not in _CLIENT_AUTH:
        raise ConfigError(f"{where}: invalid ssl.client.auth {s.client_auth!r} (none, requested or required)")
    unknown = [p for p in s.enabled_protocols if p not in _PROTOCOLS]
    if unknown or not s.enabled_protocols:
        raise ConfigError(f"{where}: ssl.enabled.protocols {','.join(s.enabled_protocols)}: "
                          f"each must be one of {', '.join(_PROTOCOLS)}")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    versions = sorted(_PROTOCOLS[p] for p in s.enabled_protocols)
    ctx.minimum_version, ctx.maximum_version = versions[0], versions[-1]
    if s.cipher_suites:
        log.warning("%s: ssl.cipher.suites is not supported by kafka-sidecar (Java suite names); OpenSSL's defaults apply", where)
    _load_keystore(ctx, s, where)
    ctx.verify_mode = _CLIENT_AUTH[s.client_auth]
    if not _load_truststore(ctx, s, where) and s.client_auth != "none":
        ctx.load_default_certs(ssl.Purpose.CLIENT_AUTH)
    return ctx


# ---- principal ---------------------------------------------------------------------------------


def _der(buf: bytes, pos: int) -> tuple[int, int, int, int]:
    """(tag, content start, content end, header start) of the DER element at ``pos``."""
    if pos + 2 > len(buf):
        raise ValueError("truncated DER")
    tag, length = buf[pos], buf[pos + 1]
    start = pos + 2
    if length & 0x80:
        n = length & 0x7F
        if n == 0 or n > 4 or start + n > len(buf):
            raise ValueError("bad DER length")
        length = int.from_bytes(buf[start:start + n], "big")
        start += n
    end = start + length
    if end > len(buf):
        raise ValueError("truncated DER")
    return tag, start, end, pos


def _children(buf: bytes, start: int, end: int) -> list[tuple[int, int, int, int]]:
    out = []
    pos = start
    while pos < end:
        el = _der(buf, pos)
        out.append(el)
        pos = el[2]
    return out


def _oid(data: bytes) -> str:
    parts: list[int] = []
    value = 0
    for b in data:
        value = (value << 7) | (b & 0x7F)
        if not b & 0x80:
            parts.append(value)
            value = 0
    first = parts[0] if parts else 0
    head = [min(first // 40, 2), first - 40 * min(first // 40, 2)]
    return ".".join(str(p) for p in head + parts[1:])


# sun.security.x509.AVAKeyword: the keywords Java uses in RFC 2253 output; others print as OIDs.
_RFC2253_KEYWORDS = {
    "2.5.4.3": "CN", "2.5.4.6": "C", "2.5.4.7": "L", "2.5.4.8": "ST", "2.5.4.10": "O", "2.5.4.11": "OU",
    "2.5.4.9": "STREET", "0.9.2342.19200300.100.1.25": "DC", "0.9.2342.19200300.100.1.1": "UID",
}
# AVA.isDerString(value, false): PrintableString, T61String, IA5String, GeneralString, BMPString, UTF8String
_STRING_TAGS = {0x13, 0x14, 0x16, 0x1B, 0x1E, 0x0C}
_ESCAPEES = ',=+<>#;"\\'


def _ava_rfc2253(oid: str, tag: int, raw: bytes, data: bytes) -> str:
    """AVA.toRFC2253String (Java 17): keyword or OID, then the value, escaped as Java does."""
    key = _RFC2253_KEYWORDS.get(oid, oid)
    if key[0].isdigit() or tag not in _STRING_TAGS:
        return f"{key}=#{raw.hex()}"
    text = data.decode("utf-8", "replace")  # Java decodes every string type's bytes as UTF-8 here
    out = []
    for c in text:
        if c in _ESCAPEES:
            out.append("\\" + c)
        elif c == "\0":
            out.append("\\00")
        else:
            out.append(c)
    chars = list("".join(out))
    lead = 0
    while lead < len(chars) and chars[lead] in " \r":
        lead += 1
    trail = len(chars) - 1
    while trail >= 0 and chars[trail] in " \r":
        trail -= 1
    value = "".join(("\\" + c) if (i < lead or i > trail) else c for i, c in enumerate(chars))
    return f"{key}={value}"


def name_rfc2253(buf: bytes, start: int, end: int) -> str:
    """An X.500 Name (DER, ``buf[start:end]`` is the SEQUENCE's content) as Java prints it."""
    rdns = []
    for _tag, s, e, _h in _children(buf, start, end):  # RelativeDistinguishedName: SET OF
        avas = []
        for _t2, s2, e2, _h2 in _children(buf, s, e):  # AttributeTypeAndValue: SEQUENCE
            (_ot, os_, oe, _oh), (vt, vs, ve, vh) = _children(buf, s2, e2)[:2]
            avas.append(_ava_rfc2253(_oid(buf[os_:oe]), vt, buf[vh:ve], buf[vs:ve]))
        rdns.append("+".join(avas))
    return ",".join(reversed(rdns))


def subject_rfc2253(cert_der: bytes) -> str:
    """The subject DN of a DER certificate (X509Certificate.getSubjectX500Principal().getName())."""
    _t, s, _e, _h = _der(cert_der, 0)  # Certificate
    _t, ts, te, _h = _der(cert_der, s)  # TBSCertificate
    fields = _children(cert_der, ts, te)
    if fields and fields[0][0] == 0xA0:  # [0] version
        fields = fields[1:]
    _tag, ns, ne, _h = fields[4]  # serialNumber, signature, issuer, validity, subject
    return name_rfc2253(cert_der, ns, ne)


# ---- ssl.principal.mapping.rules (Kafka's SslPrincipalMapper) ---------------------------------

_RULE_PATTERN = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_RULE_SPLITTER = re.compile(r"\s*(" + _RULE_PATTERN + r")\s*(,\s*|$)")
_RULE_PARSER = re.compile(_RULE_PATTERN)


class NoMatchingRule(Exception):
    pass


def _java_replacement(replacement: str, groups: int) -> str:
    """A Java replacement string (``$1``, ``\\$``) as a Python one, keeping Kafka's rule that a
    reference to a group that does not exist is literal text."""
    out = []
    i = 0
    while i < len(replacement):
        c = replacement[i]
        if c == "\\" and i + 1 < len(replacement):
            out.append(replacement[i + 1].replace("\\", "\\\\"))
            i += 2
            continue
        if c == "$":
            m = re.match(r"\d+", replacement[i + 1:])
            if m:
                digits = m.group(0)
                n = len(digits)
                while n > 1 and int(digits[:n]) > groups:
                    n -= 1
                ref = int(digits[:n])
                if ref <= groups:
                    out.append(f"\\g<{ref}>")
                    i += 1 + n
                    continue
                out.append("$")
                i += 1
                continue
        out.append(c.replace("\\", "\\\\"))
        i += 1
    return "".join(out)


class PrincipalMapper:
    """``ssl.principal.mapping.rules``: ``DEFAULT`` and ``RULE:pattern/replacement/[LU]``, in order."""

    def __init__(self, rules: str | None) -> None:
        text = (rules or "DEFAULT").strip()
        self.rules: list[tuple[re.Pattern[str], str, str] | None] = []  # None = DEFAULT
        for m in _RULE_SPLITTER.finditer(text):
            rule = m.group(1)
            p = _RULE_PARSER.match(rule)
            if p is None or p.end() != len(rule):
                raise ConfigError(f"Invalid value {rules} for configuration ssl.principal.mapping.rules: Invalid rule: {rule}")
            if p.group(1) is not None:
                self.rules.append(None)
            elif p.group(2) is not None:
                try:
                    pattern = re.compile(p.group(2))
                except re.error as e:
                    raise ConfigError(f"Invalid value {rules} for configuration ssl.principal.mapping.rules: {e}") from None
                self.rules.append((pattern, _java_replacement(p.group(4), pattern.groups), p.group(6)))
            if m.end() >= len(text):
                break

    def name(self, dn: str) -> str:
        for rule in self.rules:
            if rule is None:
                return dn
            pattern, replacement, case = rule
            if pattern.fullmatch(dn):
                result = pattern.sub(replacement, dn)
                return result.lower() if case == "L" else result.upper() if case == "U" else result
        raise NoMatchingRule(f"No rules apply to {dn}")


def ssl_principal(ssl_object: ssl.SSLObject | None, mapper: PrincipalMapper) -> str:
    """Kafka's DefaultKafkaPrincipalBuilder for SSL: the mapped subject DN, else ANONYMOUS."""
    if ssl_object is None:
        return ANONYMOUS
    der = ssl_object.getpeercert(binary_form=True)
    if not der:
        return ANONYMOUS
    return "User:" + mapper.name(subject_rfc2253(der))


SslPrincipal = Callable[[ssl.SSLObject | None], str]


def build_client_context(s: SslSettings, where: str, check_hostname: bool = True) -> ssl.SSLContext:
    """A client SSLContext from Kafka client ssl.* settings (a tool's --command-config): the trust
    store (else the system's CAs), a client certificate when a key store is set, and host name
    verification unless ``ssl.endpoint.identification.algorithm`` is empty."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if not _load_truststore(ctx, s, where):
        ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
    if s.keystore_location is not None or s.keystore_key is not None:
        _load_keystore(ctx, s, where)
    ctx.check_hostname = check_hostname
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx
