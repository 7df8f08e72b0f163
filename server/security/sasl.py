"""SASL on SASL_PLAINTEXT / SASL_SSL listeners: mechanisms and the per-connection state machine.

Kafka's SaslServerAuthenticator, without I/O (server/connection.py feeds it frames, the
SaslHandshake/SaslAuthenticate handlers in server/apis/sasl.py drive it):

- before authentication completes a client may send ApiVersions (once, before the handshake),
  then SaslHandshake, then SaslAuthenticate until the mechanism is done; anything else closes
  the connection (``AuthenticationClose``), as Kafka does;
- a handshake for a mechanism not enabled answers UNSUPPORTED_SASL_MECHANISM (33) with the
  enabled list, a failed SaslAuthenticate answers SASL_AUTHENTICATION_FAILED (58) with Kafka's
  message; both then close the connection (after ``connection.failed.authentication.delay.ms``);
- SaslHandshake v0 (the legacy flow): the tokens that follow are raw, size-prefixed, not Kafka
  requests (``Gate.RAW_TOKEN``);
- KIP-368 re-authentication: with ``connections.max.reauth.ms`` > 0 the session has a lifetime;
  a SaslHandshake on an authenticated connection starts a re-authentication (at most one a
  second), which must keep the mechanism and the principal; any other request after the
  session expired closes the connection.

Mechanisms: PLAIN (RFC 4616, users from the JAAS config) and SCRAM-SHA-256/512 (RFC 5802/7677,
credentials from the store, or from a ScramLoginModule's ``user_`` options).
"""

from __future__ import annotations

import base64
import enum
import hashlib
import hmac
import logging
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from .credentials import SCRAM_MECHANISMS, SCRAM_MIN_ITERATIONS, ScramCredential, hash_name

log = logging.getLogger(__name__)

PLAIN = "PLAIN"
SUPPORTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
# BrokerSecurityConfigs.DEFAULT_SASL_SERVER_MAX_RECEIVE_SIZE: frames before authentication.
DEFAULT_MAX_RECEIVE_SIZE = 524288
MIN_REAUTH_INTERVAL_S = 1.0  # KafkaChannel.MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS


class SaslFailure(Exception):
    """A failed exchange. ``client_message`` is what the client is told (Kafka's text);
    ``reason`` goes to the log only (it may say more, e.g. that a user does not exist)."""

    def __init__(self, client_message: str, reason: str | None = None) -> None:
        super().__init__(client_message)
        self.client_message = client_message
        self.reason = reason or client_message


class AuthenticationClose(Exception):
    """Close the connection without an answer (Kafka's IllegalSaslStateException path)."""


# ---- mechanisms -----------------------------------------------------------------------------


class PlainServer:
    """Kafka's PlainSaslServer: one message ``[authzid] NUL authcid NUL passwd``."""

    def __init__(self, users: dict[str, str]) -> None:
        self.users = users
        self.complete = False
        self.user: str | None = None

    def evaluate(self, token: bytes) -> bytes:
        text = token.decode("utf-8", "replace")
        parts = text.split("\0", 3)
        if len(parts) != 3:
            raise SaslFailure(f"Invalid SASL/PLAIN response: expected 3 tokens, got {min(len(parts), 4)}")
        authzid, username, password = parts
        self.user = username or None
        if not username:
            raise SaslFailure("Authentication failed: username not specified")
        if not password:
            raise SaslFailure("Authentication failed: password not specified")
        expected = self.users.get(username)
        if expected is None or not hmac.compare_digest(password.encode(), expected.encode()):
            raise SaslFailure("Authentication failed: Invalid username or password",
                              "unknown user" if expected is None else "wrong password")
        if authzid and authzid != username:
            raise SaslFailure("Authentication failed: Client requested an authorization id that is different from username")
        self.complete = True
        return b""


