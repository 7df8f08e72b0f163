"""KafkaChannel (protocol/connection.py) without sockets: framing, limits, the SASL gate and
request/response ordering, fed bytes directly. The gate is the real SASL authenticator
(server/security/sasl.py) behind the server's adapter."""

from __future__ import annotations

import struct

import pytest
from kafka_sidecar.protocol.connection import (
    ConnectionClosed,
    KafkaChannel,
    LocalProtocolError,
    NeedData,
    Paused,
    ProtocolError,
    RawSaslTokenReceived,
    RequestReceived,
    RequestRejected,
)
from kafka_sidecar.server.connection import SaslGate
from kafka_sidecar.server.security.sasl import SaslServerAuthenticator, SaslSettings

API_VERSIONS, METADATA, PRODUCE, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 3, 0, 17, 36


def request(api_key: int, version: int, correlation_id: int, body: bytes = b"") -> bytes:
    """A request frame's payload: header v1 (null client id) and a body."""
    return struct.pack(">hhih", api_key, version, correlation_id, -1) + body


def framed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def answer(correlation_id: int, body: bytes = b"") -> list[bytes]:
    """A response as the dispatcher builds it: size prefix, correlation id, body."""
    return [framed(struct.pack(">i", correlation_id) + body)]


def sasl_channel(max_request_size: int = 10_000, max_receive_size: int = 1000) -> tuple[KafkaChannel, SaslServerAuthenticator]:
    settings = SaslSettings(listener="SASL_PLAINTEXT", mechanisms=["PLAIN"], plain_users={"alice": "secret"},
                            max_receive_size=max_receive_size, failed_delay_ms=0)
    sasl = SaslServerAuthenticator(settings, "127.0.0.1:1")
    return KafkaChannel(max_request_size, SaslGate(sasl)), sasl


# ---- framing ----------------------------------------------------------------------------------


def test_a_frame_fed_byte_by_byte() -> None:
    channel = KafkaChannel(1000)
    payload = request(METADATA, 12, 7, b"body")
    data = framed(payload)
    needed = []
    for i in range(len(data)):
        event = channel.next_event()
        assert isinstance(event, NeedData)
        needed.append(event.bytes_needed)
        channel.receive_data(data[i : i + 1])
    assert needed == [4, 3, 2, 1, *range(len(payload), 0, -1)]
    assert channel.next_event() == RequestReceived(METADATA, 12, 7, payload)
    assert channel.muted


def test_several_frames_in_one_chunk_come_out_one_at_a_time() -> None:
    channel = KafkaChannel(1000)
    frames = [request(METADATA, 12, c, bytes([c]) * c) for c in (1, 2, 3)]
    channel.receive_data(b"".join(framed(f) for f in frames))
    for c, payload in zip((1, 2, 3), frames, strict=True):
        event = channel.next_event()
        assert event == RequestReceived(METADATA, 12, c, payload)
        assert channel.next_event() == Paused()
        channel.send_response(answer(c))
    assert channel.next_event() == NeedData(4)


def test_a_frame_over_the_limit_is_refused_on_its_size_prefix() -> None:
    channel = KafkaChannel(100)
    channel.receive_data(struct.pack(">i", 101))  # no body sent
    assert channel.next_event() == ProtocolError("frame size 101 is outside 0..100 (socket.request.max.bytes)")
    assert channel.closed
    assert channel.next_event() == ConnectionClosed()


def test_a_frame_at_the_limit_is_read() -> None:
    channel = KafkaChannel(100)
    payload = request(PRODUCE, 9, 1, b"x" * (100 - 10))
    assert len(payload) == 100
    channel.receive_data(framed(payload))
    assert channel.next_event() == RequestReceived(PRODUCE, 9, 1, payload)


def test_negative_and_zero_sizes() -> None:
    channel = KafkaChannel(100)
    channel.receive_data(struct.pack(">i", -1) + b"whatever")
    assert channel.next_event() == ProtocolError("frame size -1 is outside 0..100 (socket.request.max.bytes)")

    channel = KafkaChannel(100)
    channel.receive_data(struct.pack(">i", 0))
    assert channel.next_event() == ProtocolError("request of 0 bytes is shorter than a request header")

    channel = KafkaChannel(100)
    channel.receive_data(framed(b"\x00\x03\x00"))  # too short for api key, version and correlation id
    assert channel.next_event() == ProtocolError("request of 3 bytes is shorter than a request header")


def test_end_of_stream() -> None:
    channel = KafkaChannel(100)
    channel.receive_data(b"")
    assert channel.next_event() == ConnectionClosed()

    channel = KafkaChannel(100)  # inside a size prefix: a plain close, as between frames
    channel.receive_data(b"\x00\x00")
    channel.receive_data(b"")
    assert channel.next_event() == ConnectionClosed()

    channel = KafkaChannel(100)
    channel.receive_data(struct.pack(">i", 10) + b"abc")
    assert channel.next_event() == NeedData(7)
    channel.receive_data(b"")
    assert channel.next_event() == ProtocolError("truncated frame (3 of 10 bytes)")

    channel = KafkaChannel(100)
    channel.receive_data(b"")
    with pytest.raises(LocalProtocolError):
        channel.receive_data(b"more")


# ---- ordering ---------------------------------------------------------------------------------


