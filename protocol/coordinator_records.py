"""Kafka's coordinator records (``__consumer_offsets``, ``__share_group_state``,
``__transaction_state``), encoded and decoded from Kafka's own JSON record schemas.

The schemas (``schemas/coordinator/*.json``, copied from Kafka 4.3.1: see SOURCE.md there) are
the one description of every layout; this module reads them once and builds, per schema and
version, a plan of field readers and writers. A record is a dict keyed by the schema's field
names (``{"offset": 5, "leaderEpoch": -1, ...}``); nested structs are dicts, arrays lists,
uuids ``uuid.UUID``. Fields a version lacks decode to the schema's defaults; tagged fields are
written only when they differ from their default, in tag order, as Kafka's generated code does.

A key is its record type (the schema's apiKey) as an int16, then the key struct at version 0
(never flexible). A value is its version as an int16, then the value struct of that version
(flexible versions: compact strings/arrays and tagged fields). Kafka's coordinator runtime frames
both this way (CoordinatorRecordSerde).
"""

from __future__ import annotations

import json
import re
import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from .records import encode_uvarint
from .varint import VarintError, read_uvarint

__all__ = ["RecordFormatError", "RecordSchema", "schema", "record_type", "encode_key", "decode_key",
           "encode_value", "decode_value"]


class RecordFormatError(ValueError):
    """A coordinator record's key or value that does not parse as its schema says."""


_INTS = {"int8": struct.Struct(">b"), "int16": struct.Struct(">h"), "uint16": struct.Struct(">H"),
         "int32": struct.Struct(">i"), "int64": struct.Struct(">q"), "float64": struct.Struct(">d")}
_I16 = _INTS["int16"]
_I32 = _INTS["int32"]
_ZERO_UUID = uuid.UUID(int=0)

Reader = Callable[[bytes, int], tuple[Any, int]]
Writer = Callable[[Any, list], None]


# ---- versions ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Versions:
    """A schema's version range ("0+", "1", "0-4", "none")."""

    low: int
    high: int  # inclusive; a large number for "N+"

    @classmethod
    def parse(cls, text: str | None) -> Versions:
        if text is None or text == "none":
            return cls(1, 0)
        if text.endswith("+"):
            return cls(int(text[:-1]), 1 << 15)
        low, _, high = text.partition("-")
        return cls(int(low), int(high or low))

    def __contains__(self, version: int) -> bool:
        return self.low <= version <= self.high


# ---- schemas ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Field:
    name: str
    type: str  # "int32", "string", "[]int32", "[]TopicPartitions", "ClassicMemberMetadata", ...
    versions: Versions
    nullable: Versions
    tagged: Versions
    tag: int | None
    default: Any  # the JSON's "default" (None when absent)
    has_default: bool
    fields: tuple[Field, ...] | None  # a struct's (or a struct array's) fields

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def element(self) -> str:
        return self.type[2:] if self.is_array else self.type


def _parse_fields(raw: list[dict], structs: dict[str, list[dict]]) -> tuple[Field, ...]:
    out = []
    for f in raw:
        element = f["type"].removeprefix("[]")
        nested = f.get("fields", structs.get(element))
        tagged = Versions.parse(f.get("taggedVersions"))
        versions = f.get("versions", f.get("taggedVersions"))
        out.append(Field(f["name"], f["type"], Versions.parse(versions), Versions.parse(f.get("nullableVersions")),
                         tagged, f.get("tag"), f.get("default"), "default" in f,
                         _parse_fields(nested, structs) if nested is not None else None))
    return tuple(out)


def _collect_structs(raw: list[dict], into: dict[str, list[dict]]) -> None:
    for f in raw:
        if "fields" in f:
            into.setdefault(f["type"].removeprefix("[]"), f["fields"])
            _collect_structs(f["fields"], into)


_COMMENT = re.compile(r"^\s*//.*$", re.MULTILINE)


