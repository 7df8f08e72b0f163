"""API message bodies: decoded and encoded with ``kio`` (generated from Kafka's JSON schemas).

Handlers describe a response once, as plain dicts with Kafka's field names and
plain ints (error codes, milliseconds); ``encode_body`` turns that into the
schema of whichever version the client asked for, dropping fields that version
does not have and filling absent ones with the schema's defaults. A key that no
version of the response has (a misspelt field) raises UnknownFieldError instead of
being dropped. Hot responses (Fetch) are encoded by hand elsewhere.
"""

from __future__ import annotations

import datetime
import io
from collections import defaultdict
from dataclasses import MISSING, fields, is_dataclass
from functools import cache
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.serial._introspect import EntityField, EntityTupleField, classify_field

from .produce_request import decode_produce, encode_produce_response
from .request_check import check_request
from .request_rewrite import rewrite_request

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


class UnsupportedVersionError(Exception):
    pass


class UnknownFieldError(KeyError):
    """A response dict names a field that no version of its entity has."""


# Kafka's API versions are small numbers; a message's schemas are looked for up to this one.
_MAX_VERSION = 40


def _conv_error(v: Any) -> ErrorCode:
    return v if isinstance(v, ErrorCode) else ErrorCode(int(v))


def _conv_timedelta(v: Any) -> datetime.timedelta:
    return v if isinstance(v, datetime.timedelta) else datetime.timedelta(milliseconds=int(v))


def _conv_datetime(v: Any) -> datetime.datetime | None:
    if v is None or isinstance(v, datetime.datetime):
        return v
    v = int(v)
    return None if v < 0 else _EPOCH + datetime.timedelta(milliseconds=v)


_CONVERTERS = {
    "error_code": _conv_error,
    "timedelta_i32": _conv_timedelta,
    "timedelta_i64": _conv_timedelta,
    "datetime_i64": _conv_datetime,
}


@cache
def _plan(cls: type) -> list[tuple[str, Any, type | None, bool, bool]]:
    """Per field: (name, converter, nested entity class, is array, has default)."""
    plan = []
    for f in fields(cls):
        klass = classify_field(f)
        nested = klass.type_ if isinstance(klass, EntityField | EntityTupleField) else None
        conv = _CONVERTERS.get(f.metadata.get("kafka_type", ""))
        has_default = f.default is not MISSING or f.default_factory is not MISSING
        plan.append((f.name, conv, nested, klass.is_array, has_default))
    return plan


@cache
def _response_fields(api_key: int) -> tuple[dict[tuple[str, ...], frozenset[str]], dict[type, list[tuple[str, ...]]]]:
    """Every version's response schema of ``api_key``: the field names each nested place has in
    any version, and the places each entity class stands at."""
    names: dict[tuple[str, ...], set[str]] = defaultdict(set)
    places: dict[type, list[tuple[str, ...]]] = defaultdict(list)

    def walk(cls: type, place: tuple[str, ...]) -> None:
        places[cls].append(place)
        for name, _conv, nested, _is_array, _has_default in _plan(cls):
            names[place].add(name)
            if nested is not None:
                walk(nested, (*place, name))

    for version in range(_MAX_VERSION + 1):
        try:
            top = load_response_schema(api_key, version)
        except Exception:  # kio raises several index errors for a version it has not
            continue
        walk(top, ())
    return {k: frozenset(v) for k, v in names.items()}, dict(places)


@cache
def _known_fields(cls: type) -> frozenset[str] | None:
    """The keys a dict for response entity ``cls`` may have: its fields in any version of the
    response (a dict describes every version at once); None for a request's entity."""
    if not cls.__module__.endswith(".response"):
        return None
    names, places = _response_fields(cls.__api_key__)
    return frozenset().union(*(names[p] for p in places.get(cls, ())))


