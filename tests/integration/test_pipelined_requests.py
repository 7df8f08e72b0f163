"""Pipelined requests on one connection, over TCP: answered in order, a long poll parked and
completed while the connection goes on, and a bad frame behind a good one closing the
connection after the good answer.

On a PLAINTEXT listener a Produce or Fetch that arrives while the connection waits is answered
inside ``data_received`` (server/connection.py ``_answer_inline``) without waking its task;
other APIs always go to the task, and what cannot finish at once (a long poll) is handed to the
task, which goes on from where it stopped. These check the hand-overs a client can see.
"""

from __future__ import annotations

import datetime
import struct
import time

from kio.schema.fetch.v12 import request as fetch

from tests.integration.test_bad_input import (
    NONE,
    RawClient,
    api_versions_request,
    create_topic,
    metadata_request,
    partition_results,
    produce_request,
    records,
)


def _long_poll(topic: str, offset: int, wait_ms: int) -> fetch.FetchRequest:
    return fetch.FetchRequest(
        max_wait=datetime.timedelta(milliseconds=wait_ms), min_bytes=1, max_bytes=1 << 20, isolation_level=0,
        session_id=0, session_epoch=-1,
        topics=(fetch.FetchTopic(topic=topic, partitions=(
            fetch.FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=1 << 20),),),),
        forgotten_topics_data=(),
    )


def test_pipelined_requests_are_answered_in_order(sidecar) -> None:
    topic = f"inline-pipe-{time.monotonic_ns()}"
    create_topic(sidecar.port, topic)
    client = RawClient(sidecar.port)
    try:
        produce = [produce_request(topic, {0: records([f"r{i}".encode()])}) for i in range(4)]
        frames = [client.encode(produce[0], 10), client.encode(produce[1], 11), client.encode(metadata_request([]), 12),
                  client.encode(produce[2], 13), client.encode(api_versions_request(), 14), client.encode(produce[3], 15)]
        client.send_raw(b"".join(frames))  # one write: one or few data_received calls hold them all
        got = []
        for _ in frames:
            frame = client.recv_frame()
            assert frame is not None
            got.append(struct.unpack_from(">i", frame)[0])
        assert got == [10, 11, 12, 13, 14, 15]
        # The four produces were appended in request order.
        consumer = RawClient(sidecar.port)
        try:
            consumer.send_raw(consumer.encode(_long_poll(topic, 0, 100), 30))
            frame = consumer.recv_frame()
            assert frame is not None
            _, answer = consumer.decode(frame, 1, fetch.FetchRequest.__version__)
            data = bytes(answer.responses[0].partitions[0].records or b"")
            positions = [data.find(f"r{i}".encode()) for i in range(4)]
            assert -1 not in positions and positions == sorted(positions), positions
        finally:
            consumer.close()
    finally:
        client.close()


def test_a_long_poll_started_inline_completes_and_the_connection_goes_on(sidecar) -> None:
    topic = f"inline-poll-{time.monotonic_ns()}"
    create_topic(sidecar.port, topic)
    consumer, producer = RawClient(sidecar.port), RawClient(sidecar.port)
    try:
        consumer.send_raw(consumer.encode(_long_poll(topic, 0, 10_000), 7))
        time.sleep(0.3)  # the Fetch is parked in its long poll
        started = time.monotonic()
        resp = producer.request(produce_request(topic, {0: records([b"woke it"])}))
        assert partition_results(resp)[0].error_code == NONE
        frame = consumer.recv_frame()
        assert frame is not None
        assert time.monotonic() - started < 5, "the long poll was not woken by the produce"
        correlation_id, answer = consumer.decode(frame, 1, fetch.FetchRequest.__version__)
        assert correlation_id == 7
        (p,) = answer.responses[0].partitions
        assert p.error_code == NONE and b"woke it" in bytes(p.records or b"")
        # The task took the request over; the connection keeps answering, inline again.
        for _ in range(3):
            assert consumer.request(api_versions_request()).error_code == NONE
        consumer.send_raw(consumer.encode(_long_poll(topic, 1, 200), 8))  # expires with nothing new
        frame = consumer.recv_frame()
        assert frame is not None and struct.unpack_from(">i", frame)[0] == 8
    finally:
        consumer.close()
        producer.close()


def test_a_bad_frame_behind_a_good_one_is_answered_then_closed(sidecar) -> None:
    client = RawClient(sidecar.port)
    try:
        client.send_raw(client.encode(api_versions_request(), 21) + struct.pack(">i", -5))
        frame = client.recv_frame()
        assert frame is not None and struct.unpack_from(">i", frame)[0] == 21
        assert client.is_closed_by_server()
    finally:
        client.close()
    other = RawClient(sidecar.port)  # the server itself is fine
    try:
        assert other.request(api_versions_request()).error_code == NONE
    finally:
        other.close()
