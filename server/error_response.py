"""A request's error response: what Kafka answers when a handler fails unexpectedly.

Kafka's KafkaApis catches any exception a handler throws (``requestHelper.handleError``) and
answers ``request.getErrorResponse(e)``: UNKNOWN_SERVER_ERROR for an unexpected exception, in
the shape each request type defines: the top-level error code where the response has one,
else the request's topics, partitions, groups or resources mirrored with the error on each.
This builds that shape generically from the request and the response schema (kio's classes),
so every advertised API has one; a connection is never closed for a handler's bug.
"""

from __future__ import annotations

import datetime
import uuid
from dataclasses import fields, is_dataclass
from functools import cache
from typing import Any

from kio.index import load_response_schema
from kio.serial._introspect import EntityField, EntityTupleField, classify_field, is_optional

_ZERO: dict[str, Any] = {
    "bool": False, "string": "", "bytes": b"", "records": None, "uuid": uuid.UUID(int=0), "float64": 0.0,
    "timedelta_i32": datetime.timedelta(0), "timedelta_i64": datetime.timedelta(0),
    # Kafka's -1 "no timestamp" (the codec writes this datetime as -1 ms).
    "datetime_i64": datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC) - datetime.timedelta(milliseconds=1),
}
# Names under which a request's item names what the answer's item is about.
_KEYS = ("name", "topic", "topic_name", "group_id", "transactional_id", "key", "resource_name")


@cache
def _fields(cls: type) -> list[tuple[str, str, type | None, bool, bool]]:
    """(name, kafka type, entity class, array, nullable) per field of a schema class."""
    out = []
    for f in fields(cls):
        klass = classify_field(f)
        entity = klass.type_ if isinstance(klass, EntityField | EntityTupleField) else None
        out.append((f.name, f.metadata.get("kafka_type", ""), entity, klass.is_array, is_optional(f)))
    return out


def _value(kind: str, nullable: bool, error: int) -> Any:
    if kind == "error_code":
        return error
    if kind in _ZERO:
        return _ZERO[kind]
    if kind == "string" and nullable:
        return None
    return 0  # integers; a message Kafka leaves out is its default


def _attributes(item: Any) -> dict[str, Any]:
    """A request entity's fields: kio's dataclasses, or the hand decoders' slotted classes (Produce)."""
    if is_dataclass(item):
        return {f.name: getattr(item, f.name) for f in fields(item)}
    return {name: getattr(item, name) for name in getattr(type(item), "__slots__", ()) if hasattr(item, name)}


def _request_arrays(request: Any) -> list[tuple[str, Any]]:
    return [(k, v) for k, v in _attributes(request).items() if isinstance(v, tuple)]


def _key_of(item: Any) -> dict[str, Any]:
    """What a request item says of itself that the answer's item repeats (name, id, index)."""
    if isinstance(item, str):
        return {k: item for k in _KEYS}
    if isinstance(item, int):
        return {"partition_index": item, "partition": item}
    out = {k: v for k, v in _attributes(item).items() if not isinstance(v, tuple)}
    if "name" in out:
        out.setdefault("topic", out["name"])
    if "index" in out:
        out.setdefault("partition_index", out["index"])
    return out


def _entity(cls: type, source: Any, error: int) -> dict[str, Any]:
    """A response entity: the request item's matching fields, error codes set, the rest empty."""
    keys = _key_of(source) if source is not None else {}
    arrays = _request_arrays(source) if source is not None else []
    out: dict[str, Any] = {}
    resp_arrays = [f for f in _fields(cls) if f[3]]
    for name, kind, entity, is_array, nullable in _fields(cls):
        if is_array:
            items: Any = ()
            if entity is not None and arrays:
                match = next((a for a in arrays if a[0] == name), None)
                if match is None and name == resp_arrays[0][0]:
                    match = arrays[0]  # the answer's main list mirrors the request's (topic_data -> responses)
                if match is not None:
                    items = match[1]
            out[name] = [_entity(entity, item, error) for item in items] if entity is not None else []
        elif entity is not None:
            out[name] = None if nullable else _entity(entity, None, error)
        elif name in keys and kind != "error_code" and keys[name] is not None:
            out[name] = keys[name]
        else:
            out[name] = _value(kind, nullable, error)
    return out


def error_response(api_key: int, version: int, request: Any, error: int) -> dict[str, Any]:
    """Kafka's getErrorResponse for this request, as the dict a handler returns."""
    cls = load_response_schema(api_key, version)
    top = {name for name, *_ in _fields(cls)}
    if "error_code" in top:  # the top-level error says it all: the lists stay empty
        return _entity(cls, None, error)
    return _entity(cls, request, error)
