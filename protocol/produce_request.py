"""Produce v9-v13 (the flexible versions) decoded and answered by hand: the hot path.

kio decodes a Produce request into dataclasses and ``encode_body`` builds a kio entity from
the handler's dict before writing it; for a one-partition request that is most of the Python
time a request costs outside the log (measured with py-spy at 100 producer connections).
Here the request is read with ``struct`` into slotted objects with kio's attribute names, and
the answer is written straight from the handler's dict.

Only the plain form is taken: any tagged field, a null where Kafka allows none, a length
past the end of the frame, a string that is not UTF-8, or a response field this encoder does
not know, and the caller falls back to kio (``decode_produce`` / ``encode_produce_response``
return None), so errors and odd inputs are answered exactly as before. Trailing bytes after
the body are ignored, as Kafka (and kio) do.
"""

from __future__ import annotations

import datetime
import struct
import uuid
from typing import Any

from .records import encode_uvarint as _length
from .varint import VarintError, read_uvarint

FIRST_FLEXIBLE = 9
FIRST_TOPIC_ID = 13
MAX_VERSION = 13

_HI = struct.Struct(">hi")  # acks, timeout
_I32 = struct.Struct(">i")
_PARTITION_HEAD = struct.Struct(">ihqqq")  # index, error, base offset, log append time, log start offset
_ZERO_UUID = uuid.UUID(int=0)
_NO_TAGS = b"\x00"
_PLAIN_PARTITION_TAIL = b"\x01\x00\x00"  # no record errors, a null error message, no tagged fields


class PartitionProduceData:
    """One partition's records (kio's ``PartitionProduceData`` attribute names)."""

    __slots__ = ("index", "records")

    def __init__(self, index: int, records: bytes | None) -> None:
        self.index = index
        self.records = records


class TopicProduceData:
    """A topic's partitions by name (v9-v12); ``topic_id`` reads None, as ``getattr(t, "topic_id",
    None)`` does on kio's object (a class attribute: an unset slot would raise and catch an
    AttributeError on every such read, 3% of a request's samples)."""

    __slots__ = ("name", "partition_data")
    topic_id = None

    def __init__(self, name: str, partition_data: tuple[PartitionProduceData, ...]) -> None:
        self.name = name
        self.partition_data = partition_data


class TopicIdProduceData:
    """A topic's partitions by topic id (v13)."""

    __slots__ = ("partition_data", "topic_id")
    name = None

    def __init__(self, topic_id: uuid.UUID, partition_data: tuple[PartitionProduceData, ...]) -> None:
        self.topic_id = topic_id
        self.partition_data = partition_data


class ProduceRequest:
    """The request body (kio's ``ProduceRequest`` attribute names and value types).

    ``timeout`` is kio's timedelta, made when read: the broker never waits for replicas, so
    nothing reads it per request (a timedelta per request was 1.4% of a request's samples)."""

    __slots__ = ("acks", "timeout_ms", "topic_data", "transactional_id")

    def __init__(self, transactional_id: str | None, acks: int, timeout_ms: int,
                 topic_data: tuple[TopicProduceData | TopicIdProduceData, ...]) -> None:
        self.transactional_id = transactional_id
        self.acks = acks
        self.timeout_ms = timeout_ms
        self.topic_data = topic_data

    @property
    def timeout(self) -> datetime.timedelta:
        return datetime.timedelta(milliseconds=self.timeout_ms)


class _Fallback(Exception):
    """Not the plain form: let kio decode it (and say what is wrong, if anything is)."""


def decode_produce(version: int, buf: bytes, pos: int) -> ProduceRequest | None:
    """The body of a Produce v9-v13 request at ``pos``, or None to let kio decode it."""
    if not FIRST_FLEXIBLE <= version <= MAX_VERSION:
        return None
    try:
        return _decode(version, buf, pos)
    except (_Fallback, VarintError, IndexError, struct.error, UnicodeDecodeError):
        return None


