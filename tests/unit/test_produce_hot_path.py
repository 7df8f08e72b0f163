"""The Produce hot path's shortcuts give what the general code gives (issue #18 part 3)."""

from __future__ import annotations

import random
import struct
from collections import defaultdict

from kafka_sidecar.protocol.connection import KafkaChannel, NeedData, RequestReceived
from kafka_sidecar.protocol.framing import (
    frame,
    framed_response,
    parse_request_header,
    response_header,
)
from kafka_sidecar.protocol.messages import build, encode_entity, response_schema
from kafka_sidecar.protocol.produce_request import encode_produce_response
from kafka_sidecar.server.metrics import Metrics, _count_errors


def _partition(rng: random.Random) -> dict:
    record_errors = rng.choice([[], [{"batch_index": 0, "batch_index_error_message": rng.choice([None, "bad"])}]])
    return {"index": rng.randint(0, 9), "error_code": rng.choice([0, 0, 2, 87, 10]), "base_offset": rng.randint(-1, 9),
            "log_append_time": rng.choice([-1, 1_700_000_000_000]), "log_start_offset": rng.randint(-1, 9),
            "record_errors": record_errors, "error_message": rng.choice([None, None, "oops"])}


def _answer(rng: random.Random) -> dict:
    return {"responses": [{"name": rng.choice(["t", "topic-é"]), "topic_id": None,
                           "partition_responses": [_partition(rng) for _ in range(rng.randint(0, 3))]}
                          for _ in range(rng.randint(0, 3))],
            "throttle_time": rng.choice([0, 50])}


def test_produce_error_count_matches_the_general_walk() -> None:
    rng = random.Random(18)
    for _ in range(500):
        answer = _answer(rng)
        metrics = Metrics()
        metrics.observe_request("Produce", 0.001, answer)
        expected: dict[int, int] = defaultdict(int)
        _count_errors(answer, expected)
        assert dict(metrics.apis["Produce"].errors) == dict(expected)


def test_other_shapes_still_take_the_general_walk() -> None:
    answer = {"responses": [], "throttle_time": 0, "error_code": 58}  # not Produce's two keys
    metrics = Metrics()
    metrics.observe_request("Produce", 0.001, answer)
    assert dict(metrics.apis["Produce"].errors) == {58: 1}


def test_plain_partition_answer_is_the_general_encoding() -> None:
    """The no-errors shortcut and the cached topic names write what the general loop writes."""
    rng = random.Random(7)
    for version in range(9, 13):
        for _ in range(200):
            answer = _answer(rng)
            first = encode_produce_response(version, answer)
            again = encode_produce_response(version, answer)  # topic names from the cache now
            assert first is not None and first == again
            assert first == encode_entity(build(response_schema(0, version), answer))


def test_framed_response_is_frame_of_header_and_body() -> None:
    for flexible in (False, True):
        for body in (b"", b"x", bytes(range(200))):
            assert framed_response(12345, flexible, body) == frame([response_header(12345, flexible), body])


def _request(correlation_id: int, body: bytes = b"\x00\x00") -> bytes:
    payload = struct.pack(">hhih", 0, 11, correlation_id, 1) + b"c" + b"\x00" + body
    return struct.pack(">i", len(payload)) + payload


def test_whole_frames_in_one_chunk_come_out_in_order_with_the_rest_kept() -> None:
    channel = KafkaChannel(1 << 20)
    data = _request(1) + _request(2, b"\x01" * 300) + _request(3)[:5]
    channel.receive_data(data)
    first = channel.next_event()
    assert first == RequestReceived(0, 11, 1, _request(1)[4:])
    channel.send_response([struct.pack(">ii", 4, 1)])
    second = channel.next_event()
    assert second == RequestReceived(0, 11, 2, _request(2, b"\x01" * 300)[4:])
    channel.send_response([struct.pack(">ii", 4, 2)])
    assert channel.buffered == 5
    need = channel.next_event()
    assert isinstance(need, NeedData) and need.bytes_needed == len(_request(3)) - 4 - 1
    channel.receive_data(_request(3)[5:])
    third = channel.next_event()
    assert isinstance(third, RequestReceived) and third.correlation_id == 3


def test_request_header_without_tagged_fields_reads_as_the_general_loop() -> None:
    frame_bytes = _request(9)[4:]
    header = parse_request_header(frame_bytes, True)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (0, 11, 9, "c")
    assert header.body_offset == 2 + 2 + 4 + 2 + 1 + 1
    tagged = frame_bytes[:11] + b"\x01\x05\x02ab" + frame_bytes[12:]  # one tagged field (tag 5, 2 bytes)
    assert parse_request_header(tagged, True).body_offset == 11 + 5