def test_the_second_request_is_held_until_the_first_is_answered() -> None:
    channel = KafkaChannel(1000)
    channel.receive_data(framed(request(METADATA, 12, 1)))
    assert isinstance(channel.next_event(), RequestReceived)
    channel.receive_data(framed(request(METADATA, 12, 2)))
    assert channel.next_event() == Paused()
    assert channel.next_event() == Paused()
    parts = answer(1, b"first")
    assert channel.send_response(parts) is parts
    event = channel.next_event()
    assert isinstance(event, RequestReceived) and event.correlation_id == 2


def test_answers_must_match_the_outstanding_request() -> None:
    channel = KafkaChannel(1000)
    with pytest.raises(LocalProtocolError):
        channel.send_response(answer(1))
    with pytest.raises(LocalProtocolError):
        channel.no_response()
    channel.receive_data(framed(request(METADATA, 12, 5)))
    channel.next_event()
    with pytest.raises(LocalProtocolError, match="correlation id 6 while 5 is outstanding"):
        channel.send_response(answer(6))
    assert channel.muted
    channel.send_response(answer(5))
    with pytest.raises(LocalProtocolError):
        channel.send_response(answer(5))


def test_acks_0_produce_has_no_answer_and_releases_the_next_request() -> None:
    channel = KafkaChannel(1000)
    channel.receive_data(framed(request(PRODUCE, 9, 1, b"acks=0")) + framed(request(METADATA, 12, 2)))
    assert channel.next_event().correlation_id == 1  # type: ignore[attr-defined]
    assert channel.next_event() == Paused()
    channel.no_response()
    event = channel.next_event()
    assert isinstance(event, RequestReceived) and (event.api_key, event.correlation_id) == (METADATA, 2)


# ---- the SASL gate ----------------------------------------------------------------------------


def test_before_authentication_only_the_sasl_requests_pass() -> None:
    channel, _ = sasl_channel()
    channel.receive_data(framed(request(METADATA, 12, 1)))
    assert channel.next_event() == RequestRejected(
        "unexpected Metadata request during SASL authentication (handshake or versions)")
    assert channel.closed

    channel, sasl = sasl_channel()
    channel.receive_data(framed(request(API_VERSIONS, 3, 1)) + framed(request(SASL_HANDSHAKE, 1, 2)))
    assert channel.next_event() == RequestReceived(API_VERSIONS, 3, 1, request(API_VERSIONS, 3, 1))
    channel.send_response(answer(1))
    assert isinstance(channel.next_event(), RequestReceived)
    assert sasl.handshake(1, "PLAIN") == (0, ["PLAIN"])  # what the SaslHandshake handler does
    channel.send_response(answer(2))
    channel.receive_data(framed(request(API_VERSIONS, 3, 3)))  # ApiVersions only before the handshake
    assert channel.next_event() == RequestRejected(
        "unexpected ApiVersions request during SASL authentication (authenticate)")


def test_a_frame_too_short_for_a_header_is_the_gates_to_refuse() -> None:
    channel, _ = sasl_channel()
    channel.receive_data(framed(b"\x00\x12"))
    assert channel.next_event() == RequestRejected(
        "a frame too short to be a request during SASL authentication (handshake or versions)")


def test_frames_are_limited_until_authenticated() -> None:
    channel, _ = sasl_channel(max_receive_size=1000)
    channel.receive_data(struct.pack(">i", 1001))
    assert channel.next_event() == ProtocolError(
        "frame size 1001 during SASL authentication is outside 0..1000 (sasl.server.max.receive.size)")


def test_after_authentication_any_request_passes_up_to_socket_request_max_bytes() -> None:
    channel, sasl = sasl_channel(max_request_size=10_000, max_receive_size=1000)
    big = request(METADATA, 12, 3, b"m" * 5000)
    # The big frame arrives with the last authentication request: its size is checked only once
    # that request is answered, when the limit has become socket.request.max.bytes.
    channel.receive_data(framed(request(SASL_HANDSHAKE, 1, 1)) + framed(request(SASL_AUTHENTICATE, 2, 2)) + framed(big))
    assert channel.next_event().correlation_id == 1  # type: ignore[attr-defined]
    sasl.handshake(1, "PLAIN")
    channel.send_response(answer(1))
    assert channel.next_event().correlation_id == 2  # type: ignore[attr-defined]
    assert sasl.authenticate(2, b"\0alice\0secret").error_code == 0
    assert sasl.authenticated
    channel.send_response(answer(2))
    assert channel.next_event() == RequestReceived(METADATA, 12, 3, big)
    channel.send_response(answer(3))
    channel.receive_data(struct.pack(">i", 10_001))
    assert channel.next_event() == ProtocolError("frame size 10001 is outside 0..10000 (socket.request.max.bytes)")


def test_sasl_handshake_v0_tokens_are_raw() -> None:
    channel, sasl = sasl_channel()
    channel.receive_data(framed(request(SASL_HANDSHAKE, 0, 1)) + framed(b"\0alice\0secret"))
    assert channel.next_event().api_version == 0  # type: ignore[attr-defined]
    sasl.handshake(0, "PLAIN")
    channel.send_response(answer(1))
    assert channel.next_event() == RawSaslTokenReceived(b"\0alice\0secret")
    assert channel.next_event() == Paused()
    assert sasl.evaluate_raw(b"\0alice\0secret") == b""
    channel.send_response([struct.pack(">i", 0)])  # a bare answer: no correlation id
    channel.receive_data(framed(request(METADATA, 12, 2)))
    assert isinstance(channel.next_event(), RequestReceived)