# ScramMessages' grammar (Java's [\x01-\x7F&&[^=,]] classes written out).
_VALUE_SAFE = r"[\x01-\x2b\x2d-\x3c\x3e-\x7f]"
_VALUE = r"[\x01-\x2b\x2d-\x7f]+"
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"
_SASLNAME = rf"(?:{_VALUE_SAFE}|=2C|=3D)+"
_B64C = r"[a-zA-Z0-9/+]"
_BASE64 = rf"(?:{_B64C}{{4}})*(?:{_B64C}{{3}}=|{_B64C}{{2}}==)?"
_EXTENSIONS = rf"(?:,[A-Za-z]+={_VALUE})*"
_CLIENT_FIRST = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,(?:m={_VALUE},)?(?P<bare>n=(?P<saslname>{_SASLNAME}),r=(?P<nonce>{_PRINTABLE})(?P<ext>{_EXTENSIONS}))"
)
_CLIENT_FINAL = re.compile(
    rf"(?P<without_proof>c=(?P<channel>{_BASE64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS}),p=(?P<proof>{_BASE64})"
)


def _generic_scram_failure(mechanism: str, reauth: bool) -> str:
    """SaslServerAuthenticator's answer to a SaslException: says nothing about the cause."""
    what = "re-authentication" if reauth else "authentication"
    return f"Authentication failed during {what} due to invalid credentials with SASL mechanism {mechanism}"


class ScramServer:
    """Kafka's ScramSaslServer: client-first -> server-first -> client-final -> server-final."""

    def __init__(self, mechanism: str, lookup: Callable[[str], ScramCredential | None], reauth: bool = False) -> None:
        self.mechanism = mechanism
        self.lookup = lookup
        self.hash = hash_name(mechanism)
        self.generic = _generic_scram_failure(mechanism, reauth)
        self.complete = False
        self.user: str | None = None
        self._state = "first"
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self._credential: ScramCredential | None = None

    def evaluate(self, token: bytes) -> bytes:
        text = token.decode("utf-8", "replace")
        if self._state == "first":
            return self._first(text)
        if self._state == "final":
            return self._final(text)
        raise SaslFailure(self.generic, f"unexpected SCRAM message in state {self._state}")

    def _fail(self, reason: str) -> SaslFailure:
        self._state = "failed"
        self._credential = None
        return SaslFailure(self.generic, reason)

    def _first(self, text: str) -> bytes:
        m = _CLIENT_FIRST.fullmatch(text)
        if m is None:
            raise self._fail("Invalid SCRAM client first message format")
        username = m.group("saslname").replace("=2C", ",").replace("=3D", "=")
        self.user = username
        cred = self.lookup(username)
        if cred is None:
            raise self._fail("Invalid user credentials (no such user)")
        authzid = m.group("authzid") or ""
        if authzid and authzid != username:
            self._state = "failed"
            raise SaslFailure("Authentication failed: Client requested an authorization id that is different from username")
        if cred.iterations < SCRAM_MIN_ITERATIONS:
            raise self._fail(f"Iterations {cred.iterations} is less than the minimum {SCRAM_MIN_ITERATIONS} for {self.mechanism}")
        self._credential = cred
        self._nonce = m.group("nonce") + _server_nonce()
        self._client_first_bare = m.group("bare")
        self._server_first = f"r={self._nonce},s={base64.b64encode(cred.salt).decode()},i={cred.iterations}"
        self._state = "final"
        return self._server_first.encode()

    def _final(self, text: str) -> bytes:
        m = _CLIENT_FINAL.fullmatch(text)
        if m is None:
            raise self._fail("Invalid SCRAM client final message format")
        if not m.group("nonce").endswith(self._nonce):  # Kafka's check
            raise self._fail("Invalid client nonce in the final client message.")
        cred = self._credential
        assert cred is not None
        auth_message = f"{self._client_first_bare},{self._server_first},{m.group('without_proof')}".encode()
        client_signature = hmac.new(cred.stored_key, auth_message, self.hash).digest()
        proof = base64.b64decode(m.group("proof"))
        if len(proof) != len(client_signature):
            raise self._fail("Invalid client credentials (proof length)")
        client_key = bytes(a ^ b for a, b in zip(client_signature, proof, strict=True))
        if not hmac.compare_digest(hashlib.new(self.hash, client_key).digest(), cred.stored_key):
            raise self._fail("Invalid client credentials (wrong password)")
        server_signature = hmac.new(cred.server_key, auth_message, self.hash).digest()
        self._credential = None
        self._state = "complete"
        self.complete = True
        return b"v=" + base64.b64encode(server_signature)


