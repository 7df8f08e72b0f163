"""One client connection: read frames, answer them in order, send records with sendfile.

Like Kafka, a connection handles one request at a time (so pipelined requests are
answered in order). A malformed frame, an unknown API key or an undecodable
request closes this connection only, with one log line saying why.

The checks on frames (sizes, the SASL gate, one request outstanding at a time) are made by
``KafkaChannel`` (protocol/connection.py), a state machine without I/O; ``Connection`` is its
driver: it reads what the channel asks for, acts on its events and writes the answers.

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
- ``max.connections``: connections beyond it are closed at once (``admit``); the per-IP
  limits and connection creation rates are server/quotas/connections.py's.

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
import contextvars
import logging
import re
import socket
import ssl
import struct
import time
from collections.abc import Callable, Coroutine, Generator
from typing import TYPE_CHECKING, Any

from kafka_sidecar.protocol.connection import (
    Admission,
    GateRejection,
    KafkaChannel,
    NeedData,
    ProtocolError,
    RawSaslTokenReceived,
    RequestReceived,
    RequestRejected,
)
from kafka_sidecar.protocol.framing import API_VERSIONS_KEY, FrameError
from kafka_sidecar.storage.log_segment import FileSlice

from .direct_send import has_slice, send_parts
from .dispatch import SUPPORTED_APIS, ProtocolViolation, handle_request
from .request_context import ClientInfo
from .security.sasl import AuthenticationClose, Gate, SaslServerAuthenticator
from .security.tls import NoMatchingRule, ssl_principal

if TYPE_CHECKING:
    from .broker import Broker
    from .security.listener import ListenerSecurity

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
# The transport's write buffer high-water mark: above it ``drain`` waits, and no further
# request is read from that connection until the client has read enough of its answers.
WRITE_BUFFER_HIGH = 1 << 20
# What a connection buffers beyond the frame it needs before reading from it pauses (as the
# stream reader's 2 x 1 MiB limit did): a client that sends without reading answers stops being
# read and TCP pushes back.
READ_BUFFER_HIGH = 2 << 20


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


class SaslGate:
    """The SASL authenticator as the channel's pre-authentication gate (protocol/connection.py).

    The SASL state machine stays in server/security/sasl.py; this says which ApiVersions
    versions we answer (an unsupported one is answered and the client may retry) and turns
    its AuthenticationClose into the channel's GateRejection.
    """

    def __init__(self, sasl: SaslServerAuthenticator) -> None:
        self.sasl = sasl

    @property
    def receive_limit(self) -> int | None:
        return self.sasl.receive_limit

    def admit(self, frame: bytes, api_key: int | None, api_version: int | None) -> Admission:
        spec = SUPPORTED_APIS.get(API_VERSIONS_KEY)
        version_ok = api_key != API_VERSIONS_KEY or (
            spec is not None and spec.min_version <= (api_version or 0) <= spec.max_version)
        try:
            gate = self.sasl.gate(frame, api_key, version_ok)
        except AuthenticationClose as e:
            raise GateRejection(str(e)) from None
        return Admission.RAW_TOKEN if gate is Gate.RAW_TOKEN else Admission.REQUEST


class ChannelReader(asyncio.Protocol):
    """The transport's protocol once a connection is served: it feeds the channel directly.

    The stream reader cost two awaits, a buffer copy and its own wake-ups per request; here
    received bytes go straight to ``KafkaChannel.receive_data`` and ``Connection.serve`` waits
    only when the channel needs more. Write flow control and the end of the connection are
    passed on to the StreamReaderProtocol it replaces, so ``StreamWriter.write``/``drain``/
    ``close`` work as before. Not used on TLS listeners (start_tls keeps the streams).
    """

    def __init__(self, channel: KafkaChannel, streams: asyncio.BaseProtocol, transport: asyncio.Transport) -> None:
        self.channel = channel
        self.streams = streams
        self.transport = transport
        self.waiter: asyncio.Future[None] | None = None
        # Connection._answer_inline on PLAINTEXT listeners: answers what arrived while serve()
        # waits, without waking its task; False when serve() must take over.
        self.inline: Callable[[], bool] | None = None
        self.paused = False
        self.ended = False
        self.error: Exception | None = None  # the connection broke: raised to serve(), as readexactly did

    def data_received(self, data: bytes) -> None:
        channel = self.channel
        channel.receive_data(data)
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            inline = self.inline
            if inline is not None and inline():
                return  # all answered here; serve() still waits
            waiter.set_result(None)
        if channel.buffered >= READ_BUFFER_HIGH and not self.paused:
            self.paused = True
            self.transport.pause_reading()

    def eof_received(self) -> bool:
        self._end()
        return True  # as StreamReaderProtocol: half-closed by the client, answers can still go out

    def connection_lost(self, exc: Exception | None) -> None:
        if exc is None:
            self._end()
        else:
            self.error = exc
            waiter = self.waiter
            if waiter is not None and not waiter.done():
                waiter.set_result(None)
        self.streams.connection_lost(exc)

    def pause_writing(self) -> None:
        self.streams.pause_writing()

    def resume_writing(self) -> None:
        self.streams.resume_writing()

    def _end(self) -> None:
        if not self.ended:
            self.ended = True
            self.channel.receive_data(b"")
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def wait(self) -> None:
        """Until more bytes (or the end of the stream) reach the channel."""
        if self.error is not None:
            raise self.error
        if self.ended:
            return
        if self.paused:
            self.paused = False
            self.transport.resume_reading()
        self.waiter = asyncio.get_running_loop().create_future()
        try:
            await self.waiter
        finally:
            self.waiter = None
        if self.error is not None:
            raise self.error

    @classmethod
    def install(cls, channel: KafkaChannel, reader: asyncio.StreamReader, transport: asyncio.Transport) -> ChannelReader:
        """Take the transport over from the stream reader, with whatever it had already read."""
        streams = transport.get_protocol()
        protocol = cls(channel, streams, transport)
        buffer = getattr(reader, "_buffer", None)  # read before serve() started: usually nothing
        if buffer:
            channel.receive_data(bytes(buffer))
            buffer.clear()
        transport.set_protocol(protocol)
        if reader.exception() is not None:
            protocol.error = reader.exception()
        elif getattr(reader, "_eof", False) or transport.is_closing():
            protocol._end()
        elif not transport.is_reading():  # the stream reader had paused it at its limit
            transport.resume_reading()
        return protocol


class _Resume:
    """The rest of a request's coroutine that started in ``data_received`` and suspended (it
    awaits a flush, a long poll, a full write buffer...): awaited by serve()'s task, every step
    in the connection's own context, where it began (a context variable set before the
    suspension is reset after it). Python 3.12's eager tasks do the same for a whole task."""

    __slots__ = ("context", "coro", "yielded")

    def __init__(self, context: contextvars.Context, coro: Coroutine[Any, Any, bool], yielded: Any) -> None:
        self.context = context
        self.coro = coro
        self.yielded = yielded

    def __await__(self) -> Generator[Any, Any, bool]:
        context, coro, value = self.context, self.coro, self.yielded
        while True:
            try:
                sent = yield value  # what the coroutine awaits, handed to the task as it is
            except BaseException as e:  # noqa: BLE001 - thrown into the task (cancellation): passed on
                try:
                    value = context.run(coro.throw, e)
                except StopIteration as done:
                    return done.value
            else:
                try:
                    value = context.run(coro.send, sent)
                except StopIteration as done:
                    return done.value


