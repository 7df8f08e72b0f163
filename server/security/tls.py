"""TLS for SSL and SASL_SSL listeners: Kafka's ssl.* settings, server context, client principal.

Key material (key store, trust store: DefaultSslEngineFactory's rules and messages) is read by
``kafka_sidecar.client.tls``, which the clients share; here the trust store verifies client
certificates (without one, the system's CAs do), and ``ssl.client.auth``
none/requested/required, ``ssl.enabled.protocols`` apply.

The principal of an SSL connection is ``User:`` + the client certificate's subject DN as
Java's ``X500Principal.getName()`` prints it (RFC 2253, with Java's keywords and escapes),
mapped by ``ssl.principal.mapping.rules`` (Kafka's SslPrincipalMapper); ``User:ANONYMOUS``
without a client certificate.
"""

from __future__ import annotations

import logging
import re
import ssl

from kafka_sidecar.client.tls import SslSettings, load_keystore, load_truststore
from kafka_sidecar.storage.log_config import ConfigError

log = logging.getLogger(__name__)

ANONYMOUS = "User:ANONYMOUS"
_PROTOCOLS = {
    "TLSv1": ssl.TLSVersion.TLSv1, "TLSv1.1": ssl.TLSVersion.TLSv1_1,
    "TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


# ---- server context ---------------------------------------------------------------------------


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
    load_keystore(ctx, s, where)
    ctx.verify_mode = _CLIENT_AUTH[s.client_auth]
    if not load_truststore(ctx, s, where) and s.client_auth != "none":
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
