"""One client connection: read frames, answer them in order, send records with sendfile.

Like Kafka, a connection handles one request at a time (so pipelined requests are
answered in order). A malformed frame, an unknown API key or an undecodable
request closes this connection only, with one log line saying why.

Limits (each bounds what one client can make the server hold):
- a frame is at most ``socket.request.max.bytes``, checked before it is read;
- the next request is read only once the previous answer is handed to the
  transport and its write buffer is below the high-water mark (``drain``), so a
  client that sends without reading answers stops being read: the server keeps
  at most one answer and the stream reader's buffer (2 x its 1 MiB limit, then
  the transport stops reading and TCP pushes back);
- ``connections.max.idle.ms``: a connection with no request and no answer
  completed for that long is closed (also one stuck mid-frame, or whose
  client stopped reading answers); a request being handled (a Fetch long-poll,
  a JoinGroup) does not count as idle;
- ``max.connections``: connections beyond it are closed at once (``admit``).

Security (server/security): on an SSL or SASL_SSL listener the TLS handshake comes first
(one log line if it fails); on a SASL listener the SASL authenticator gates every frame until
authentication completes (frames up to ``sasl.server.max.receive.size``; anything but
ApiVersions/SaslHandshake/SaslAuthenticate closes the connection), answers a failure after
``connection.failed.authentication.delay.ms`` and then closes, and closes a connection whose
session expired (``connections.max.reauth.ms``) unless it re-authenticates. TLS transports
cannot ``sendfile``: Fetch falls back to writes there.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import socket
import ssl
import struct
import time
from typing import TYPE_CHECKING, Any

from kafka_sidecar.protocol.framing import API_VERSIONS_KEY, FrameError
from kafka_sidecar.storage.log_segment import FileSlice

from .dispatch import SUPPORTED_APIS, ProtocolViolation, handle_request
from .security.sasl import AuthenticationClose, Gate, SaslServerAuthenticator
from .security.tls import NoMatchingRule, ssl_principal

if TYPE_CHECKING:
    from .broker import Broker
    from .security.listener import ListenerSecurity

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
_API_PEEK = struct.Struct(">hh")
# The transport's write buffer high-water mark: above it ``drain`` waits, and no further
# request is read from that connection until the client has read enough of its answers.
WRITE_BUFFER_HIGH = 1 << 20


def _peer(writer: asyncio.StreamWriter) -> str:
    peer = writer.get_extra_info("peername")
    return f"{peer[0]}:{peer[1]}" if peer else "?"


class _RefusalLog:
    """One log line per refused connection, at most one a second (the rest are counted)."""

    def __init__(self) -> None:
        self.last = 0.0
        self.suppressed = 0

    def refused(self, peer: str, limit: int) -> None:
        now = time.monotonic()
        if now - self.last < 1.0:
            self.suppressed += 1
            return
        more = f" ({self.suppressed} more refused since the last report)" if self.suppressed else ""
        log.warning("refusing connection from %s: %d connections open (max.connections)%s", peer, limit, more)
        self.last, self.suppressed = now, 0


_refusals = _RefusalLog()


def admit(broker: Broker, writer: asyncio.StreamWriter) -> bool:
    """Whether a new connection may be served (``max.connections``); if not it is closed at once."""
    limit = broker.config.get("max.connections")
    if limit is None or len(broker.connections) < limit:
        return True
    _refusals.refused(_peer(writer), limit)
    writer.transport.abort()
    return False


class Connection:
    def __init__(self, broker: Broker, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 security: ListenerSecurity | None = None) -> None:
        self.broker = broker
        self.reader = reader
        self.writer = writer
        # The listener's TLS/SASL settings (server/security/listener.py); None on PLAINTEXT.
        self.security = security
        self.sasl: SaslServerAuthenticator | None = None
        self.peer = _peer(writer)
        peer = writer.get_extra_info("peername")
        self.client_host: str = peer[0] if peer else ""
        # Who the authorizer sees (Kafka's KafkaPrincipal as "User:<name>"): ANONYMOUS until a
        # listener's authentication (server/security) says otherwise.
        self.principal: str = "User:ANONYMOUS"
        self._sendfile_ok = True
        writer.transport.set_write_buffer_limits(high=WRITE_BUFFER_HIGH)
        sock = writer.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            # asyncio only sets TCP_NODELAY when the listening socket was made with proto=IPPROTO_TCP;
            # without it a response written in parts (Fetch) waits for the client's delayed ACK (~40 ms).
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        # Idle tracking (connections.max.idle.ms): one timer per idle period, re-armed lazily.
        idle_ms = broker.config.get("connections.max.idle.ms")
        self._idle_s = idle_ms / 1000 if idle_ms is not None and idle_ms >= 0 else None
        self._last_active = time.monotonic()
        self._busy = False  # a request is being handled
        self._idle_timer: asyncio.TimerHandle | None = None
        if self._idle_s is not None:
            self._idle_timer = asyncio.get_running_loop().call_later(self._idle_s, self._check_idle)

    def _check_idle(self) -> None:
        self._idle_timer = None
        if self.writer.is_closing():
            return
        idle_for = time.monotonic() - self._last_active
        assert self._idle_s is not None
        if self._busy or idle_for < self._idle_s:
            wait = self._idle_s if self._busy else self._idle_s - idle_for
            self._idle_timer = asyncio.get_running_loop().call_later(max(wait, 0.001), self._check_idle)
            return
        log.info("closing connection from %s: idle for %.0f ms (connections.max.idle.ms)", self.peer, idle_for * 1000)
        # abort, not close: a client that stopped reading would keep a closing transport open.
        self.writer.transport.abort()

    def close(self) -> None:
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None
        if not self.writer.is_closing():
            self.writer.close()

    async def _secure(self) -> bool:
        """The listener's TLS handshake and SASL set-up; False if the connection was closed.

        Called first thing in ``serve``: nothing awaited before ``start_tls`` pauses reading, so
        no byte of the client's handshake can land in the plain stream reader.
        """
        sec = self.security
        assert sec is not None
        if sec.ssl_context is not None:
            try:
                await self.writer.start_tls(sec.ssl_context, ssl_handshake_timeout=sec.handshake_timeout)
            except (OSError, EOFError, TimeoutError) as e:
                reason = re.sub(r" \(_ssl\.c:\d+\)$", "", str(e)) or type(e).__name__
                if isinstance(e, ssl.SSLCertVerificationError) and e.verify_message:
                    reason = f"certificate verify failed: {e.verify_message}"
                log.warning("failed authentication from %s (listener %s): SSL handshake failed: %s",
                            self.peer, sec.endpoint.name, reason)
                self.broker.metrics.authentications_failed[sec.endpoint.name] += 1
                self.writer.transport.abort()
                return False
            self.writer.transport.set_write_buffer_limits(high=WRITE_BUFFER_HIGH)
            self._sendfile_ok = False  # TLS transports cannot sendfile (the bytes must be encrypted)
            if sec.sasl is None:
                assert sec.principal_mapper is not None
                try:
                    self.principal = ssl_principal(self.writer.get_extra_info("ssl_object"), sec.principal_mapper)
                except (NoMatchingRule, ValueError) as e:
                    log.warning("failed authentication from %s (listener %s): cannot map the client certificate "
                                "to a principal: %s", self.peer, sec.endpoint.name, e)
                    self.broker.metrics.authentications_failed[sec.endpoint.name] += 1
                    self.writer.transport.abort()
                    return False
                log.debug("connection from %s: TLS as %s", self.peer, self.principal)
                if self.principal != "User:ANONYMOUS":
                    self.broker.metrics.authentications_succeeded[sec.endpoint.name] += 1
        if sec.sasl is not None:
            self.sasl = SaslServerAuthenticator(sec.sasl, self.peer)
        return True

    async def _authentication_failed(self, response: list[Any] | None) -> None:
        """Kafka delays a failed authentication's answer and the close (brute force gets slow)."""
        assert self.sasl is not None
        self.broker.metrics.authentications_failed[getattr(self, "listener", "PLAINTEXT")] += 1
        delay = self.sasl.settings.failed_delay_ms
        if delay > 0:
            await asyncio.sleep(delay / 1000)
        if response:
            await self.send(response)

    def _gate(self, frame: bytes) -> Gate:
        """The SASL authenticator's verdict on a frame (AuthenticationClose closes)."""
        assert self.sasl is not None
        api_key = version = None
        if len(frame) >= 4:
            api_key, version = _API_PEEK.unpack_from(frame, 0)
        spec = SUPPORTED_APIS.get(API_VERSIONS_KEY)
        version_ok = api_key != API_VERSIONS_KEY or (spec is not None and spec.min_version <= (version or 0) <= spec.max_version)
        return self.sasl.gate(frame, api_key, version_ok)

    async def serve(self) -> None:
        try:
            if self.security is not None and not await self._secure():
                return
            while True:
                try:
                    head = await self.reader.readexactly(4)
                except asyncio.IncompleteReadError:
                    return
                (size,) = _SIZE.unpack(head)
                sasl_limit = self.sasl.receive_limit if self.sasl is not None else None
                if sasl_limit is not None and not 0 <= size <= sasl_limit:
                    log.warning("closing connection from %s: frame size %d during SASL authentication is outside "
                                "0..%d (sasl.server.max.receive.size)", self.peer, size, sasl_limit)
                    return
                if size < 0 or size > self.broker.max_request_size:
                    log.warning(
                        "closing connection from %s: frame size %d is outside 0..%d (socket.request.max.bytes)",
                        self.peer, size, self.broker.max_request_size,
                    )
                    return
                try:
                    frame = await self.reader.readexactly(size)
                except asyncio.IncompleteReadError as e:
                    log.warning("closing connection from %s: truncated frame (%d of %d bytes)", self.peer, len(e.partial), size)
                    return
                self._last_active = time.monotonic()
                sasl = self.sasl
                if sasl is not None:
                    try:
                        gate = self._gate(frame)
                        if gate is Gate.RAW_TOKEN:  # SaslHandshake v0: a bare token, a bare answer
                            token = sasl.evaluate_raw(frame)
                            if sasl.authenticated:
                                self.principal = sasl.principal or self.principal
                            if token is not None:
                                await self.send([_SIZE.pack(len(token)) + token])
                            continue
                    except AuthenticationClose as e:
                        log.warning("closing connection from %s: %s", self.peer, e)
                        if sasl.close_after_response:
                            await self._authentication_failed(None)
                        return
                self._busy = True
                try:
                    response = await handle_request(self.broker, self, frame)
                except (FrameError, ProtocolViolation) as e:
                    log.warning("closing connection from %s: %s", self.peer, e)
                    return
                finally:
                    self._busy = False
                    self._last_active = time.monotonic()
                if sasl is not None and sasl.close_after_response:
                    await self._authentication_failed(response)
                    return
                if response is not None:
                    await self.send(response)
                    self._last_active = time.monotonic()
        except (ConnectionError, OSError) as e:
            log.debug("connection from %s ended: %s", self.peer, e)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("closing connection from %s after an internal error", self.peer)
        finally:
            self.close()

    async def send(self, parts: list[Any]) -> None:
        """Write a response made of bytes and file slices (size prefix already included)."""
        writer = self.writer
        for part in parts:
            if isinstance(part, FileSlice):
                await self._send_slice(part)
            else:
                writer.write(part)
        await writer.drain()

    async def _send_slice(self, part: FileSlice) -> None:
        if self._sendfile_ok:
            await self.writer.drain()
            loop = asyncio.get_running_loop()
            with os.fdopen(os.dup(part.fd), "rb") as f:
                try:
                    sent = await loop.sendfile(self.writer.transport, f, part.position, part.size, fallback=False)
                except (asyncio.SendfileNotAvailableError, NotImplementedError):
                    self._sendfile_ok = False
                    sent = None
            if sent is not None:
                if sent != part.size:
                    raise ConnectionError(f"sendfile sent {sent} of {part.size} bytes")
                return
        self.writer.write(part.read())
