"""Who is looking: HTTP basic login over the broker's own SASL users.

On a broker with a SASL listener the console asks for a login (``401`` with
``WWW-Authenticate: Basic``) and checks the user and password as SASL would: PLAIN users of the
listeners' JAAS configs, SCRAM credentials of the credential store (AlterUserScramCredentials)
or of a ScramLoginModule. The principal is then ``User:<name>``, exactly what a Kafka client
logging in with that user gets, and every page asks the authorizer as it.

Without SASL listeners there is nobody to log in: the console acts as ``User:ANONYMOUS``, what a
client on the broker's PLAINTEXT listener is. A broker whose listeners all authenticate clients
by other means (TLS client certificates only) has no PLAINTEXT door and no passwords to check,
so the console refuses to start there (``access_error``) rather than open a door the Kafka
listeners do not have.

A SCRAM check costs a PBKDF2 (thousands of HMACs): it runs off the loop, and a good check is
remembered (user, mechanism, the credential's StoredKey and a keyed hash of the password) so a
page view costs a dict look-up. A failed login waits ``connection.failed.authentication.delay.ms``
before its 401, as a failed SASL authentication does.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import secrets
from typing import TYPE_CHECKING

from ..security.credentials import SCRAM_MECHANISMS, credential_from_salted, salted_password
from ..security.sasl import PLAIN, SaslSettings

if TYPE_CHECKING:
    from ..broker import Broker

ANONYMOUS = "User:ANONYMOUS"
_CACHE_MAX = 1024


def access_error(broker: Broker) -> str | None:
    """Why the console cannot serve this broker safely, or None."""
    protocols = {ep.security_protocol for ep in broker.listeners}
    if "PLAINTEXT" in protocols or any(sec.sasl is not None for sec in broker.listener_security.values()):
        return None
    return ("the console logs users in with the broker's SASL users (PLAIN or SCRAM), and no listener has SASL "
            "(they authenticate clients by TLS certificate): add a SASL_SSL or SASL_PLAINTEXT listener for the console's users")


class ConsoleAuth:
    """Checks ``Authorization: Basic`` headers against the SASL listeners' users."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.settings: list[SaslSettings] = [sec.sasl for sec in broker.listener_security.values() if sec.sasl is not None]
        self.required = bool(self.settings)
        self.failed_delay_s = max((s.failed_delay_ms for s in self.settings), default=0) / 1000
        self._secret = secrets.token_bytes(32)
        self._good: dict[tuple[str, str, bytes], bytes] = {}

    async def principal(self, authorization: str | None) -> str | None:
        """The principal of a request (None: not logged in, answer 401)."""
        if not self.required:
            return ANONYMOUS
        creds = _basic(authorization)
        if creds is not None:
            user, password = creds
            if user and password and await self._check(user, password):
                return f"User:{user}"
        if self.failed_delay_s and authorization:
            await asyncio.sleep(self.failed_delay_s)
        return None

    async def _check(self, user: str, password: str) -> bool:
        pw = password.encode()
        for s in self.settings:
            if PLAIN in s.mechanisms:
                expected = s.plain_users.get(user)
                if expected is not None and hmac.compare_digest(pw, expected.encode()):
                    return True
        tag = hmac.new(self._secret, pw, "sha256").digest()
        for s in self.settings:
            for mech in s.mechanisms:
                if mech not in SCRAM_MECHANISMS:
                    continue
                cred = s.scram_credential(user, mech)
                if cred is None:
                    continue
                key = (user, mech, cred.stored_key)
                if self._good.get(key) == tag:
                    return True
                salted = await asyncio.get_running_loop().run_in_executor(
                    None, salted_password, mech, pw, cred.salt, cred.iterations)
                if hmac.compare_digest(credential_from_salted(mech, salted, cred.salt, cred.iterations).stored_key, cred.stored_key):
                    if len(self._good) >= _CACHE_MAX:
                        self._good.clear()
                    self._good[key] = tag
                    return True
        return False


def _basic(authorization: str | None) -> tuple[str, str] | None:
    """(user, password) of an ``Authorization: Basic`` value (UTF-8, RFC 7617), or None."""
    if not authorization:
        return None
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        text = base64.b64decode(token.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    user, sep, password = text.partition(":")
    return (user, password) if sep else None


def form_token(secret: bytes, principal: str) -> str:
    """The hidden field every write form carries (a keyed hash of the principal): a page of
    another site cannot post a form the browser would send with the saved basic login."""
    return hmac.new(secret, principal.encode(), hashlib.sha256).hexdigest()[:32]
