"""One client connection's protocol state, sans I/O: bytes in, events out (as h11 / hyper-h2).

The caller does all I/O: it feeds what it read with ``receive_data`` (``b""`` at end of stream),
acts on what ``next_event`` returns, and hands each answer to ``send_response`` (or calls
``no_response``) before asking for the next event. What is here is what Kafka splits between
NetworkReceive (the int32 size, checked against ``socket.request.max.bytes`` before the body is
read), KafkaChannel (until authentication completes the authenticator limits frames to
``sasl.server.max.receive.size`` and decides which requests may pass) and SocketServer's
Processor (a channel is muted from a completed receive until its response is sent, or until a
NoOpResponse says there is none, as for an acks=0 Produce: answers go out in request order).

Every reason to close is an event carrying the text the server logs after
"closing connection from <peer>: ", so the driver's log lines do not depend on where the
check lives.
"""

from __future__ import annotations

import enum
import struct
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from .framing import FrameError, peek_api

_SIZE = struct.Struct(">i")
_API_PEEK = struct.Struct(">hh")  # api_key, api_version: what the gate sees of a frame
_CORRELATION = struct.Struct(">i")

_Part = TypeVar("_Part")


# ---- events ---------------------------------------------------------------------------------


class Event:
    """What ``KafkaChannel.next_event`` returns."""


@dataclass(frozen=True, slots=True)
class RequestReceived(Event):
    """A complete request frame (without its size prefix) that passed the checks."""

    api_key: int
    api_version: int
    correlation_id: int
    frame: bytes


@dataclass(frozen=True, slots=True)
class RawSaslTokenReceived(Event):
    """A bare SASL token (the SaslHandshake v0 flow): answered by a bare, size-prefixed token."""

    token: bytes


@dataclass(frozen=True, slots=True)
class NeedData(Event):
    """Nothing complete yet: read at most ``bytes_needed`` more (never past the current frame)."""

    bytes_needed: int


@dataclass(frozen=True, slots=True)
class Paused(Event):
    """A request is outstanding: nothing more until it is answered (or has no answer)."""


@dataclass(frozen=True, slots=True)
class ConnectionClosed(Event):
    """The stream ended between frames (or inside a size prefix), or the channel was closed."""


@dataclass(frozen=True, slots=True)
class ProtocolError(Event):
    """The byte stream cannot go on: close the connection, logging ``reason``."""

    reason: str


@dataclass(frozen=True, slots=True)
class RequestRejected(ProtocolError):
    """The pre-authentication gate refused a frame (Kafka's IllegalSaslStateException path)."""


class LocalProtocolError(Exception):
    """The caller broke the contract (an answer with no request outstanding, or out of order)."""


# Events without a payload, and the size prefix's NeedData: made once (they are frozen, so a shared
# instance is indistinguishable from a new one), not once or twice per request.
_PAUSED = Paused()
_CLOSED = ConnectionClosed()
_NEED_PREFIX = (None, NeedData(1), NeedData(2), NeedData(3), NeedData(4))


# ---- the pre-authentication gate ------------------------------------------------------------


class Admission(enum.Enum):
    REQUEST = "request"  # a Kafka request
    RAW_TOKEN = "raw token"  # a bare SASL token (SaslHandshake v0)


class GateRejection(Exception):
    """Raised by a gate to close the connection; the message is the reason logged."""


class PreAuthenticationGate(Protocol):
    """What the server's authenticator (server/security/sasl.py) decides about frames.

    ``receive_limit``: the largest frame accepted now (None once authenticated: then only
    ``socket.request.max.bytes`` applies). ``admit``: whether a complete frame is a request
    to dispatch or a raw token; raises GateRejection to close. ``api_key``/``api_version`` are
    None for a frame shorter than 4 bytes.
    """

    @property
    def receive_limit(self) -> int | None: ...

    def admit(self, frame: bytes, api_key: int | None, api_version: int | None) -> Admission: ...


# ---- the state machine ----------------------------------------------------------------------


class _State(enum.Enum):
    RECEIVING = "receiving"  # Kafka's NOT_MUTED
    MUTED = "muted"  # a request was handed out and is not answered yet
    CLOSED = "closed"


