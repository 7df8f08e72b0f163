"""Kafka framing and request/response headers, sans I/O.

A frame is an int32 size followed by that many bytes (the server reads frames;
this module parses and builds what is inside them). Request header v1 is
(api_key i16, api_version i16, correlation_id i32, client_id nullable string);
v2 adds tagged fields. Response header v0 is the correlation id; v1 adds tagged
fields. Which version applies depends on whether the API version is flexible,
except ApiVersions responses, which always use header v0 (so that a client can
read the answer to a version it guessed).
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from .varint import VarintError, read_uvarint

_SIZE = struct.Struct(">i")
_HEADER_FIXED = struct.Struct(">hhih")  # api_key, api_version, correlation_id, client_id length
_I32 = struct.Struct(">i")
_API_PEEK = struct.Struct(">hhi")  # api_key, api_version, correlation_id
_HEAD = struct.Struct(">ii")  # size, correlation id (response header v0)
_FLEXIBLE_HEAD = struct.Struct(">iiB")  # size, correlation id, no tagged fields (response header v1)

API_VERSIONS_KEY = 18


class ProtocolViolation(Exception):
    """A request that cannot be answered (unknown API or version, undecodable, or a field
    combination Kafka refuses): the connection is closed, as Kafka does."""


class FrameError(Exception):
    """The byte stream is not valid Kafka framing; the connection must be closed."""


class RequestHeader(NamedTuple):
    """Immutable, as the frozen dataclass it replaces; a NamedTuple is built in a third of the
    time (one per request: a frozen dataclass sets each field through ``object.__setattr__``)."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body_offset: int  # where the body starts within the frame payload


def peek_api(frame: bytes) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id) of a request frame."""
    if len(frame) < 8:
        raise FrameError(f"request of {len(frame)} bytes is shorter than a request header")
    return _API_PEEK.unpack_from(frame, 0)


def parse_request_header(frame: bytes, flexible: bool) -> RequestHeader:
    """Parse the header (v1, or v2 when ``flexible``)."""
    if len(frame) < _HEADER_FIXED.size:
        raise FrameError(f"request of {len(frame)} bytes is shorter than a request header")
    api_key, api_version, correlation_id, client_len = _HEADER_FIXED.unpack_from(frame, 0)
    pos = _HEADER_FIXED.size
    client_id: str | None = None
    if client_len >= 0:
        if pos + client_len > len(frame):
            raise FrameError("client id runs past the end of the request")
        client_id = frame[pos : pos + client_len].decode("utf-8", "replace")
        pos += client_len
    if flexible:
        if pos < len(frame) and frame[pos] == 0:  # no tagged fields: the usual header
            return RequestHeader(api_key, api_version, correlation_id, client_id, pos + 1)
        try:
            count, pos = read_uvarint(frame, pos)
            for _ in range(count):
                _tag, pos = read_uvarint(frame, pos)
                size, pos = read_uvarint(frame, pos)
                pos += size
        except VarintError as e:
            raise FrameError(f"{e} in request header") from None
        if pos > len(frame):
            raise FrameError("tagged fields run past the end of the request header")
    return RequestHeader(api_key, api_version, correlation_id, client_id, pos)


def response_header(correlation_id: int, flexible: bool) -> bytes:
    """Response header v0, or v1 (an empty tagged-field section) when ``flexible``."""
    return _I32.pack(correlation_id) + (b"\0" if flexible else b"")


def frame(payload_parts: list[bytes], extra_size: int = 0) -> bytes:
    """Size-prefix the parts; ``extra_size`` counts bytes sent separately (e.g. by sendfile)."""
    payload = b"".join(payload_parts)
    return _SIZE.pack(len(payload) + extra_size) + payload


def framed_response(correlation_id: int, flexible: bool, body: bytes) -> bytes:
    """``frame([response_header(correlation_id, flexible), body])`` in one step (every answer
    built from a dict goes through here)."""
    if flexible:
        return _FLEXIBLE_HEAD.pack(len(body) + 5, correlation_id, 0) + body
    return _HEAD.pack(len(body) + 4, correlation_id) + body