class RecordSchema:
    """One coordinator record schema (a key or a value) and its per-version codecs."""

    def __init__(self, raw: dict) -> None:
        self.name: str = raw["name"]
        self.api_key: int = raw["apiKey"]
        self.is_key = raw["type"] == "coordinator-key"
        self.valid = Versions.parse(raw["validVersions"])
        self.flexible = Versions.parse(raw.get("flexibleVersions"))
        structs = {s["name"]: s["fields"] for s in raw.get("commonStructs", ())}
        _collect_structs(raw["fields"], structs)
        for s in raw.get("commonStructs", ()):
            _collect_structs(s["fields"], structs)
        self.fields = _parse_fields(raw["fields"], structs)
        self._codecs: dict[int, _StructCodec] = {}

    def __repr__(self) -> str:
        return f"RecordSchema({self.name})"

    def codec(self, version: int) -> _StructCodec:
        codec = self._codecs.get(version)
        if codec is None:
            if version not in self.valid:
                raise RecordFormatError(f"unknown {self.name} version {version}")
            codec = self._codecs[version] = _StructCodec(self.fields, version, version in self.flexible, self.name)
        return codec

    def encode(self, data: dict, version: int) -> bytes:
        out: list = []
        self.codec(version).write(data, out)
        return b"".join(out)

    def decode(self, buf: bytes, pos: int, version: int) -> dict:
        try:
            value, end = self.codec(version).read(buf, pos)
        except (struct.error, IndexError, UnicodeDecodeError, VarintError) as e:
            raise RecordFormatError(f"truncated or malformed {self.name} v{version}: {e}") from None
        if end != len(buf):
            raise RecordFormatError(f"{self.name} v{version}: {len(buf) - end} bytes left over")
        return value


@cache
def _schemas() -> dict[str, RecordSchema]:
    out = {}
    for entry in resources.files(__package__).joinpath("schemas", "coordinator").iterdir():
        if entry.name.endswith(".json"):
            s = RecordSchema(json.loads(_COMMENT.sub("", entry.read_text("utf-8"))))
            out[s.name] = s
    return out


def schema(name: str) -> RecordSchema:
    """The schema of a record key or value by Kafka's name (``OffsetCommitValue``)."""
    try:
        return _schemas()[name]
    except KeyError:
        raise KeyError(f"no coordinator record schema {name!r}") from None


def schema_names() -> list[str]:
    return sorted(_schemas())


def coordinator_of(name: str) -> str:
    """Which coordinator's topic a schema's records go to: "share" (``__share_group_state``),
    "transaction" (``__transaction_state``) or "group" (``__consumer_offsets``); their record
    types (key apiKeys) are numbered per coordinator."""
    if name.startswith(("ShareSnapshot", "ShareUpdate")):
        return "share"
    return "transaction" if name.startswith("TransactionLog") else "group"


@cache
def _key_schemas(coordinator: str) -> dict[int, str]:
    return {s.api_key: n for n, s in _schemas().items() if s.is_key and coordinator_of(n) == coordinator}


def key_schema_name(coordinator: str, kind: int) -> str | None:
    """The key schema of record type ``kind`` of ``coordinator`` (None: no such type)."""
    return _key_schemas(coordinator).get(kind)


# ---- framing: the int16 type or version, then the struct -----------------------------------------


def record_type(key: bytes) -> int:
    """A key's record type (the int16 before it; Kafka's CoordinatorRecordType)."""
    if len(key) < 2:
        raise RecordFormatError("a coordinator record key shorter than its type")
    return _I16.unpack_from(key)[0]


def encode_key(name: str, data: dict) -> bytes:
    s = schema(name)
    return _I16.pack(s.api_key) + s.encode(data, 0)


def decode_key(name: str, key: bytes) -> dict:
    """The fields of ``key`` as schema ``name`` (its record type already checked by the caller)."""
    return schema(name).decode(key, 2, 0)


def encode_value(name: str, data: dict, version: int | None = None) -> bytes:
    """The value at ``version`` (default: the schema's newest)."""
    s = schema(name)
    v = s.valid.high if version is None else version
    return _I16.pack(v) + s.encode(data, v)


def decode_value(name: str, value: bytes) -> tuple[int, dict]:
    """(version, fields) of a value of schema ``name``."""
    if len(value) < 2:
        raise RecordFormatError(f"a {name} shorter than its version")
    version = _I16.unpack_from(value)[0]
    return version, schema(name).decode(value, 2, version)


# ---- per-version codecs -----------------------------------------------------------------------------


def _uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    return read_uvarint(buf, pos, -1, 5)


def _take(buf: bytes, pos: int, n: int) -> bytes:
    end = pos + n
    if n < 0 or end > len(buf):
        raise RecordFormatError(f"truncated: need {n} bytes at {pos} of {len(buf)}")
    return buf[pos:end]


def _int_codec(kind: str) -> tuple[Reader, Writer]:
    st = _INTS[kind]
    size, unpack, pack = st.size, st.unpack_from, st.pack

    def read(buf: bytes, pos: int) -> tuple[int, int]:
        return unpack(buf, pos)[0], pos + size

    def write(v: int, out: list) -> None:
        out.append(pack(v))
    return read, write


def _bool_codec() -> tuple[Reader, Writer]:
    def read(buf: bytes, pos: int) -> tuple[bool, int]:
        return _take(buf, pos, 1)[0] != 0, pos + 1

    def write(v: bool, out: list) -> None:
        out.append(b"\x01" if v else b"\x00")
    return read, write