_SERVER_NONCE_LEN = 26


def _server_nonce() -> str:
    """Like ScramFormatter.secureRandomString: 130 random bits in base 36 (no ',' possible)."""
    n = secrets.randbits(130)
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = []
    for _ in range(_SERVER_NONCE_LEN):
        n, r = divmod(n, 36)
        out.append(digits[r])
    return "".join(out)


# ---- per listener --------------------------------------------------------------------------


@dataclass
class SaslSettings:
    """What one SASL listener accepts (built at start-up from the config, server/security/listener.py)."""

    listener: str
    mechanisms: list[str]  # enabled and served, in the configured order
    plain_users: dict[str, str] = field(default_factory=dict)
    # SCRAM credentials from a ScramLoginModule's user_ options (ours, not Kafka's), per mechanism
    jaas_scram: dict[str, dict[str, ScramCredential]] = field(default_factory=dict)
    reauth_ms: dict[str, int] = field(default_factory=dict)  # connections.max.reauth.ms per mechanism
    max_receive_size: int = DEFAULT_MAX_RECEIVE_SIZE
    failed_delay_ms: int = 100  # connection.failed.authentication.delay.ms
    # The broker's SCRAM credential store lookup: (user, mechanism) -> credential
    scram_lookup: Callable[[str, str], ScramCredential | None] | None = None

    def scram_credential(self, user: str, mechanism: str) -> ScramCredential | None:
        """The store first (what AlterUserScramCredentials manages), then the JAAS users."""
        if self.scram_lookup is not None:
            cred = self.scram_lookup(user, mechanism)
            if cred is not None:
                return cred
        return self.jaas_scram.get(mechanism, {}).get(user)

    def new_mechanism(self, mechanism: str, reauth: bool) -> PlainServer | ScramServer:
        if mechanism == PLAIN:
            return PlainServer(self.plain_users)
        if mechanism in SCRAM_MECHANISMS:
            return ScramServer(mechanism, lambda user: self.scram_credential(user, mechanism), reauth)
        raise ValueError(f"mechanism {mechanism} is not served")


class State(enum.Enum):
    HANDSHAKE_OR_VERSIONS = "handshake or versions"
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    COMPLETE = "complete"
    FAILED = "failed"
    REAUTH_HANDSHAKE = "re-authentication handshake"
    REAUTH_BAD_MECHANISM = "re-authentication with another mechanism"


class Gate(enum.Enum):
    DISPATCH = "dispatch"  # a Kafka request: dispatch it
    RAW_TOKEN = "raw token"  # SaslHandshake v0 flow: a bare SASL token


@dataclass
class Outcome:
    """What SaslAuthenticate answers."""

    error_code: int
    error_message: str | None
    auth_bytes: bytes
    session_lifetime_ms: int