class KafkaChannel:
    """One connection's framing, limits, gate and request/response ordering; no I/O."""

    def __init__(self, max_request_size: int, gate: PreAuthenticationGate | None = None) -> None:
        self.max_request_size = max_request_size  # socket.request.max.bytes
        # Set by the server once the listener's authentication is known (None: no SASL).
        self.gate = gate
        # Received bytes not yet handed out, as the chunks they came in: a frame read in one
        # chunk (what the driver does: it reads at most what ``NeedData`` asks) is handed out
        # as that same bytes object, without a copy.
        self._chunks: deque[bytes] = deque()
        self._buffered = 0
        self._size: int | None = None  # the current frame's size, once its prefix is read
        self._eof = False
        self._state = _State.RECEIVING
        self._outstanding: int | None = None  # the correlation id owed an answer (None: a raw token)

    @property
    def muted(self) -> bool:
        """A request is outstanding (the next one is held until it is answered)."""
        return self._state is _State.MUTED

    @property
    def closed(self) -> bool:
        return self._state is _State.CLOSED

    @property
    def buffered(self) -> int:
        """Bytes received and not handed out yet (what a driver bounds by pausing its reads)."""
        return self._buffered

    def receive_data(self, data: bytes) -> None:
        """Buffer bytes read from the connection; ``b""`` means the stream ended."""
        if not data:
            self._eof = True
            return
        if self._eof:
            raise LocalProtocolError("data received after the end of the stream")
        self._chunks.append(bytes(data))
        self._buffered += len(data)

    def _take(self, n: int) -> bytes:
        """The next ``n`` buffered bytes (``n`` <= what is buffered)."""
        chunks = self._chunks
        self._buffered -= n
        first = chunks[0]
        if len(first) == n:
            return chunks.popleft()
        if len(first) > n:
            chunks[0] = first[n:]
            return first[:n]
        parts, need = [], n
        while need:
            chunk = chunks.popleft()
            if len(chunk) > need:
                chunks.appendleft(chunk[need:])
                chunk = chunk[:need]
            parts.append(chunk)
            need -= len(chunk)
        return b"".join(parts)

    def next_event(self) -> Event:
        """The next thing that happened on the connection (checks are made here, in order)."""
        state = self._state
        if state is _State.RECEIVING and self._size is None and self.gate is None and self._chunks:
            # The usual case: a whole frame, size prefix first, at the head of the first chunk
            # (a driver reading as much as the socket has): handed out with one slice.
            first = self._chunks[0]
            if len(first) >= 4:
                (size,) = _SIZE.unpack_from(first, 0)
                end = size + 4
                if 0 < size <= self.max_request_size and len(first) >= end:
                    self._buffered -= end
                    if len(first) == end:
                        self._chunks.popleft()
                        return self._frame_event(first[4:])
                    self._chunks[0] = first[end:]
                    return self._frame_event(first[4:end])
        if state is _State.MUTED:
            return _PAUSED
        if state is _State.CLOSED:
            return _CLOSED
        if self._size is None:
            if self._buffered < 4:  # _SIZE.size
                if self._eof:  # nothing, or part of a size prefix: a plain close
                    return self._close(_CLOSED)
                return _NEED_PREFIX[4 - self._buffered]
            (size,) = _SIZE.unpack(self._take(_SIZE.size))
            # Checked on the prefix alone: an oversized body is never buffered.
            limit = self.gate.receive_limit if self.gate is not None else None
            if limit is not None and not 0 <= size <= limit:
                return self._close(ProtocolError(f"frame size {size} during SASL authentication is outside "
                                                 f"0..{limit} (sasl.server.max.receive.size)"))
            if size < 0 or size > self.max_request_size:
                return self._close(ProtocolError(
                    f"frame size {size} is outside 0..{self.max_request_size} (socket.request.max.bytes)"))
            self._size = size
        size = self._size
        if self._buffered < size:
            if self._eof:
                return self._close(ProtocolError(f"truncated frame ({self._buffered} of {size} bytes)"))
            return NeedData(size - self._buffered)
        frame = self._take(size) if size else b""
        self._size = None
        return self._frame_event(frame)

    def _frame_event(self, frame: bytes) -> Event:
        """A complete frame: the gate first (it sees even a frame too short for a header)."""
        if self.gate is not None:
            api_key = api_version = None
            if len(frame) >= _API_PEEK.size:
                api_key, api_version = _API_PEEK.unpack_from(frame, 0)
            try:
                admission = self.gate.admit(frame, api_key, api_version)
            except GateRejection as e:
                return self._close(RequestRejected(str(e)))
            if admission is Admission.RAW_TOKEN:
                self._state, self._outstanding = _State.MUTED, None
                return RawSaslTokenReceived(frame)
        try:
            api_key, api_version, correlation_id = peek_api(frame)
        except FrameError as e:
            return self._close(ProtocolError(str(e)))
        self._state, self._outstanding = _State.MUTED, correlation_id
        return RequestReceived(api_key, api_version, correlation_id, frame)

    def send_response(self, parts: Sequence[_Part]) -> Sequence[_Part]:
        """Account for the outstanding request's answer; returns the parts to write, in order.

        The parts are the size-prefixed answer (bytes, and whatever else the caller writes,
        e.g. file slices); a request's answer starts with its correlation id, which is checked.
        """
        if self._state is not _State.MUTED:
            raise LocalProtocolError("a response with no request outstanding")
        expected = self._outstanding
        if expected is not None and parts:
            first = parts[0]
            if (first.__class__ is bytes or isinstance(first, (bytes, bytearray))) and len(first) >= 8:
                (correlation_id,) = _CORRELATION.unpack_from(first, _SIZE.size)
                if correlation_id != expected:
                    raise LocalProtocolError(f"a response to correlation id {correlation_id} while "
                                             f"{expected} is outstanding")
        self._unmute()
        return parts

    def no_response(self) -> None:
        """The outstanding request has no answer (Kafka's NoOpResponse, e.g. acks=0 Produce)."""
        if self._state is not _State.MUTED:
            raise LocalProtocolError("no response with no request outstanding")
        self._unmute()

    def close(self) -> None:
        """No more events: whatever is buffered is dropped."""
        self._close(_CLOSED)

    def _unmute(self) -> None:
        self._state, self._outstanding = _State.RECEIVING, None

    def _close(self, event: Event) -> Event:
        self._state = _State.CLOSED
        self._chunks.clear()
        self._buffered = 0
        self._size = None
        return event
