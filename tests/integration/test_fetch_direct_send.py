"""Fetch answers sent with direct sendfile calls (server/direct_send.py), over real TCP.

The record bytes of a Fetch answer are the segment file's bytes exactly, also when several
connections fetch megabytes at once and their sends interleave on the event loop; a client that
closes mid-answer, or stops reading until the idle timer closes it, ends only its own
connection."""

from __future__ import annotations

import datetime
import socket
import struct
import threading
import time
import uuid

from kio.schema.fetch.v12 import request as fetch

from tests.integration.test_bad_input import (
    NONE,
    RawClient,
    assert_healthy,
    create_topic,
    fetch_once,
    partition_results,
    produce_request,
    records,
)
from tests.support import wait_until

BIG = 8 << 20


def _fill(port: int, topic: str, batches: int) -> None:
    client = RawClient(port, client_id="filler")
    try:
        for i in range(batches):
            values = [b"%06d-%03d-" % (i, j) + bytes([j % 251]) * 2_000 for j in range(50)]  # ~100 KB a batch
            assert partition_results(client.request(produce_request(topic, {0: records(values)})))[0].error_code == NONE
    finally:
        client.close()


def _segment_bytes(server, topic: str) -> bytes:
    log_path = server.data_dir / f"{topic}-0" / "00000000000000000000.log"
    return log_path.read_bytes()


def _fetch_frame(client: RawClient, topic: str, correlation_id: int) -> bytes:
    return client.encode(fetch.FetchRequest(
        max_wait=datetime.timedelta(0), min_bytes=0, max_bytes=BIG, isolation_level=0, session_id=0, session_epoch=-1,
        topics=(fetch.FetchTopic(topic=topic, partitions=(
            fetch.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=BIG),)),),
        forgotten_topics_data=(),
    ), correlation_id)


def test_large_fetches_on_several_connections_are_the_log_bytes(sidecar_factory):
    server = sidecar_factory()
    topic = f"direct-{uuid.uuid4().hex[:8]}"
    create_topic(server.port, topic)
    _fill(server.port, topic, 30)  # ~3 MB in one segment
    log_bytes = _segment_bytes(server, topic)
    assert len(log_bytes) > 2 << 20

    failures: list[str] = []

    def consumer(k: int) -> None:
        client = RawClient(server.port, client_id=f"consumer-{k}")
        try:
            # Small receive buffer: the server's sends hit a full socket and wait for writability.
            client.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 10)
            for round_ in range(3):
                # Pipelined: three requests at once, answered in order, one at a time.
                client.send_raw(b"".join(_fetch_frame(client, topic, 10 * round_ + i) for i in range(3)))
                for i in range(3):
                    if k % 2:
                        time.sleep(0.01)  # a slower reader
                    frame = client.recv_frame()
                    assert frame is not None
                    correlation_id, resp = client.decode(frame, 1, 12)
                    assert correlation_id == 10 * round_ + i
                    (p,) = resp.responses[0].partitions
                    if p.error_code != NONE or bytes(p.records or b"") != log_bytes:
                        failures.append(f"consumer {k} round {round_}: {p.error_code}, {len(p.records or b'')} bytes")
        except Exception as e:  # noqa: BLE001 - reported below
            failures.append(f"consumer {k}: {e!r}")
        finally:
            client.close()

    threads = [threading.Thread(target=consumer, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not failures, failures

    # A small fetch (one batch) and a fetch past the end on the same path.
    client = RawClient(server.port, client_id="small")
    p, got = fetch_once(client, topic, 0, 0, max_bytes=1)
    (size,) = struct.unpack_from(">i", log_bytes, 8)
    assert got == log_bytes[: 12 + size]  # the first batch, whole, despite max_bytes 1
    p, got = fetch_once(client, topic, 0, p.high_watermark)
    assert p.error_code == NONE and got == b""
    client.close()


def test_client_closing_mid_answer_ends_only_its_connection(sidecar_factory):
    server = sidecar_factory({"connections.max.idle.ms": "1500"})
    topic = f"direct-close-{uuid.uuid4().hex[:8]}"
    create_topic(server.port, topic)
    _fill(server.port, topic, 100)  # ~10 MB: an 8 MiB answer is more than the socket buffers hold
    log_bytes = _segment_bytes(server, topic)

    # Clients that read a little of a large answer and close (with unread data: a reset).
    for k in range(5):
        quitter = RawClient(server.port, client_id=f"quitter-{k}")
        quitter.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 << 10)
        quitter.send_raw(b"".join(_fetch_frame(quitter, topic, i) for i in range(4)))
        assert len(quitter.sock.recv(1000)) > 0
        quitter.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        quitter.close()

    # A client that stops reading mid-answer: the idle timer closes it while its send waits.
    stuck = RawClient(server.port, client_id="stuck")
    stuck.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 << 10)
    stuck.send_raw(_fetch_frame(stuck, topic, 1))
    assert len(stuck.sock.recv(100)) > 0
    t0 = time.monotonic()
    wait_until(lambda: "idle for" in server.log_text(), timeout=15, message="the idle stuck connection is closed")
    assert time.monotonic() - t0 < 10
    stuck.sock.settimeout(5)
    received = 0
    try:
        while chunk := stuck.sock.recv(1 << 16):  # what was in flight, then the end of the stream
            received += len(chunk)
    except ConnectionResetError:
        pass
    assert received < BIG  # the answer was cut, not completed after the close
    stuck.close()

    witness = RawClient(server.port, client_id="witness")  # (an older one would be idle-closed by now)
    assert_healthy(server, witness)
    reader = RawClient(server.port, client_id="after")
    p, got = fetch_once(reader, topic, 0, 0, max_bytes=BIG)
    assert len(got) == BIG and got == log_bytes[:BIG]  # Kafka's slice: up to the limit, the last batch cut
    reader.close()
    witness.close()
    assert "internal error" not in server.log_text()
    assert "Traceback" not in server.log_text()