# The APIs answered inline: the data path only. Anything else (group, transaction, share and
# admin requests) is handed to serve()'s task, so it runs after the callbacks earlier requests
# queued (delayed joins, rebalance steps): the group coordinator relies on that order (answered
# inline, the mixed classic/consumer group of the conformance suite did not stabilise).
_INLINE_APIS = frozenset({0, 1})  # Produce, Fetch

_STOP = object()  # held for serve(): a request answered inline ended the connection
_RESUMED = object()  # _take_over: a request answered inline suspended, serve() awaits the rest


def admit(broker: Broker, writer: asyncio.StreamWriter) -> bool:
    """Whether a new connection may be served (``max.connections``); if not it is closed at once."""
    value = broker.connection_setting("max.connections")  # dynamically reconfigurable, as in Kafka
    limit = None if value is None else int(value)
    if limit is None or len(broker.connections) < limit:
        return True
    _refusals.refused(_peer(writer), limit)
    writer.transport.abort()
    return False


class Connection:
    def __init__(self, broker: Broker, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 security: ListenerSecurity | None = None, listener: str = "PLAINTEXT") -> None:
        self.broker = broker
        self.reader = reader
        self.writer = writer
        # The listener's TLS/SASL settings (server/security/listener.py); None on PLAINTEXT.
        self.security = security
        # Framing, limits, the SASL gate and request/response order, without I/O.
        self.channel = KafkaChannel(broker.max_request_size)
        self.peer = _peer(writer)
        peer = writer.get_extra_info("peername")
        # What the API handlers see of this connection (server/request_context.py): its address,
        # listener, principal (Kafka's KafkaPrincipal as "User:<name>": ANONYMOUS until a
        # listener's authentication, server/security, says otherwise) and SASL exchange.
        self.client = ClientInfo(self.peer, peer[0] if peer else "", listener, is_closing=writer.is_closing)
        # A plain socket transport (not TLS): record slices are sent by server/direct_send.py.
        self._sendfile_ok = writer.get_extra_info("socket") is not None
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
        # Requests answered inside data_received (PLAINTEXT): what serve() must take over.
        self._context = contextvars.copy_context()
        self._held: object | None = None  # an event (or _STOP) next_event gave that serve() handles
        self._held_error: Exception | None = None
        self._resume: _Resume | None = None
        self._frame = b""  # the last request's frame (see _request)
        if self._idle_s is not None:
            self._idle_timer = asyncio.get_running_loop().call_later(self._idle_s, self._check_idle)

    @property
    def principal(self) -> str:
        return self.client.principal

    @principal.setter
    def principal(self, principal: str) -> None:
        self.client.principal = principal

    @property
    def listener(self) -> str:
        return self.client.listener

    @property
    def client_host(self) -> str:
        return self.client.client_host

    @property
    def sasl(self) -> SaslServerAuthenticator | None:
        return self.client.sasl

    @property
    def close_callbacks(self) -> dict[str, Callable[[], None]]:
        """Run once when the connection ends, by name (server/share: the share sessions it owns)."""
        return self.client.close_callbacks

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
            sasl = self.client.sasl = SaslServerAuthenticator(sec.sasl, self.peer)
            self.channel.gate = SaslGate(sasl)
        return True

    async def _authentication_failed(self, response: list[Any] | None) -> None:
        """Kafka delays a failed authentication's answer and the close (brute force gets slow)."""
        assert self.sasl is not None
        self.broker.metrics.authentications_failed[self.listener] += 1
        delay = self.sasl.settings.failed_delay_ms
        if delay > 0:
            await asyncio.sleep(delay / 1000)
        if response:
            await self.send(self.channel.send_response(response))

    async def serve(self) -> None:
        """Read what the channel asks for, act on its events, write the answers (in order).

        On a PLAINTEXT listener a Produce or Fetch that arrives while this waits is answered
        right in ``data_received`` (``_answer_inline``), without waking this task: the wake-up (a
        future, a loop turn, a task step) cost as much as a tenth of a small Produce. What cannot finish
        there (a long poll, a full write buffer, a throttle, an error) is handed back to this
        loop, which goes on from where it stopped."""
        channel = self.channel
        try:
            if self.security is not None and not await self._secure():
                return
            fast: ChannelReader | None = None
            if self.security is None or self.security.ssl_context is None:
                fast = ChannelReader.install(channel, self.reader, self.writer.transport)  # type: ignore[arg-type]
                if self.security is None:
                    fast.inline = self._answer_inline
            while True:
                if self._resume is not None or self._held_error is not None or self._held is not None:
                    if (event := self._take_over()) is None:
                        return
                    if event is _RESUMED:
                        resume, self._resume = self._resume, None
                        assert resume is not None
                        if not await resume:
                            return
                        continue
                else:
                    event = channel.next_event()
                if fast is not None and event.__class__ is NeedData:
                    await fast.wait()
                    continue
                if isinstance(event, NeedData):
                    # Exactly what the channel needs, never past the current frame: the next
                    # request is not read before this one is answered (the stream reader's
                    # buffer is what TCP pushes back on). One read per size prefix and per
                    # body, so the channel hands the body out without another copy.
                    try:
                        data = await self.reader.readexactly(event.bytes_needed)
                    except asyncio.IncompleteReadError as e:
                        channel.receive_data(e.partial)
                        data = b""  # the end of the stream
                    channel.receive_data(data)
                    continue
                if isinstance(event, ProtocolError):
                    log.warning("closing connection from %s: %s", self.peer, event.reason)
                    if isinstance(event, RequestRejected) and self.sasl is not None and self.sasl.close_after_response:
                        await self._authentication_failed(None)
                    return
                if isinstance(event, RawSaslTokenReceived):
                    self._last_active = time.monotonic()
                    if not await self._raw_sasl_token(event.token):
                        return
                    continue
                if not isinstance(event, RequestReceived):  # ConnectionClosed, _STOP (Paused cannot happen here)
                    return
                if not await self._request(event):
                    return
        except (ConnectionError, OSError) as e:
            log.debug("connection from %s ended: %s", self.peer, e)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("closing connection from %s after an internal error", self.peer)
        finally:
            channel.close()
            self.close()
            callbacks, self.client.close_callbacks = self.client.close_callbacks, {}
            for name, callback in callbacks.items():
                try:
                    callback()
                except Exception:
                    log.exception("connection from %s: close callback %s failed", self.peer, name)

    def _take_over(self) -> object | None:
        """What ``_answer_inline`` left for serve(): an error (raised here), a suspended request
        (``_RESUMED``), or the event it did not handle (None for _STOP: the connection ends)."""
        if self._held_error is not None:
            error, self._held_error = self._held_error, None
            raise error
        if self._resume is not None:
            return _RESUMED
        event, self._held = self._held, None
        return None if event is _STOP else event

    def _answer_inline(self) -> bool:
        """Answer, inside ``data_received``, the requests the channel holds while serve() waits.

        True: everything received is answered and serve() may go on waiting. False: serve()
        must take over (``_take_over``): a request suspended (its rest is ``_resume``), an event
        other than a request arrived (``_held``), or the connection is to end or failed."""
        if self._resume is not None or self._held is not None or self._held_error is not None:
            return False
        channel, context = self.channel, self._context
        while True:
            event = channel.next_event()
            if event.__class__ is NeedData:
                return True
            if event.__class__ is not RequestReceived or event.api_key not in _INLINE_APIS:  # type: ignore[attr-defined]
                self._held = event
                return False
            coro = self._request(event)  # type: ignore[arg-type]
            try:
                yielded = context.run(coro.send, None)
            except StopIteration as done:
                if done.value:
                    continue
                self._held = _STOP
                return False
            except Exception as e:  # raised in serve(), which logs it and closes, as if its own
                self._held_error = e
                return False
            self._resume = _Resume(context, coro, yielded)
            return False

    async def _request(self, event: RequestReceived) -> bool:
        """Handle one request and write its answer; False when the connection is to close."""
        channel = self.channel
        self._last_active = time.monotonic()
        sasl = self.sasl
        self._busy = True
        try:
            # The frame lives until the next request's frame replaces it (``_frame``): freed
            # before the next large read, a request's buffer at the top of the heap is trimmed
            # and the next one faults its pages back in (glibc; measured: ~240,000 minor
            # faults and +50% CPU per 300 MB produced).
            frame = self._frame = event.frame
            response, throttle_ms = await handle_request(self.broker.services, self.client, frame)
            # KIP-219: muted until this long after the answer was made (Kafka's ThrottledChannel).
            throttle_until = time.monotonic() + throttle_ms / 1000 if throttle_ms else 0.0
        except (FrameError, ProtocolViolation) as e:
            log.warning("closing connection from %s: %s", self.peer, e)
            return False
        finally:
            self._busy = False
            self._last_active = time.monotonic()
        if sasl is not None:
            if sasl.close_after_response:
                await self._authentication_failed(response)
                return False
            if sasl.authenticated and sasl.principal is not None:  # SaslAuthenticate succeeded
                self.principal = sasl.principal
        if response is None:
            channel.no_response()
        else:
            await self.send(channel.send_response(response))
        if throttle_until:
            await self._throttled(throttle_until)
        self._last_active = time.monotonic()
        return True

    async def _throttled(self, until: float) -> None:
        """KIP-219: after a throttled answer is sent the channel is muted until the throttle
        ends (Kafka's ThrottledChannel): nothing more is read from this client meanwhile."""
        wait = until - time.monotonic()
        if wait > 0:
            self._busy = True  # a muted connection is not idle
            try:
                await asyncio.sleep(wait)
            finally:
                self._busy = False

    async def _raw_sasl_token(self, token: bytes) -> bool:
        """SaslHandshake v0: a bare token gets a bare answer; False if the connection must close."""
        sasl = self.sasl
        assert sasl is not None
        try:
            answer = sasl.evaluate_raw(token)
        except AuthenticationClose as e:
            log.warning("closing connection from %s: %s", self.peer, e)
            if sasl.close_after_response:
                await self._authentication_failed(None)
            return False
        if sasl.authenticated:
            self.principal = sasl.principal or self.principal
        if answer is None:
            self.channel.no_response()
        else:
            await self.send(self.channel.send_response([_SIZE.pack(len(answer)) + answer]))
        return True

    async def send(self, parts: list[Any]) -> None:
        """Write a response made of bytes and file slices (size prefix already included).

        On a plain socket an answer with record slices is sent with direct non-blocking
        sendfile calls (server/direct_send.py), cheaper than asyncio's loop.sendfile."""
        writer = self.writer
        if len(parts) == 1 and parts[0].__class__ is bytes:
            # Most answers: one bytes object. Written, and drained only when the socket did not
            # take it all (StreamWriter.drain waits only then) or the connection is going: the
            # drain's coroutines were ~1% of a small Produce.
            transport = writer.transport
            transport.write(parts[0])
            if transport.get_write_buffer_size() or transport.is_closing():
                await writer.drain()
            return
        if self._sendfile_ok and has_slice(parts):
            await send_parts(writer.transport, writer.drain, parts)  # type: ignore[arg-type]
            return
        for part in parts:  # TLS: a record slice is read and written (the bytes must be encrypted)
            writer.write(part.read() if isinstance(part, FileSlice) else part)
        await writer.drain()
