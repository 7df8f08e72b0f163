"""Credentials, Kafka's way: PLAIN users from a JAAS config, SCRAM credentials and their store.

- ``jaas_users``: PLAIN users, the ``user_<name>="<password>"`` options of a ``PlainLoginModule``
  entry of a ``sasl.jaas.config`` (parsed by ``kafka_sidecar.client.jaas``, Kafka's JaasConfig).
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafka_sidecar.client.jaas import JaasEntry

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


# ---- JAAS -----------------------------------------------------------------------------------


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