def _uuid_codec() -> tuple[Reader, Writer]:
    def read(buf: bytes, pos: int) -> tuple[uuid.UUID, int]:
        return uuid.UUID(bytes=bytes(_take(buf, pos, 16))), pos + 16

    def write(v: uuid.UUID | None, out: list) -> None:
        # None: Kafka's Uuid.ZERO_UUID, as the request decoder hands a zero topic id over.
        out.append(v.bytes if v is not None else _ZERO_UUID.bytes)
    return read, write


def _length_codec(flexible: bool, wide: bool) -> tuple[Reader, Callable[[int], bytes]]:
    """The length before a string (int16), bytes or array (int32); compact: uvarint length + 1.
    -1 is null."""
    if flexible:
        def read(buf: bytes, pos: int) -> tuple[int, int]:
            n, pos = _uvarint(buf, pos)
            return n - 1, pos
        return read, lambda n: encode_uvarint(n + 1)
    st = _I32 if wide else _I16
    size, unpack, pack = st.size, st.unpack_from, st.pack

    def read_fixed(buf: bytes, pos: int) -> tuple[int, int]:
        return unpack(buf, pos)[0], pos + size
    return read_fixed, pack


def _null_or(name: str, nullable: bool, read: Reader, write: Writer, null: Callable[[], bytes]) -> tuple[Reader, Writer]:
    def guarded_write(v: Any, out: list) -> None:
        if v is None:
            if not nullable:
                raise ValueError(f"{name} is not nullable")
            out.append(null())
        else:
            write(v, out)
    return read, guarded_write


def _string_codec(name: str, flexible: bool, nullable: bool, raw: bool) -> tuple[Reader, Writer]:
    """A string (``raw`` False) or bytes field."""
    read_len, pack_len = _length_codec(flexible, wide=raw)
    fixed = None if flexible else (_I32 if raw else _I16)

    def read(buf: bytes, pos: int) -> tuple[Any, int]:
        if fixed is not None:  # the common case inlined: a loaded log reads millions of these
            n = fixed.unpack_from(buf, pos)[0]
            pos += fixed.size
        else:
            n, pos = read_len(buf, pos)
        if n < 0:
            if not nullable:
                raise RecordFormatError(f"null where {name} is required")
            return None, pos
        end = pos + n
        if end > len(buf):
            raise RecordFormatError(f"truncated: {name} needs {n} bytes at {pos} of {len(buf)}")
        return (bytes(buf[pos:end]) if raw else str(buf[pos:end], "utf-8")), end

    def write(v: Any, out: list) -> None:
        b = bytes(v) if raw else v.encode("utf-8")
        out.append(pack_len(len(b)))
        out.append(b)
    return _null_or(name, nullable, read, write, lambda: pack_len(-1))


def _array_codec(name: str, flexible: bool, nullable: bool, elem_read: Reader, elem_write: Writer) -> tuple[Reader, Writer]:
    read_len, pack_len = _length_codec(flexible, wide=True)

    def read(buf: bytes, pos: int) -> tuple[list | None, int]:
        n, pos = read_len(buf, pos)
        if n < 0:
            if not nullable:
                raise RecordFormatError(f"null where array {name} is required")
            return None, pos
        if n > len(buf) - pos:
            raise RecordFormatError(f"array {name} of {n} elements in {len(buf) - pos} bytes")
        items = []
        for _ in range(n):
            v, pos = elem_read(buf, pos)
            items.append(v)
        return items, pos

    def write(v: list, out: list) -> None:
        out.append(pack_len(len(v)))
        for item in v:
            elem_write(item, out)
    return _null_or(name, nullable, read, write, lambda: pack_len(-1))


def _nullable_struct(read: Reader, write: Writer) -> tuple[Reader, Writer]:
    """A nullable struct (not in an array): int8 -1 for null, 1 then the struct."""
    def nread(buf: bytes, pos: int) -> tuple[dict | None, int]:
        marker = _INTS["int8"].unpack_from(buf, pos)[0]
        return (None, pos + 1) if marker < 0 else read(buf, pos + 1)

    def nwrite(v: dict | None, out: list) -> None:
        if v is None:
            out.append(b"\xff")
        else:
            out.append(b"\x01")
            write(v, out)
    return nread, nwrite


def _default(f: Field, version: int, flexible: bool, owner: str) -> Any:
    """Kafka's default of a field: its "default", else 0 / "" / false / the zero uuid / [] /
    a struct of defaults; "null" (or null) for a nullable field is None."""
    d = f.default
    if f.has_default and (d is None or d == "null"):
        return None
    if f.is_array:
        return []
    if f.type in _INTS:
        return (float(d) if f.type == "float64" else int(str(d), 0)) if f.has_default else 0
    if f.type == "bool":
        return str(d).lower() == "true" if f.has_default else False
    if f.type == "string":
        return str(d) if f.has_default else ""
    if f.type == "bytes":
        return b""
    if f.type == "uuid":
        return _ZERO_UUID
    return _StructCodec(f.fields or (), version, flexible, f"{owner}.{f.name}").defaults()


