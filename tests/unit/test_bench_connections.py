"""bench/connections.py's hand-made reads of answers: the error code's place and the next offset."""

from __future__ import annotations

import struct

from kafka_sidecar.protocol.framing import parse_request_header
from kafka_sidecar.protocol.messages import decode_request_body, encode_body
from kafka_sidecar.protocol.records import encode_columns

from bench.connections import next_offset, produce_error_offset, produce_frame


def test_produce_error_offset_points_at_the_partition_error_code() -> None:
    for topic in ("t", "conn500-123456789"):
        body = encode_body(0, 11, {"responses": [{"name": topic, "topic_id": None, "partition_responses": [{
            "index": 3, "error_code": 6, "base_offset": -1, "log_append_time": -1, "log_start_offset": -1,
            "record_errors": [], "error_message": None}]}], "throttle_time": 0})
        payload = struct.pack(">i", 42) + b"\0" + body
        assert struct.unpack_from(">h", payload, produce_error_offset(topic))[0] == 6


def test_produce_frame_is_a_produce_v11_request_with_one_batch() -> None:
    frame = produce_frame("topic", 5, 10, 100, 1)
    assert struct.unpack_from(">i", frame)[0] == len(frame) - 4
    payload = frame[4:]
    header = parse_request_header(payload, True)
    request = decode_request_body(0, 11, payload, header.body_offset)
    assert request.acks == 1
    [t] = request.topic_data
    [p] = t.partition_data
    assert (t.name, p.index) == ("topic", 5)
    assert next_offset(p.records, 0) == (10, len(p.records))


def test_next_offset_stops_at_a_partial_batch() -> None:
    a = encode_columns([100, 101], [0, 0], [None, None], [b"a", b"b"], [[], []], base_offset=100)
    b = encode_columns([102], [0], [None], [b"c"], [[]], base_offset=102)
    assert next_offset(a + b, 100) == (103, len(a) + len(b))
    assert next_offset(a + b[:20], 100) == (102, len(a))
    assert next_offset(b"", 7) == (7, 0)
