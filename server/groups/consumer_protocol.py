"""The embedded consumer protocol of classic groups (Kafka's ConsumerProtocol), versions 0-3.

A classic consumer's JoinGroup metadata is a ConsumerProtocolSubscription and its SyncGroup
assignment a ConsumerProtocolAssignment: an int16 version, then the fields of that version (not
flexible; a newer version only adds fields at the end, so any version reads with the fields it
has). The group coordinator reads them when a classic group becomes a consumer group (KIP-848's
online migration) and when classic members run inside a consumer group, and writes assignments
for them.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from .records import RecordFormatError, _Reader

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
HIGHEST_VERSION = 3


@dataclass(frozen=True)
class Subscription:
    """A ConsumerProtocolSubscription: topics, owned partitions (v1+), rack (v3+)."""

    version: int
    topics: tuple[str, ...]
    owned: dict[str, tuple[int, ...]] = field(default_factory=dict)
    rack_id: str | None = None


def _nullable_bytes(r: _Reader) -> bytes | None:
    n = r.i32()
    return None if n < 0 else r._take(n)


def decode_subscription(metadata: bytes) -> Subscription:
    """Raises RecordFormatError when malformed (Kafka's SchemaException)."""
    r = _Reader(metadata)
    version = r.i16()
    if version < 0:
        raise RecordFormatError(f"unsupported subscription version {version}")
    topics = tuple(r.string() for _ in range(r.array_len()))
    _nullable_bytes(r)  # user data
    owned: dict[str, tuple[int, ...]] = {}
    rack_id = None
    if version >= 1:
        for _ in range(r.array_len()):
            topic = r.string()
            owned[topic] = tuple(r.i32() for _ in range(r.array_len()))
    if version >= 2:
        r.i32()  # generation id
    if version >= 3:
        rack_id = r.nullable_string()
    return Subscription(version, topics, owned, rack_id)


def subscription_version(metadata: bytes) -> int:
    """Kafka's ConsumerProtocol.deserializeVersion (capped at the highest known version)."""
    if len(metadata) < 2:
        raise RecordFormatError("no version in the consumer protocol metadata")
    return min(_I16.unpack_from(metadata)[0], HIGHEST_VERSION)


def decode_assignment(data: bytes) -> tuple[dict[str, tuple[int, ...]], bytes | None]:
    """The partitions of a ConsumerProtocolAssignment by topic name, and its user data (empty bytes: none)."""
    if not data:
        return {}, None
    r = _Reader(data)
    r.i16()
    out: dict[str, tuple[int, ...]] = {}
    for _ in range(r.array_len()):
        topic = r.string()
        out[topic] = tuple(r.i32() for _ in range(r.array_len()))
    return out, _nullable_bytes(r)


def encode_assignment(partitions: dict[str, list[int]], version: int) -> bytes:
    """A ConsumerProtocolAssignment at ``version`` (0-3 share one layout), no user data."""
    out = [_I16.pack(max(0, min(version, HIGHEST_VERSION))), _I32.pack(len(partitions))]
    for topic, ps in partitions.items():
        b = topic.encode("utf-8")
        out += [_I16.pack(len(b)), b, _I32.pack(len(ps)), b"".join(_I32.pack(p) for p in ps)]
    out.append(_I32.pack(-1))  # null user data
    return b"".join(out)
