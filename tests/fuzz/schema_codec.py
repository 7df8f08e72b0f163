"""Kafka's message encoding, driven by kio's schema classes, written independently of kio's codec.

Two uses, both about what Kafka's schemas allow rather than what our server's codec does:

- ``encode``: a request body from plain values (ints, str, bytes, uuid.UUID, lists, dicts by
  field name), with extreme values kio's own writer refuses (timedelta fields past datetime's
  range, say) and with *unknown* tagged fields (``UNKNOWN_TAGS`` in a struct's dict), which
  Kafka's parsers skip;
- ``decode``: a strict reader for answers: every length within the frame, no null where the
  schema has none, tagged fields ascending with their declared sizes, and every byte of the
  frame consumed. kio's reader is not used for that: it rejects Kafka's -1 timestamps.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import fields
from functools import cache
from typing import Any

from kio.serial._introspect import EntityField, EntityTupleField, classify_field, is_optional

UNKNOWN_TAGS = "__unknown_tags__"  # a struct's extra tagged fields: {tag: raw bytes}

_INTS = {"int8": ">b", "int16": ">h", "int32": ">i", "int64": ">q", "uint16": ">H", "error_code": ">h",
         "timedelta_i32": ">i", "timedelta_i64": ">q", "datetime_i64": ">q", "float64": ">d"}
_STRUCTS = {k: struct.Struct(v) for k, v in _INTS.items()}
_BOOL = struct.Struct(">?")
_NULLABLE_KINDS = {"string", "bytes", "records", "struct"}


class DecodeError(ValueError):
    pass


class Field:
    """One field of a schema class: its kind, whether nullable or an array, its tag."""

    __slots__ = ("name", "kind", "entity", "array", "nullable", "tag")

    def __init__(self, f: Any) -> None:
        klass = classify_field(f)
        self.name: str = f.name
        self.entity: type | None = klass.type_ if isinstance(klass, EntityField | EntityTupleField) else None
        self.kind: str = "struct" if self.entity is not None else f.metadata["kafka_type"]
        self.array: bool = klass.is_array
        # kio types a zero uuid and a -1 timestamp as None too: only these kinds have a null.
        self.nullable: bool = is_optional(f) and (self.array or self.kind in _NULLABLE_KINDS)
        self.tag: int | None = f.metadata.get("tag")


@cache
def schema_fields(cls: type) -> tuple[tuple[Field, ...], tuple[Field, ...]]:
    """(regular fields in order, tagged fields by tag) of a schema class."""
    all_fields = [Field(f) for f in fields(cls)]
    return (tuple(f for f in all_fields if f.tag is None),
            tuple(sorted((f for f in all_fields if f.tag is not None), key=lambda f: f.tag)))  # type: ignore[arg-type, return-value]


# ------------------------------------------------------------------------------ encoding


def uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _length(out: bytearray, n: int | None, flexible: bool, legacy: str) -> None:
    if flexible:
        out += uvarint(0 if n is None else n + 1)
    else:
        out += struct.pack(legacy, -1 if n is None else n)


def _encode_value(out: bytearray, f: Field, value: Any, flexible: bool) -> None:
    kind = f.kind
    if kind == "struct":
        assert f.entity is not None
        if f.nullable and not f.array:
            out += struct.pack(">b", -1 if value is None else 1)
            if value is None:
                return
        encode_struct(out, f.entity, value, flexible)
    elif kind in _STRUCTS:
        out += _STRUCTS[kind].pack(value)
    elif kind == "bool":
        out += _BOOL.pack(bool(value))
    elif kind == "uuid":
        out += value.bytes if isinstance(value, uuid.UUID) else bytes(value)
    elif kind == "string":
        raw = None if value is None else value.encode()
        _length(out, None if raw is None else len(raw), flexible, ">h")
        out += raw or b""
    elif kind in ("bytes", "records"):
        _length(out, None if value is None else len(value), flexible, ">i")
        out += value or b""
    else:
        raise TypeError(f"unknown kafka type {kind}")


def _encode_field(out: bytearray, f: Field, value: Any, flexible: bool) -> None:
    if f.array:
        _length(out, None if value is None else len(value), flexible, ">i")
        for item in value or ():
            _encode_value(out, f, item, flexible)
    else:
        _encode_value(out, f, value, flexible)


def encode_struct(out: bytearray, cls: type, data: dict[str, Any], flexible: bool) -> None:
    regular, tagged = schema_fields(cls)
    for f in regular:
        _encode_field(out, f, data[f.name], flexible)
    if not flexible:
        return
    tags: dict[int, bytes] = dict(data.get(UNKNOWN_TAGS) or {})
    for f in tagged:
        if f.name in data:
            buf = bytearray()
            _encode_field(buf, f, data[f.name], True)
            tags[f.tag] = bytes(buf)  # type: ignore[index]
    out += uvarint(len(tags))
    for tag in sorted(tags):
        out += uvarint(tag) + uvarint(len(tags[tag])) + tags[tag]


def encode(cls: type, data: dict[str, Any]) -> bytes:
    out = bytearray()
    encode_struct(out, cls, data, bool(cls.__flexible__))
    return bytes(out)


# ------------------------------------------------------------------------------ decoding


class Reader:
    def __init__(self, buf: bytes, pos: int = 0, end: int | None = None) -> None:
        self.buf, self.pos, self.end = buf, pos, len(buf) if end is None else end

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > self.end:
            raise DecodeError(f"{n} bytes wanted at {self.pos}, {self.end - self.pos} left")
        b = self.buf[self.pos : self.pos + n]
        self.pos += n
        return b

    def unpack(self, s: struct.Struct) -> Any:
        return s.unpack(self.take(s.size))[0]

    def uvarint(self) -> int:
        n = shift = 0
        while True:
            (b,) = self.take(1)
            n |= (b & 0x7F) << shift
            if not b & 0x80:
                return n
            shift += 7
            if shift > 63:
                raise DecodeError("varint longer than 10 bytes")

    def length(self, flexible: bool, legacy: struct.Struct, nullable: bool, what: str) -> int | None:
        n = self.uvarint() - 1 if flexible else self.unpack(legacy)
        if n < -1 or (n == -1 and not nullable):
            raise DecodeError(f"{what}: length {n} where the schema allows {'null' if nullable else 'no null'}")
        return None if n == -1 else n


_I16, _I32, _I8 = struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">b")


def _decode_value(r: Reader, f: Field, flexible: bool, nullable: bool) -> Any:
    kind = f.kind
    if kind == "struct":
        assert f.entity is not None
        if f.nullable and not f.array:
            marker = r.unpack(_I8)
            if marker not in (-1, 1):
                raise DecodeError(f"{f.name}: nullable struct marker {marker}")
            if marker == -1:
                return None
        return decode_struct(r, f.entity, flexible)
    if kind in _STRUCTS:
        return r.unpack(_STRUCTS[kind])
    if kind == "bool":
        (b,) = r.take(1)
        if b > 1:
            raise DecodeError(f"{f.name}: boolean byte {b}")
        return bool(b)
    if kind == "uuid":
        return uuid.UUID(bytes=r.take(16))
    if kind == "string":
        n = r.length(flexible, _I16, nullable, f.name)
        if n is None:
            return None
        try:
            return r.take(n).decode()
        except UnicodeDecodeError as e:
            raise DecodeError(f"{f.name}: not UTF-8: {e}") from None
    if kind in ("bytes", "records"):
        n = r.length(flexible, _I32, nullable, f.name)
        return None if n is None else r.take(n)
    raise DecodeError(f"unknown kafka type {kind}")


def _decode_field(r: Reader, f: Field, flexible: bool) -> Any:
    if f.array:
        n = r.length(flexible, _I32, f.nullable, f.name)
        if n is None:
            return None
        if n > r.end - r.pos:  # every item takes at least a byte
            raise DecodeError(f"{f.name}: {n} items in {r.end - r.pos} bytes")
        return [_decode_value(r, f, flexible, False) for _ in range(n)]
    return _decode_value(r, f, flexible, f.nullable)


def decode_struct(r: Reader, cls: type, flexible: bool) -> dict[str, Any]:
    regular, tagged = schema_fields(cls)
    out: dict[str, Any] = {}
    for f in regular:
        try:
            out[f.name] = _decode_field(r, f, flexible)
        except DecodeError as e:
            raise DecodeError(f"{cls.__name__}.{e}") from None
    if flexible:
        by_tag = {f.tag: f for f in tagged}
        last = -1
        for _ in range(r.uvarint()):
            tag, size = r.uvarint(), r.uvarint()
            if tag <= last:
                raise DecodeError(f"{cls.__name__}: tagged field {tag} after {last}")
            last = tag
            end = r.pos + size
            if end > r.end:
                raise DecodeError(f"{cls.__name__}: tagged field {tag} of {size} bytes past the end")
            f = by_tag.get(tag)
            if f is None:
                out.setdefault(UNKNOWN_TAGS, {})[tag] = r.take(size)
                continue
            sub = Reader(r.buf, r.pos, end)
            out[f.name] = _decode_field(sub, f, True)
            if sub.pos != end:
                raise DecodeError(f"{cls.__name__}.{f.name}: tagged field of {size} bytes, {sub.pos - r.pos} read")
            r.pos = end
    return out


def decode(cls: type, buf: bytes, pos: int = 0) -> dict[str, Any]:
    """The whole of ``buf[pos:]`` as one ``cls``; DecodeError if it is not exactly that."""
    r = Reader(buf, pos)
    out = decode_struct(r, cls, bool(cls.__flexible__))
    if r.pos != r.end:
        raise DecodeError(f"{cls.__name__}: {r.end - r.pos} bytes left over")
    return out
