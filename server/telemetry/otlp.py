"""A small reader of OTLP ``MetricsData`` (opentelemetry/proto/metrics/v1), what a KIP-714
client pushes: just enough protobuf (varints, fixed 32/64-bit, length-delimited fields) to
take each data point's metric name, attributes and value. Histograms, exponential histograms
and summaries give ``<name>.count`` and ``<name>.sum``. Anything malformed raises OtlpError
(answered as Kafka's INVALID_RECORD)."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

from kafka_sidecar.protocol.varint import VarintError, read_uvarint

VARINT, I64, LEN, I32 = 0, 1, 2, 5
_DOUBLE, _I64S, _U64 = struct.Struct("<d"), struct.Struct("<q"), struct.Struct("<Q")


class OtlpError(ValueError):
    pass


@dataclass(frozen=True)
class DataPoint:
    name: str
    attributes: tuple[tuple[str, str], ...]
    value: float


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    try:
        return read_uvarint(buf, pos, -1, 10)
    except VarintError as e:
        raise OtlpError(str(e)) from None


def fields(buf: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) of each field of one message: an int for varints and
    fixed-width fields (raw little-endian bits), bytes for length-delimited ones."""
    pos, end = 0, len(buf)
    while pos < end:
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise OtlpError("field number 0")
        if wire == VARINT:
            value, pos = _varint(buf, pos)
            yield number, wire, value
        elif wire == I64 or wire == I32:
            size = 8 if wire == I64 else 4
            if pos + size > end:
                raise OtlpError("truncated fixed-width field")
            yield number, wire, int.from_bytes(buf[pos:pos + size], "little")
            pos += size
        elif wire == LEN:
            size, pos = _varint(buf, pos)
            if pos + size > end:
                raise OtlpError("length-delimited field past the end")
            yield number, wire, bytes(buf[pos:pos + size])
            pos += size
        else:
            raise OtlpError(f"unsupported wire type {wire}")


def _sub(value: int | bytes) -> bytes:
    if not isinstance(value, bytes):
        raise OtlpError("expected a length-delimited field")
    return value


def _text(value: int | bytes) -> str:
    try:
        return _sub(value).decode()
    except UnicodeDecodeError:
        raise OtlpError("invalid UTF-8") from None


def _double(bits: int) -> float:
    return _DOUBLE.unpack(_U64.pack(bits))[0]


def _any_value(buf: bytes) -> str:
    """AnyValue as text: string, bool, int, double (others by their type name)."""
    for number, wire, value in fields(buf):
        if number == 1 and wire == LEN:
            return _text(value)
        if number == 2 and wire == VARINT:
            return "true" if value else "false"
        if number == 3 and wire == VARINT:
            assert isinstance(value, int)
            return str(value - (1 << 64) if value >= 1 << 63 else value)
        if number == 4 and wire == I64:
            assert isinstance(value, int)
            return repr(_double(value))
    return ""


def _key_value(buf: bytes) -> tuple[str, str]:
    key, text = "", ""
    for number, wire, value in fields(buf):
        if number == 1 and wire == LEN:
            key = _text(value)
        elif number == 2 and wire == LEN:
            text = _any_value(_sub(value))
    return key, text


def _number_point(buf: bytes, name: str) -> list[DataPoint]:
    attrs: list[tuple[str, str]] = []
    number_value: float | None = None
    for number, wire, value in fields(buf):
        if number == 7 and wire == LEN:
            attrs.append(_key_value(_sub(value)))
        elif number == 4 and wire == I64:
            number_value = _double(int(value))  # as_double
        elif number == 6 and wire == I64:
            number_value = float(_I64S.unpack(_U64.pack(int(value)))[0])  # as_int
    return [] if number_value is None else [DataPoint(name, tuple(sorted(attrs)), number_value)]


def _count_sum_point(buf: bytes, name: str, attributes_field: int) -> list[DataPoint]:
    """Histogram (attributes 9), exponential histogram (1) and summary (7) points: count (4) and sum (5)."""
    attrs: list[tuple[str, str]] = []
    count: float | None = None
    total: float | None = None
    for number, wire, value in fields(buf):
        if number == attributes_field and wire == LEN:
            attrs.append(_key_value(_sub(value)))
        elif number == 4 and wire == I64:
            count = float(int(value))
        elif number == 5 and wire == I64:
            total = _double(int(value))
    key = tuple(sorted(attrs))
    out = [] if count is None else [DataPoint(name + ".count", key, count)]
    return out + ([] if total is None else [DataPoint(name + ".sum", key, total)])


_GAUGE, _SUM, _HISTOGRAM, _EXP_HISTOGRAM, _SUMMARY = 5, 7, 9, 10, 11
_COUNT_SUM_ATTRIBUTES = {_HISTOGRAM: 9, _EXP_HISTOGRAM: 1, _SUMMARY: 7}


def _metric(buf: bytes) -> list[DataPoint]:
    name = ""
    bodies: list[tuple[int, bytes]] = []
    for number, wire, value in fields(buf):
        if number == 1 and wire == LEN:
            name = _text(value)
        elif number in (_GAUGE, _SUM, _HISTOGRAM, _EXP_HISTOGRAM, _SUMMARY) and wire == LEN:
            bodies.append((number, _sub(value)))
    out: list[DataPoint] = []
    for kind, body in bodies:
        for number, wire, value in fields(body):
            if number != 1 or wire != LEN:
                continue
            if kind in (_GAUGE, _SUM):
                out += _number_point(_sub(value), name)
            else:
                out += _count_sum_point(_sub(value), name, _COUNT_SUM_ATTRIBUTES[kind])
    return out


def decode_metrics_data(buf: bytes) -> list[DataPoint]:
    """Every data point of a MetricsData message (resource_metrics 1 > scope_metrics 2 > metrics 2)."""
    out: list[DataPoint] = []
    for number, wire, value in fields(buf):
        if number != 1:
            continue
        if wire != LEN:
            raise OtlpError("resource_metrics is not a message")
        for n2, w2, scope in fields(_sub(value)):
            if n2 != 2 or w2 != LEN:
                continue
            for n3, w3, metric in fields(_sub(scope)):
                if n3 == 2 and w3 == LEN:
                    out += _metric(_sub(metric))
    return out


# ---- writing (for tests and tools: what a client would push) ---------------------------------


def _key(number: int, wire: int) -> bytes:
    return _uvarint(number << 3 | wire)


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _len_field(number: int, body: bytes) -> bytes:
    return _key(number, LEN) + _uvarint(len(body)) + body


def encode_gauge_metrics_data(points: list[DataPoint]) -> bytes:
    """MetricsData with one gauge metric per point (doubles, string attributes)."""
    metrics = b""
    for p in points:
        dp = b"".join(_len_field(7, _len_field(1, k.encode()) + _len_field(2, _len_field(1, v.encode())))
                      for k, v in p.attributes)
        dp += _key(4, I64) + _DOUBLE.pack(p.value)
        metrics += _len_field(2, _len_field(1, p.name.encode()) + _len_field(_GAUGE, _len_field(1, dp)))
    return _len_field(1, _len_field(2, metrics))