def _decode(version: int, buf: bytes, pos: int) -> ProduceRequest:
    # Each length is a uvarint, nearly always of one byte: read in line, read_uvarint otherwise (a
    # read past the end raises IndexError: the caller's fallback, as read_uvarint's VarintError).
    end = len(buf)
    n = buf[pos]
    if n < 0x80:
        pos += 1
    else:
        n, pos = read_uvarint(buf, pos, end)
    transactional_id = None
    if n:
        stop = pos + n - 1
        if stop > end:
            raise _Fallback
        transactional_id = buf[pos:stop].decode()
        pos = stop
    if pos + 6 > end:
        raise _Fallback
    acks, timeout_ms = _HI.unpack_from(buf, pos)
    pos += 6
    count = buf[pos]
    if count < 0x80:
        pos += 1
    else:
        count, pos = read_uvarint(buf, pos, end)
    if not count:  # a null array: refused, in kio's words
        raise _Fallback
    by_id = version >= FIRST_TOPIC_ID
    topics: list[TopicProduceData | TopicIdProduceData] = []
    for _ in range(count - 1):
        name = topic_id = None
        if by_id:
            if pos + 16 > end:
                raise _Fallback
            topic_id = uuid.UUID(bytes=buf[pos:pos + 16])
            pos += 16
            if topic_id == _ZERO_UUID:
                raise _Fallback  # kio's reading of the zero id is kio's
        else:
            n = buf[pos]
            if n < 0x80:
                pos += 1
            else:
                n, pos = read_uvarint(buf, pos, end)
            stop = pos + n - 1
            if not n or stop > end:
                raise _Fallback
            name = buf[pos:stop].decode()
            pos = stop
        pcount = buf[pos]
        if pcount < 0x80:
            pos += 1
        else:
            pcount, pos = read_uvarint(buf, pos, end)
        if not pcount:
            raise _Fallback
        partitions = []
        for _ in range(pcount - 1):
            if pos + 4 > end:
                raise _Fallback
            (index,) = _I32.unpack_from(buf, pos)
            n, pos = read_uvarint(buf, pos + 4, end)
            records = None
            if n:
                stop = pos + n - 1
                if stop > end:
                    raise _Fallback
                records = buf[pos:stop]
                pos = stop
            if pos >= end or buf[pos]:  # the partition's tagged fields: none
                raise _Fallback
            pos += 1
            partitions.append(PartitionProduceData(index, records))
        if pos >= end or buf[pos]:
            raise _Fallback
        pos += 1
        if topic_id is not None:
            topics.append(TopicIdProduceData(topic_id, tuple(partitions)))
        else:
            assert name is not None
            topics.append(TopicProduceData(name, tuple(partitions)))
    if pos >= end or buf[pos]:
        raise _Fallback
    return ProduceRequest(transactional_id, acks, timeout_ms, tuple(topics))


# ---- the answer ------------------------------------------------------------------------------

_TOP_KEYS = frozenset(("responses", "throttle_time"))
_TOPIC_KEYS = frozenset(("name", "topic_id", "partition_responses"))
_PARTITION_KEYS = frozenset(("index", "error_code", "base_offset", "log_append_time", "log_start_offset",
                             "record_errors", "error_message"))
_RECORD_ERROR_KEYS = frozenset(("batch_index", "batch_index_error_message"))


def _compact_string(s: str | None) -> bytes:
    if s is None:
        return _NO_TAGS  # null
    data = s.encode()
    return _length(len(data) + 1) + data


# Topic names as compact strings, encoded once (a name is answered on every request to it);
# cleared when full, so a client naming endless topics costs memory up to the bound only.
_NAMES: dict[str, bytes] = {}
_NAMES_MAX = 10_000


def _topic_name(name: str) -> bytes:
    data = _NAMES.get(name)
    if data is None:
        if len(_NAMES) >= _NAMES_MAX:
            _NAMES.clear()
        data = _NAMES[name] = _compact_string(name)
    return data


def _ms(value: Any) -> int:
    """A datetime_i64 field as kio writes it: a negative or absent time is -1."""
    if isinstance(value, datetime.datetime):
        return int((value - datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)).total_seconds() * 1000)
    value = int(value)
    return value if value >= 0 else -1


def encode_produce_response(version: int, data: dict[str, Any]) -> bytes | None:
    """The body of a Produce v9-v13 answer from the handler's dict, or None to let kio encode it."""
    if not FIRST_FLEXIBLE <= version <= MAX_VERSION or data.keys() != _TOP_KEYS:
        return None
    by_id = version >= FIRST_TOPIC_ID
    out = [_length(len(data["responses"]) + 1)]
    for t in data["responses"]:
        if t.keys() != _TOPIC_KEYS:
            return None
        if by_id:
            topic_id = t.get("topic_id")
            out.append((topic_id or _ZERO_UUID).bytes)
        else:
            name = t["name"]
            out.append(_topic_name(name) if name.__class__ is str else _compact_string(name))
        parts = t["partition_responses"]
        out.append(_length(len(parts) + 1))
        for p in parts:
            if p.keys() != _PARTITION_KEYS:
                return None
            log_append_time = p["log_append_time"]
            out.append(_PARTITION_HEAD.pack(
                p["index"], int(p["error_code"]), p["base_offset"],
                log_append_time if log_append_time.__class__ is int and log_append_time >= -1 else _ms(log_append_time),
                p["log_start_offset"]))
            record_errors = p["record_errors"]
            if not record_errors and p["error_message"] is None:  # the usual answer: no errors, no message
                out.append(_PLAIN_PARTITION_TAIL)
                continue
            record_errors = record_errors or ()
            out.append(_length(len(record_errors) + 1))
            for e in record_errors:
                if e.keys() != _RECORD_ERROR_KEYS:
                    return None
                out.append(_I32.pack(e["batch_index"]) + _compact_string(e["batch_index_error_message"]) + _NO_TAGS)
            out.append(_compact_string(p["error_message"]))
            out.append(_NO_TAGS)
        out.append(_NO_TAGS)
    throttle = data["throttle_time"]
    if isinstance(throttle, datetime.timedelta):
        throttle = int(throttle.total_seconds() * 1000)
    out.append(_I32.pack(throttle))
    out.append(_NO_TAGS)
    return b"".join(out)
