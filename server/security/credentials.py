"""Credentials, Kafka's way: JAAS config parsing, SCRAM credentials and their store.

- ``parse_jaas``: Kafka's ``sasl.jaas.config`` syntax (``JaasConfig``, built on Java's
  ``StreamTokenizer``): ``<LoginModule> <flag> (key=value)* ;`` repeated, values quoted
  (``"..."`` or ``'...'`` with Java escapes) or bare words, ``//`` and ``/* */`` comments.
  PLAIN users are the ``user_<name>="<password>"`` options of a ``PlainLoginModule`` entry.
- ``ScramCredential`` / ``scram_credential``: RFC 5802's salted form (salt, iterations,
  StoredKey, ServerKey) as Kafka's ScramFormatter computes it; the password is never kept.
- ``ScramCredentialStore``: what AlterUserScramCredentials manages, one JSON file in the data
  dir written tmp + fsync + rename (Kafka keeps these in its metadata log; a sidecar has none).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
JAAS_USER_PREFIX = "user_"

# Kafka's ScramMechanism: name -> (type id on the wire, hashlib name, min and max iterations).
SCRAM_MECHANISMS: dict[str, tuple[int, str]] = {"SCRAM-SHA-256": (1, "sha256"), "SCRAM-SHA-512": (2, "sha512")}
SCRAM_BY_TYPE: dict[int, str] = {t: name for name, (t, _h) in SCRAM_MECHANISMS.items()}
SCRAM_MIN_ITERATIONS = 4096
SCRAM_MAX_ITERATIONS = 16384  # ScramControlManager.MAX_ITERATIONS
CREDENTIALS_FILE = "sidecar-scram-credentials.json"


class JaasError(ValueError):
    """A JAAS config Kafka would refuse; the message is Kafka's (never the config's text)."""


# ---- JAAS -----------------------------------------------------------------------------------

_EOF = object()
_WORD = "word"
_QUOTED = "quoted"
_NUMBER = "number"
_CHAR = "char"


def _is_word_start(c: str) -> bool:
    # StreamTokenizer defaults (a-z, A-Z, 160-255, everything >= 256) plus JaasConfig's - _ $
    # ('-' is also numeric: a word never starts with it, see _tokens).
    return c.isascii() and c.isalpha() or c in "_$" or ord(c) >= 160


def _is_word_part(c: str) -> bool:
    return _is_word_start(c) or c.isdigit() and c.isascii() or c in ".-"


_ESCAPES = {"a": "\x07", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\x0b"}


def _tokens(text: str):
    """Java's StreamTokenizer as JaasConfig sets it up: yields (kind, value)."""
    i, n = 0, len(text)
    while True:
        while i < n and ord(text[i]) <= 32:
            i += 1
        if i >= n:
            yield _EOF, None
            return
        c = text[i]
        if c == "/":  # '/' is a comment character; '//' and '/*' comments are on
            if text.startswith("/*", i):
                end = text.find("*/", i + 2)
                if end < 0:
                    yield _EOF, None
                    return
                i = end + 2
            else:
                while i < n and text[i] not in "\r\n":
                    i += 1
            continue
        if c.isdigit() and c.isascii() or c == "." or c == "-":
            # parseNumbers(): a number (no string value); a lone '-' is an ordinary character
            j = i + 1
            if c == "-" and not (j < n and (text[j] == "." or text[j].isdigit() and text[j].isascii())):
                yield _CHAR, "-"
                i = j
                continue
            while j < n and (text[j].isdigit() and text[j].isascii() or text[j] == "."):
                j += 1
            yield _NUMBER, text[i:j]
            i = j
            continue
        if _is_word_start(c):
            j = i + 1
            while j < n and _is_word_part(text[j]):
                j += 1
            yield _WORD, text[i:j]
            i = j
            continue
        if c in "\"'":
            quote, j, out = c, i + 1, []
            while j < n and text[j] != quote and text[j] not in "\r\n":
                ch = text[j]
                if ch == "\\" and j + 1 < n:
                    j += 1
                    ch = text[j]
                    if "0" <= ch <= "7":
                        digits = ch
                        limit = 3 if ch <= "3" else 2
                        while len(digits) < limit and j + 1 < n and "0" <= text[j + 1] <= "7":
                            j += 1
                            digits += text[j]
                        ch = chr(int(digits, 8))
                    else:
                        ch = _ESCAPES.get(ch, ch)
                out.append(ch)
                j += 1
            yield _QUOTED, "".join(out)
            i = j + 1 if j < n and text[j] == quote else j
            continue
        yield _CHAR, c
        i += 1


_FLAGS = {"REQUIRED", "REQUISITE", "SUFFICIENT", "OPTIONAL"}


@dataclass(frozen=True)
class JaasEntry:
    login_module: str
    control_flag: str
    options: dict[str, str] = field(default_factory=dict)


