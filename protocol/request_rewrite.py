"""What Kafka's parsers accept and kio's reader refuses: the request body rewritten so kio reads it.

- Unknown tagged fields: a flexible request may carry tagged fields its schema version does
  not name (a newer client's additions, KIP-482); Kafka keeps them aside and answers the
  request; kio raises KeyError. They are dropped, recursively (inside known tagged fields
  too, whose sizes change). A tag that another version of the same struct defines is not
  unknown to Kafka's generated reader: "Tag N is not valid for version V", the request does
  not parse and the connection is closed; so it raises ValueError here (measured on 4.3.1).
- Durations past what kio converts (+-(2**63 - 1) // 1000 ms, its microseconds in an int64;
  an int64 field may hold +-2**63): Kafka reads a long; kio raises ValueError. They are
  clamped to that range (292,000 years), longer than any deadline or retention can tell apart.

Only the slow path: ``messages.decode_request_body`` comes here when kio raised, after
``check_request`` has bounded every length in the body. The walk is over ``request_check``'s plan.
"""

from __future__ import annotations

import struct
from dataclasses import fields
from functools import cache
from typing import Any

from kio.index import load_request_schema
from kio.serial._introspect import EntityField, EntityTupleField, classify_field

from .request_check import (
    ARRAY32,
    BYTES32,
    COMPACT_ARRAY,
    COMPACT_BYTES,
    FIXED,
    STRING16,
    STRUCT,
    Plan,
    plan_for,
)
from .varint import read_uvarint

_I16 = struct.Struct(">h").unpack_from
_I32 = struct.Struct(">i").unpack_from
_I64 = struct.Struct(">q")
# kio's bounds in milliseconds (it converts through microseconds in an int64).
_MAX_MS = (2**63 - 1) // 1000
_MIN_MS = -_MAX_MS
_DURATIONS = {"timedelta_i64"}


def _write_uvarint(out: bytearray, n: int) -> None:
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


@cache
def _tags_of_all_versions(api_key: int) -> dict[tuple[str, ...], set[int]]:
    """Per struct (the path of field names from the request), every tag any version defines."""
    out: dict[tuple[str, ...], set[int]] = {}

    def walk(cls: type, path: tuple[str, ...]) -> None:
        for f in fields(cls):
            if "tag" in f.metadata:
                out.setdefault(path, set()).add(int(f.metadata["tag"]))
            klass = classify_field(f)
            if isinstance(klass, EntityField | EntityTupleField):
                walk(klass.type_, (*path, f.name))

    for version in range(64):
        try:
            walk(load_request_schema(api_key, version), ())
        except Exception:  # noqa: BLE001 (kio raises several index errors for a version it lacks)
            continue
    return out


def _copy_op(op: tuple[Any, ...], buf: Any, pos: int, end: int, out: bytearray, ctx: tuple[Any, ...]) -> int:
    kind = op[0]
    if kind == FIXED:
        if op[3] in _DURATIONS:
            (ms,) = _I64.unpack_from(buf, pos)
            out += _I64.pack(max(_MIN_MS, min(_MAX_MS, ms)))
        else:
            out += buf[pos : pos + op[1]]
        return pos + op[1]
    if kind == COMPACT_BYTES:
        start = pos
        n, pos = read_uvarint(buf, pos, end)
        length = max(n - 1, 0)
        out += buf[start : pos + length]
        return pos + length
    if kind in (STRING16, BYTES32):
        width = 2 if kind == STRING16 else 4
        n = (_I16 if kind == STRING16 else _I32)(buf, pos)[0]
        length = width + max(n, 0)
        out += buf[pos : pos + length]
        return pos + length
    if kind == STRUCT:
        if op[3]:  # a nullable struct: an int8 marker first
            out.append(buf[pos])
            if buf[pos] == 255:
                return pos + 1
            pos += 1
        return _copy_struct(op[1], buf, pos, end, out, (ctx[0], ctx[1], (*ctx[2], op[2])))
    # arrays
    if kind == COMPACT_ARRAY:
        start = pos
        n, pos = read_uvarint(buf, pos, end)
        n -= 1
    else:
        assert kind == ARRAY32
        start = pos
        n = _I32(buf, pos)[0]
        pos += 4
    out += buf[start:pos]
    for _ in range(max(n, 0)):
        pos = _copy_op(op[1], buf, pos, end, out, ctx)
    return pos


def _copy_struct(plan: Plan, buf: Any, pos: int, end: int, out: bytearray, ctx: tuple[Any, ...]) -> int:
    for op in plan.ops:
        pos = _copy_op(op, buf, pos, end, out, ctx)
    if not plan.flexible:
        return pos
    count, pos = read_uvarint(buf, pos, end)
    kept: list[tuple[int, bytes]] = []
    for _ in range(count):
        tag, pos = read_uvarint(buf, pos, end)
        size, pos = read_uvarint(buf, pos, end)
        op = plan.tags.get(tag)
        if op is not None:
            value = bytearray()
            _copy_op(op, buf, pos, pos + size, value, ctx)
            kept.append((tag, bytes(value)))
        elif tag in _tags_of_all_versions(ctx[0]).get(ctx[2], ()):
            raise ValueError(f"Tag {tag} is not valid for version {ctx[1]}")
        pos += size
    _write_uvarint(out, len(kept))
    for tag, value in kept:
        _write_uvarint(out, tag)
        _write_uvarint(out, len(value))
        out += value
    return pos


def rewrite_request(cls: type, buf: bytes | memoryview, offset: int) -> bytes:
    """The request body at ``offset`` without the tagged fields ``cls`` does not name and with
    durations within kio's range; ValueError for a tag another version of the struct defines."""
    out = bytearray()
    _copy_struct(plan_for(cls), buf, offset, len(buf), out, (int(cls.__api_key__), int(cls.__version__), ()))
    return bytes(out)