def _field_codec(f: Field, version: int, flexible: bool, owner: str) -> tuple[Reader, Writer]:
    nullable = version in f.nullable
    name = f"{owner}.{f.name}"

    def element(kind: str) -> tuple[Reader, Writer]:
        if kind in _INTS:
            return _int_codec(kind)
        if kind == "bool":
            return _bool_codec()
        if kind == "uuid":
            return _uuid_codec()
        if kind in ("string", "bytes"):
            return _string_codec(name, flexible, nullable and not f.is_array, kind == "bytes")
        codec = _StructCodec(f.fields or (), version, flexible, name)
        return codec.read, codec.write

    if f.is_array:
        return _array_codec(name, flexible, nullable, *element(f.element))
    if f.type in _INTS or f.type in ("bool", "uuid", "string", "bytes"):
        return element(f.type)
    read, write = element(f.type)
    return _nullable_struct(read, write) if nullable else (read, write)


class _StructCodec:
    """The reader and writer of one struct at one version."""

    def __init__(self, fields: tuple[Field, ...], version: int, flexible: bool, name: str) -> None:
        self.name = name
        self.flexible = flexible
        self.known = frozenset(f.name for f in fields)
        self.plain: list[tuple[str, Reader, Writer, Any]] = []
        self.tagged: dict[int, tuple[str, Reader, Writer, Any]] = {}
        self.absent: list[tuple[str, Any]] = []  # fields this version lacks, with their defaults
        for f in fields:
            default = _default(f, version, flexible, name)
            if version not in f.versions:
                self.absent.append((f.name, default))
            elif flexible and version in f.tagged:
                read, write = _field_codec(f, version, flexible, name)
                self.tagged[f.tag] = (f.name, read, write, default)
            else:
                read, write = _field_codec(f, version, flexible, name)
                self.plain.append((f.name, read, write, default))
        self.tag_order = sorted(self.tagged.items())
        # What a decoded dict starts as: the defaults of the fields not read in the body
        # (immutable ones copied with the dict, lists and structs made fresh).
        missing = self.absent + ([(n, d) for n, _r, _w, d in self.tagged.values()] if flexible else [])
        self.base = {n: d for n, d in missing if not isinstance(d, list | dict)}
        self.mutable = [(n, d) for n, d in missing if isinstance(d, list | dict)]

    def defaults(self) -> dict:
        out = {n: _fresh(d) for n, d in self.absent}
        for n, _r, _w, d in self.plain:
            out[n] = _fresh(d)
        for n, _r, _w, d in self.tagged.values():
            out[n] = _fresh(d)
        return out

    def read(self, buf: bytes, pos: int) -> tuple[dict, int]:
        out = self.base.copy()
        for name, default in self.mutable:
            out[name] = _fresh(default)
        for name, read, _w, _d in self.plain:
            out[name], pos = read(buf, pos)
        if self.flexible:
            count, pos = _uvarint(buf, pos)
            for _ in range(count):
                tag, pos = _uvarint(buf, pos)
                size, pos = _uvarint(buf, pos)
                end = pos + size
                if end > len(buf):
                    raise RecordFormatError(f"{self.name}: tagged field {tag} runs past the end")
                known = self.tagged.get(tag)
                if known is not None:
                    value, got = known[1](buf, pos)
                    if got != end:
                        raise RecordFormatError(f"{self.name}: tagged field {tag} is {size} bytes, read {got - pos}")
                    out[known[0]] = value
                pos = end
        return out, pos

    def write(self, data: dict, out: list) -> None:
        if not self.known.issuperset(data):
            raise KeyError(f"{self.name} has no field {sorted(set(data) - self.known)}")
        for name, _r, write, default in self.plain:
            write(data.get(name, default), out)
        if not self.flexible:
            return
        present = []
        for tag, (name, _r, write, default) in self.tag_order:
            value = data.get(name, default)
            if value != default:
                body: list = []
                write(value, body)
                raw = b"".join(body)
                present.append(encode_uvarint(tag) + encode_uvarint(len(raw)) + raw)
        out.append(encode_uvarint(len(present)))
        out.extend(present)


def _fresh(default: Any) -> Any:
    """A mutable default copied, so records never share one list or dict."""
    if isinstance(default, list):
        return []
    if isinstance(default, dict):
        return {k: _fresh(v) for k, v in default.items()}
    return default