def build(cls: type, data: dict[str, Any]) -> Any:
    """Instantiate a kio entity from a plain dict (recursively). A response's dict may hold the
    fields of any of the response's versions (those this version lacks are dropped), nothing
    else: a key no version has raises UnknownFieldError."""
    known = _known_fields(cls)
    if known is not None and not known.issuperset(data):
        raise UnknownFieldError(f"{cls.__qualname__} has no field {sorted(set(data) - known)} in any version")
    kwargs: dict[str, Any] = {}
    for name, conv, nested, is_array, has_default in _plan(cls):
        if name not in data:
            if has_default:
                continue
            raise KeyError(f"{cls.__qualname__}.{name} is required")
        value = data[name]
        if nested is not None and value is not None:
            if is_array:
                value = tuple(v if is_dataclass(v) else build(nested, v) for v in value)
            elif not is_dataclass(value):
                value = build(nested, value)
        elif conv is not None:
            value = tuple(conv(v) for v in value) if is_array else conv(value)
        elif is_array and value is not None:
            value = tuple(value)
        kwargs[name] = value
    return cls(**kwargs)


@cache
def request_schema(api_key: int, version: int) -> type:
    try:
        return load_request_schema(api_key, version)
    except Exception as e:  # kio raises several index errors
        raise UnsupportedVersionError(f"no schema for api {api_key} v{version}") from e


@cache
def response_schema(api_key: int, version: int) -> type:
    return load_response_schema(api_key, version)


@cache
def _reader(cls: type):
    return entity_reader(cls)


@cache
def _writer(cls: type):
    return entity_writer(cls)


def decode_request_body(api_key: int, version: int, buf: bytes | memoryview, offset: int) -> Any:
    """Decode a request body starting at ``offset`` (trailing bytes are ignored, as Kafka does)."""
    if api_key == 0 and type(buf) is bytes:  # Produce v9+: by hand when plain (produce_request.py)
        request = decode_produce(version, buf, offset)
        if request is not None:
            return request
    cls = request_schema(api_key, version)
    # Declared lengths within the frame, no null where Kafka allows none: checked before kio's
    # native reader, which would try to allocate whatever a length says (request_check.py).
    check_request(api_key, version, buf, offset)
    try:
        value, _size = _reader(cls)(buf, offset)
    except (KeyError, ValueError):  # an unknown tagged field, a duration past timedelta's: Kafka
        value, _size = _reader(cls)(rewrite_request(cls, buf, offset), 0)  # reads them (request_rewrite.py)
    return value


def is_flexible_request(api_key: int, version: int) -> bool:
    return bool(request_schema(api_key, version).__flexible__)


def encode_entity(entity: Any) -> bytes:
    out = io.BytesIO()
    _writer(type(entity))(out, entity)
    return out.getvalue()


def encode_body(api_key: int, version: int, data: dict[str, Any]) -> bytes:
    """Encode a response body for ``version`` from a version-independent dict."""
    if api_key == 0:  # Produce v9+: by hand when plain (produce_request.py)
        body = encode_produce_response(version, data)
        if body is not None:
            return body
    return encode_entity(build(response_schema(api_key, version), data))


def ms(value: datetime.timedelta | int | None) -> int:
    """A kio timedelta field as integer milliseconds."""
    if value is None:
        return 0
    if isinstance(value, datetime.timedelta):
        return int(value.total_seconds() * 1000)
    return int(value)


def encode_request(api_key: int, version: int, correlation_id: int, client_id: str | None, data: dict[str, Any]) -> bytes:
    """A whole request frame (size prefix, header v1/v2, body): for our own tools and tests."""
    import struct

    flexible = is_flexible_request(api_key, version)
    cid = client_id.encode() if client_id is not None else None
    header = struct.pack(">hhi", api_key, version, correlation_id)
    header += struct.pack(">h", -1) if cid is None else struct.pack(">h", len(cid)) + cid
    if flexible:
        header += b"\0"
    body = encode_entity(build(request_schema(api_key, version), data))
    return struct.pack(">i", len(header) + len(body)) + header + body


def decode_response(api_key: int, version: int, payload: bytes) -> tuple[int, Any]:
    """(correlation id, body) of a response frame payload (without the size prefix)."""
    import struct

    (correlation_id,) = struct.unpack_from(">i", payload, 0)
    flexible = bool(response_schema(api_key, version).__flexible__) and api_key != 18
    offset = 4
    if flexible:
        offset += 1  # empty tagged fields in the response header
    value, _ = _reader(response_schema(api_key, version))(payload, offset)
    return correlation_id, value