class SaslServerAuthenticator:
    """One connection's authentication state (Kafka's SaslServerAuthenticator + ReauthInfo)."""

    def __init__(self, settings: SaslSettings, peer: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.settings = settings
        self.peer = peer
        self.clock = clock
        self.state = State.HANDSHAKE_OR_VERSIONS
        self.kafka_headers = False  # SaslHandshake v1+: tokens come as SaslAuthenticate requests
        self.mechanism: str | None = None
        self.server: PlainServer | ScramServer | None = None
        self.principal: str | None = None
        self.session_expiry: float | None = None  # monotonic seconds
        self.client_supports_reauth = False
        self.close_after_response = False  # a failure was answered: close once it is sent
        self._reauth_started: float | None = None
        self._previous: tuple[str, str] | None = None  # (mechanism, principal) being re-authenticated
        self._bad_mechanism_message = ""

    # -- gate ------------------------------------------------------------------------------

    @property
    def authenticated(self) -> bool:
        return self.state is State.COMPLETE

    @property
    def receive_limit(self) -> int | None:
        """Largest frame accepted now (sasl.server.max.receive.size until authenticated)."""
        return None if self.authenticated else self.settings.max_receive_size

    @property
    def reauthenticating(self) -> bool:
        return self._previous is not None

    def gate(self, frame: bytes, api_key: int | None, api_version_ok: bool = True) -> Gate:
        """Decide what to do with a frame; AuthenticationClose to close the connection.

        ``api_key`` is the frame's API key (None if it is too short to have one);
        ``api_version_ok``: an ApiVersions version we support (an unsupported one is answered
        and the client may retry, as Kafka allows).
        """
        state = self.state
        if state is State.COMPLETE:
            now = self.clock()
            if api_key == SASL_HANDSHAKE and self.session_expiry is not None and (
                    self._reauth_started is None or now - self._reauth_started >= MIN_REAUTH_INTERVAL_S):
                assert self.mechanism is not None and self.principal is not None
                self._reauth_started = now
                self._previous = (self.mechanism, self.principal)
                self.state = State.REAUTH_HANDSHAKE
                self.server = None
                log.debug("connection from %s: beginning re-authentication", self.peer)
                return Gate.DISPATCH
            if self.session_expiry is not None and now > self.session_expiry:
                raise AuthenticationClose("session expired (connections.max.reauth.ms) and the client did not re-authenticate")
            return Gate.DISPATCH
        if state is State.AUTHENTICATE and not self.kafka_headers:
            return Gate.RAW_TOKEN
        if state is State.HANDSHAKE_OR_VERSIONS:
            if api_key == API_VERSIONS:
                if api_version_ok:
                    self.state = State.HANDSHAKE
                return Gate.DISPATCH
            if api_key == SASL_HANDSHAKE:
                return Gate.DISPATCH
        elif state in (State.HANDSHAKE, State.REAUTH_HANDSHAKE):
            if api_key == SASL_HANDSHAKE:
                return Gate.DISPATCH
        elif state is State.AUTHENTICATE:
            if api_key == SASL_AUTHENTICATE:
                return Gate.DISPATCH
        elif state is State.REAUTH_BAD_MECHANISM:
            self._failed(self._bad_mechanism_message, self._bad_mechanism_message)
            raise AuthenticationClose(self._bad_mechanism_message)
        what = "re-authentication" if self.reauthenticating else "SASL authentication"
        if api_key is None:
            raise AuthenticationClose(f"a frame too short to be a request during {what} ({self.state.value})")
        name = _API_NAMES.get(api_key, f"API key {api_key}")
        raise AuthenticationClose(f"unexpected {name} request during {what} ({self.state.value})")

    # -- SaslHandshake -----------------------------------------------------------------------

    def handshake(self, version: int, mechanism: str) -> tuple[int, list[str]]:
        """(error code, enabled mechanisms) for a SaslHandshake that passed the gate."""
        enabled = list(self.settings.mechanisms)
        if self.state is State.COMPLETE or self.state is State.FAILED:
            return 34, []  # ILLEGAL_SASL_STATE, as KafkaApis answers on an authenticated connection
        if version >= 1:
            self.kafka_headers = True
        if mechanism not in enabled:
            log.warning("failed authentication from %s (listener %s): SASL mechanism %r is not enabled (enabled: %s)",
                        self.peer, self.settings.listener, mechanism, ", ".join(enabled))
            self.state = State.FAILED
            self.close_after_response = True
            return 33, enabled  # UNSUPPORTED_SASL_MECHANISM
        if self._previous is not None and mechanism != self._previous[0]:
            self._bad_mechanism_message = (f"SASL mechanism '{mechanism}' requested by client is not supported for "
                                           f"re-authentication of mechanism '{self._previous[0]}'")
            self.state = State.REAUTH_BAD_MECHANISM
            return 0, enabled
        self.mechanism = mechanism
        self.server = self.settings.new_mechanism(mechanism, self.reauthenticating)
        self.state = State.AUTHENTICATE
        return 0, enabled

    # -- SaslAuthenticate (and the v0 flow's raw tokens) ---------------------------------------

    def authenticate(self, version: int, token: bytes) -> Outcome:
        """Evaluate one token sent in a SaslAuthenticate request that passed the gate."""
        if self.state is not State.AUTHENTICATE:
            # KafkaApis on an authenticated connection (or a non-SASL listener).
            return Outcome(34, "SaslAuthenticate request received after successful authentication", b"", 0)
        if version > 0:
            self.client_supports_reauth = True
        try:
            response = self._evaluate(token)
        except SaslFailure as e:
            self._failed(e.client_message, e.reason)
            return Outcome(58, e.client_message, b"", 0)  # SASL_AUTHENTICATION_FAILED
        lifetime = self._complete_if_done()
        if lifetime is None:  # a changed principal
            return Outcome(58, self._principal_change_message, b"", 0)
        return Outcome(0, None, response, lifetime)

    def evaluate_raw(self, token: bytes) -> bytes | None:
        """SaslHandshake v0: a bare token; returns the bare answer, SaslFailure closes (no answer)."""
        try:
            response = self._evaluate(token)
        except SaslFailure as e:
            self._failed(e.client_message, e.reason)
            raise AuthenticationClose(f"authentication failed: {e.reason}") from None
        if self._complete_if_done() is None:
            raise AuthenticationClose(self._principal_change_message)
        return response

    def _evaluate(self, token: bytes) -> bytes:
        assert self.server is not None
        return self.server.evaluate(token)

    def _complete_if_done(self) -> int | None:
        """Session lifetime (ms) to answer; None if a re-authentication changed the principal."""
        server = self.server
        assert server is not None and self.mechanism is not None
        if not server.complete:
            return 0
        principal = f"User:{server.user}"
        if self._previous is not None and principal != self._previous[1]:
            old, new = self._previous[1].split(":", 1), principal.split(":", 1)
            self._principal_change_message = (f"Cannot change principals during re-authentication from "
                                              f"{old[0]}.{old[1]}: {new[0]}.{new[1]}")
            self._failed(self._principal_change_message, self._principal_change_message)
            return None
        lifetime = max(0, self.settings.reauth_ms.get(self.mechanism, 0))
        self.session_expiry = self.clock() + lifetime / 1000 if lifetime > 0 else None
        if self._previous is not None:
            log.debug("connection from %s re-authenticated as %s", self.peer, principal)
        else:
            log.debug("connection from %s authenticated as %s with %s", self.peer, principal, self.mechanism)
        self.principal = principal
        self._previous = None
        self.state = State.COMPLETE
        self.server = None
        return lifetime

    _principal_change_message = ""

    def _failed(self, client_message: str, reason: str) -> None:
        self.state = State.FAILED
        self.close_after_response = True
        user = getattr(self.server, "user", None)
        what = "re-authentication" if self.reauthenticating else "authentication"
        log.warning("failed %s from %s (listener %s, mechanism %s, user %s): %s",
                    what, self.peer, self.settings.listener, self.mechanism or "-",
                    repr(user) if user is not None else "-", reason)


_API_NAMES = {
    0: "Produce", 1: "Fetch", 2: "ListOffsets", 3: "Metadata", 8: "OffsetCommit", 9: "OffsetFetch",
    10: "FindCoordinator", 11: "JoinGroup", 12: "Heartbeat", 13: "LeaveGroup", 14: "SyncGroup",
    17: "SaslHandshake", 18: "ApiVersions", 19: "CreateTopics", 20: "DeleteTopics", 22: "InitProducerId",
    32: "DescribeConfigs", 36: "SaslAuthenticate", 50: "DescribeUserScramCredentials",
    51: "AlterUserScramCredentials", 60: "DescribeCluster",
}
