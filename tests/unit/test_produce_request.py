"""The hand-written Produce v9-v13 codec (protocol/produce_request.py) against kio's, byte for byte."""

from __future__ import annotations

import random
import uuid

import pytest
from kafka_sidecar.protocol import messages
from kafka_sidecar.protocol.framing import parse_request_header
from kafka_sidecar.protocol.messages import (
    build,
    encode_entity,
    encode_request,
    request_schema,
    response_schema,
)
from kafka_sidecar.protocol.produce_request import decode_produce, encode_produce_response
from kafka_sidecar.protocol.records import encode_columns

VERSIONS = range(9, 14)


def _batch(n: int, size: int) -> bytes:
    return encode_columns(list(range(n)), [1_700_000_000_000 + i for i in range(n)], [None] * n,
                          [bytes([i % 256]) * size for i in range(n)], [[] for _ in range(n)])


def _request(version: int, rng: random.Random) -> dict:
    topics = []
    for t in range(rng.randint(0, 3)):
        parts = [{"index": rng.randint(-1, 50), "records": rng.choice([None, b"", _batch(rng.randint(1, 5), rng.randint(0, 300))])}
                 for _ in range(rng.randint(0, 3))]
        topic = {"topic_id": uuid.uuid4()} if version >= 13 else {"name": rng.choice(["t", "topic-é", "x" * 200]) + str(t)}
        topics.append({**topic, "partition_data": parts})
    return {"transactional_id": rng.choice([None, "", "txn-1", "ü" * 70]), "acks": rng.choice([-1, 0, 1, 2]),
            "timeout": rng.randint(0, 2**31 - 1), "topic_data": topics}


def _kio(version: int, body: bytes, offset: int):
    return messages._reader(request_schema(0, version))(body, offset)[0]


def _same(version: int, fast, slow) -> None:
    assert fast.transactional_id == slow.transactional_id
    assert fast.acks == slow.acks and fast.timeout == slow.timeout
    assert len(fast.topic_data) == len(slow.topic_data)
    for ft, st in zip(fast.topic_data, slow.topic_data, strict=True):
        assert getattr(ft, "name", None) == getattr(st, "name", None)
        assert getattr(ft, "topic_id", None) == getattr(st, "topic_id", None)
        assert [(p.index, p.records) for p in ft.partition_data] == [(p.index, p.records) for p in st.partition_data]


@pytest.mark.parametrize("version", VERSIONS)
def test_decode_matches_kio(version: int) -> None:
    rng = random.Random(version)
    for _ in range(200):
        frame = encode_request(0, version, 7, "client", _request(version, rng))[4:]
        offset = parse_request_header(frame, True).body_offset
        fast = decode_produce(version, frame, offset)
        assert fast is not None
        _same(version, fast, _kio(version, frame, offset))


@pytest.mark.parametrize("version", [9, 13])
def test_truncated_and_mutated_frames_fall_back_or_agree(version: int) -> None:
    """Whatever the fast path accepts, kio reads the same; anything else is left to kio."""
    rng = random.Random(100 + version)
    frame = encode_request(0, version, 7, "c", _request(version, random.Random(3)))[4:]
    offset = parse_request_header(frame, True).body_offset
    for cut in range(offset, len(frame)):
        assert decode_produce(version, frame[:cut], offset) is None
    for _ in range(2000):
        mutated = bytearray(frame)
        for _ in range(rng.randint(1, 3)):
            mutated[rng.randrange(offset, len(mutated))] = rng.randrange(256)
        fast = decode_produce(version, bytes(mutated), offset)
        if fast is not None:
            _same(version, fast, _kio(version, bytes(mutated), offset))


def test_tagged_fields_null_arrays_and_old_versions_fall_back() -> None:
    frame = encode_request(0, 9, 1, "c", {"transactional_id": None, "acks": 1, "timeout": 1000, "topic_data": [
        {"name": "t", "partition_data": [{"index": 0, "records": b""}]}]})[4:]
    offset = parse_request_header(frame, True).body_offset
    assert decode_produce(9, frame, offset) is not None
    assert decode_produce(9, frame[:-1] + b"\x01", offset) is None  # a top-level tagged field
    assert decode_produce(8, frame, offset) is None  # not flexible: kio's
    null_topics = frame[:offset] + frame[offset:offset + 7] + b"\x00\x00"
    assert decode_produce(9, null_topics, offset) is None
    assert decode_produce(9, frame + b"trailing", offset) is not None  # ignored, as Kafka does


def _partition(rng: random.Random) -> dict:
    errors = [{"batch_index": rng.randint(0, 9), "batch_index_error_message": rng.choice([None, "bad", "é" * 200])}
              for _ in range(rng.randint(0, 2))] if rng.random() < 0.3 else []
    return {"index": rng.randint(0, 99), "error_code": rng.choice([0, 2, 6, 87]), "base_offset": rng.randint(-1, 2**40),
            "log_append_time": rng.choice([-1, 0, 1_700_000_000_123]), "log_start_offset": rng.randint(-1, 2**40),
            "record_errors": errors, "error_message": rng.choice([None, "", "Partition was not added"])}


@pytest.mark.parametrize("version", VERSIONS)
def test_response_matches_kio(version: int) -> None:
    rng = random.Random(version)
    for _ in range(200):
        data = {"responses": [{"name": f"topic-{t}", "topic_id": uuid.uuid4() if rng.random() < 0.8 else None,
                               "partition_responses": [_partition(rng) for _ in range(rng.randint(0, 3))]}
                              for t in range(rng.randint(0, 3))],
                "throttle_time": rng.choice([0, 5, 30000])}
        fast = encode_produce_response(version, data)
        assert fast == encode_entity(build(response_schema(0, version), data))
        assert messages.encode_body(0, version, data) == fast


def test_response_with_fields_it_does_not_know_falls_back() -> None:
    data = {"responses": [], "throttle_time": 0, "node_endpoints": []}
    assert encode_produce_response(10, data) is None
    assert encode_produce_response(8, {"responses": [], "throttle_time": 0}) is None