def parse_jaas(text: str) -> list[JaasEntry]:
    """Kafka's JaasConfig: every entry of a ``sasl.jaas.config`` value; JaasError if Kafka would refuse it."""
    toks = _tokens(text)
    entries: list[JaasEntry] = []

    def sval(tok: tuple[Any, Any]) -> str | None:
        return tok[1] if tok[0] in (_WORD, _QUOTED) else None

    tok = next(toks)
    while tok[0] is not _EOF:
        module = sval(tok)
        tok = next(toks)
        if tok[0] is _EOF:
            raise JaasError("Login module control flag not specified in JAAS config")
        flag = sval(tok)
        if flag is None:
            raise JaasError("Login module control flag is not available in the JAAS config")
        if flag.upper() not in _FLAGS:
            raise JaasError(f"Invalid login module control flag '{flag}' in JAAS config")
        options: dict[str, str] = {}
        tok = next(toks)
        while tok[0] is not _EOF and tok != (_CHAR, ";"):
            key = sval(tok)
            eq = next(toks)
            value = next(toks) if eq == (_CHAR, "=") else (_EOF, None)
            if eq != (_CHAR, "=") or value[0] is _EOF or sval(value) is None:
                raise JaasError(f"Value not specified for key '{key}' in JAAS config")
            options[str(key)] = str(sval(value))
            tok = next(toks)
        if tok != (_CHAR, ";"):
            raise JaasError("JAAS config entry not terminated by semi-colon")
        entries.append(JaasEntry(str(module), flag.upper(), options))
        tok = next(toks)
    if not entries:
        raise JaasError("Login module not specified in JAAS config")
    return entries


def jaas_users(entries: list[JaasEntry], login_module: str) -> dict[str, str]:
    """``user_<name>`` options of the entries for ``login_module`` (Kafka's PlainServerCallbackHandler)."""
    users: dict[str, str] = {}
    for e in entries:
        if e.login_module == login_module:
            for k, v in e.options.items():
                if k.startswith(JAAS_USER_PREFIX) and len(k) > len(JAAS_USER_PREFIX):
                    users.setdefault(k[len(JAAS_USER_PREFIX):], v)
    return users


# ---- SCRAM credentials --------------------------------------------------------------------


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_json(self) -> dict[str, Any]:
        b64 = base64.b64encode
        return {"salt": b64(self.salt).decode(), "stored_key": b64(self.stored_key).decode(),
                "server_key": b64(self.server_key).decode(), "iterations": self.iterations}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ScramCredential:
        b = base64.b64decode
        return cls(b(d["salt"]), b(d["stored_key"]), b(d["server_key"]), int(d["iterations"]))


def hash_name(mechanism: str) -> str:
    return SCRAM_MECHANISMS[mechanism][1]


def salted_password(mechanism: str, password: bytes, salt: bytes, iterations: int) -> bytes:
    """RFC 5802 Hi(): PBKDF2 with the mechanism's HMAC (Kafka uses the password's UTF-8 bytes, no SASLprep)."""
    return hashlib.pbkdf2_hmac(hash_name(mechanism), password, salt, iterations)


def credential_from_salted(mechanism: str, salted: bytes, salt: bytes, iterations: int) -> ScramCredential:
    """StoredKey = H(HMAC(salted, "Client Key")), ServerKey = HMAC(salted, "Server Key")."""
    h = hash_name(mechanism)
    client_key = hmac.new(salted, b"Client Key", h).digest()
    server_key = hmac.new(salted, b"Server Key", h).digest()
    return ScramCredential(salt, hashlib.new(h, client_key).digest(), server_key, iterations)


def scram_credential(mechanism: str, password: str, iterations: int = SCRAM_MIN_ITERATIONS, salt: bytes | None = None) -> ScramCredential:
    """A new credential for ``password`` (Kafka's ScramFormatter.generateCredential)."""
    salt = salt if salt is not None else secrets.token_bytes(32)
    return credential_from_salted(mechanism, salted_password(mechanism, password.encode(), salt, iterations), salt, iterations)


class ScramCredentialStore:
    """SCRAM credentials by user and mechanism, kept in ``<data dir>/sidecar-scram-credentials.json``."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.credentials: dict[str, dict[str, ScramCredential]] = {}

    @classmethod
    def empty(cls, data_dir: Path) -> ScramCredentialStore:
        return cls(Path(data_dir) / CREDENTIALS_FILE)

    @classmethod
    def load(cls, data_dir: Path) -> ScramCredentialStore:
        """The stored credentials; OSError naming the file if it cannot be read."""
        store = cls.empty(data_dir)
        try:
            raw = json.loads(store.path.read_text())
        except (FileNotFoundError, NotADirectoryError):  # a data dir that is unusable is LogManager's to report
            return store
        except (OSError, ValueError) as e:
            raise OSError(f"cannot read SCRAM credentials {store.path}: {e}") from None
        try:
            for user, mechs in raw.get("credentials", {}).items():
                for mech, cred in mechs.items():
                    if mech in SCRAM_MECHANISMS:
                        store.credentials.setdefault(user, {})[mech] = ScramCredential.from_json(cred)
        except (AttributeError, KeyError, TypeError, ValueError) as e:
            raise OSError(f"cannot read SCRAM credentials {store.path}: malformed entry ({e})") from None
        return store

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        return self.credentials.get(user, {}).get(mechanism)

    def upsert(self, user: str, mechanism: str, credential: ScramCredential) -> None:
        self.credentials.setdefault(user, {})[mechanism] = credential

    def delete(self, user: str, mechanism: str) -> bool:
        mechs = self.credentials.get(user)
        if not mechs or mechanism not in mechs:
            return False
        del mechs[mechanism]
        if not mechs:
            del self.credentials[user]
        return True

    def snapshot(self) -> bytes:
        """The file's content now (taken on the loop, written in the storage thread)."""
        doc = {"version": 1, "credentials": {
            user: {mech: cred.to_json() for mech, cred in sorted(mechs.items())}
            for user, mechs in sorted(self.credentials.items())
        }}
        return (json.dumps(doc, indent=1) + "\n").encode()

    def write(self, content: bytes) -> None:
        """tmp + fsync + rename + fsync of the directory, owner-only permissions (keys are secrets)."""
        tmp = self.path.with_name(self.path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, content)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        dfd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
