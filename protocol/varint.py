"""Kafka's variable-length integers (ByteUtils.readUnsignedVarint, readVarint, readVarlong): the
one reader of them, for request headers and bodies, records, coordinator records, the dump tool
and OTLP's protobuf.

A value that runs past ``end`` raises VarintTruncated (also an IndexError, which the records
decoder and the tools treat as data that ends early); one longer than its type raises
VarintError. Callers turn either into their own error.
"""

from __future__ import annotations

_MASK32 = 0xFFFFFFFF
_MASK64 = 0xFFFFFFFFFFFFFFFF


class VarintError(ValueError):
    """A varint longer than its type allows."""


class VarintTruncated(VarintError, IndexError):
    """A varint cut short by the end of the data."""


def read_uvarint(buf: bytes | bytearray | memoryview, pos: int, end: int = -1, max_bytes: int = 5,
                 kind: str = "varint") -> tuple[int, int]:
    """(value, next position) of the unsigned LEB128 varint at ``pos`` (``end``: where the data
    stops, -1 for its length; ``max_bytes``: 5 for Kafka's int32 varints, 10 for 64-bit ones)."""
    if end < 0:
        end = len(buf)
    if pos < end:
        b = buf[pos]
        if b < 0x80:  # the usual one-byte value
            return b, pos + 1
    value = shift = 0
    limit = 7 * max_bytes
    while True:
        if pos >= end:
            raise VarintTruncated(f"{kind} runs past the end of the data")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift >= limit:
            raise VarintError(f"{kind} longer than {max_bytes} bytes")


def read_varint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """(value, next position) of the zigzag int32 varint at ``pos`` (ByteUtils.readVarint)."""
    raw, pos = read_uvarint(buf, pos)
    raw &= _MASK32
    return (raw >> 1) ^ -(raw & 1), pos


def read_varlong(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """(value, next position) of the zigzag int64 varlong at ``pos`` (ByteUtils.readVarlong)."""
    raw, pos = read_uvarint(buf, pos, -1, 10, "varlong")
    raw &= _MASK64
    return (raw >> 1) ^ -(raw & 1), pos
