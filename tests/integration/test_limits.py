"""Connection limits: max.connections, connections.max.idle.ms, socket.request.max.bytes, and
a client that sends requests without reading the answers (the server must stop reading it
rather than buffer without bound)."""

from __future__ import annotations

import datetime
import errno
import socket
import struct
import time
import uuid

from kio.schema.fetch.v12 import request as fetch

from tests.integration.test_bad_input import (
    NONE,
    RawClient,
    api_versions_request,
    assert_healthy,
    create_topic,
    partition_results,
    produce_request,
    records,
)
from tests.support import SidecarProcess, wait_until


def rss_kib(server: SidecarProcess) -> int:
    assert server.proc is not None
    for line in open(f"/proc/{server.proc.pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def closed_by_server(sock: socket.socket, timeout: float) -> bool:
    sock.settimeout(timeout)
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


def test_max_connections(sidecar_factory):
    server = sidecar_factory({"max.connections": "3"})
    clients = [RawClient(server.port, client_id=f"c{i}") for i in range(3)]
    for c in clients:
        assert c.request(api_versions_request()).error_code == NONE
    log_before = len(server.log_text())
    extra = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    assert closed_by_server(extra, 5), "a connection beyond max.connections was kept"
    extra.close()
    lines = [line for line in server.log_text()[log_before:].splitlines() if "max.connections" in line]
    assert len(lines) == 1 and "refusing connection" in lines[0], lines
    for c in clients:  # the admitted ones are unaffected
        assert_healthy(server, c)
    clients.pop().close()
    # A slot is free again.
    newcomer = wait_until(lambda: _try_connect(server.port), timeout=5, message="a free connection slot")
    assert newcomer.request(api_versions_request()).error_code == NONE
    newcomer.close()
    for c in clients:
        c.close()


def _try_connect(port: int) -> RawClient | None:
    c = RawClient(port, client_id="newcomer")
    try:
        c.request(api_versions_request())
        return c
    except (AssertionError, OSError):
        c.close()
        return None


def test_idle_connections_are_closed(sidecar_factory):
    server = sidecar_factory({"connections.max.idle.ms": "700"})
    idle = RawClient(server.port, client_id="idle")
    assert idle.request(api_versions_request()).error_code == NONE
    stuck = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    stuck.sendall(struct.pack(">i", 100) + b"\0\x12\0\0")  # a frame that never completes
    t0 = time.monotonic()
    assert closed_by_server(idle.sock, 5)
    assert closed_by_server(stuck, 5)
    assert 0.5 < time.monotonic() - t0 < 4.5
    # A connection that keeps making requests is never idle.
    busy = RawClient(server.port, client_id="busy")
    for _ in range(6):
        assert busy.request(api_versions_request()).error_code == NONE
        time.sleep(0.25)
    assert wait_until(lambda: sum("connections.max.idle.ms" in line for line in server.log_text().splitlines()) >= 2, timeout=5)
    busy.close()
    idle.close()
    stuck.close()


def test_long_poll_fetch_is_not_idle(sidecar_factory):
    server = sidecar_factory({"connections.max.idle.ms": "500"})
    topic = f"poll-{uuid.uuid4().hex[:8]}"
    create_topic(server.port, topic)
    client = RawClient(server.port, client_id="poller")
    t0 = time.monotonic()
    resp = client.request(fetch.FetchRequest(
        max_wait=datetime.timedelta(milliseconds=1500), min_bytes=1, max_bytes=1 << 20, isolation_level=0,
        session_id=0, session_epoch=-1,
        topics=(fetch.FetchTopic(topic=topic, partitions=(
            fetch.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20),
        )),),
        forgotten_topics_data=(),
    ))
    assert resp.error_code == NONE
    assert time.monotonic() - t0 >= 1.4  # answered after max_wait, not cut by the idle timer
    client.close()


def test_frame_over_socket_request_max_bytes_is_refused(sidecar_factory):
    server = sidecar_factory({"socket.request.max.bytes": "1000"})
    witness = RawClient(server.port, client_id="witness")
    s = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    s.sendall(struct.pack(">i", 5000) + b"\0" * 100)
    assert closed_by_server(s, 5)
    assert any("socket.request.max.bytes" in line for line in server.log_text().splitlines())
    assert_healthy(server, witness)
    witness.close()


def test_client_that_never_reads_answers_is_not_buffered(sidecar_factory):
    """Pipelined Fetch requests, each answered with ~200 KiB, and ApiVersions requests, sent without
    reading anything back: the server stops reading the connection once the answers back up,
    so the client's sends stall after a few MiB and the server's memory stays flat."""
    server = sidecar_factory({"connections.max.idle.ms": "3000"})
    topic = f"noread-{uuid.uuid4().hex[:8]}"
    create_topic(server.port, topic)
    setup = RawClient(server.port, client_id="setup")
    for i in range(20):
        r = partition_results(setup.request(produce_request(topic, {0: records([b"%d" % i + b"v" * 10_000] * 1)})))[0]
        assert r.error_code == NONE
    setup.close()
    witness = RawClient(server.port, client_id="witness")
    greedy = RawClient(server.port, client_id="greedy")
    fetch_frame = greedy.encode(fetch.FetchRequest(
        max_wait=datetime.timedelta(0), min_bytes=0, max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1,
        topics=(fetch.FetchTopic(topic=topic, partitions=(fetch.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20),)),),
        forgotten_topics_data=(),
    ), 1)
    api_frame = greedy.encode(api_versions_request(), 2)
    chunk = (fetch_frame + api_frame * 20) * 50
    rss_before = rss_kib(server)
    greedy.sock.setblocking(False)
    sent = 0
    stalled_since = None
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            sent += greedy.sock.send(chunk)
            stalled_since = None
        except OSError as e:
            if e.errno not in (errno.EAGAIN, errno.EWOULDBLOCK):
                raise
            stalled_since = stalled_since or time.monotonic()
            if time.monotonic() - stalled_since > 1.0:
                break
            time.sleep(0.02)
    assert stalled_since is not None, f"the server kept reading: {sent} bytes sent without a stall"
    assert sent < 64 << 20, f"{sent} bytes accepted before the server stopped reading"
    growth_mib = (rss_kib(server) - rss_before) / 1024
    assert growth_mib < 40, f"server memory grew {growth_mib:.0f} MiB for a client that does not read"
    assert_healthy(server, witness)  # the others are served meanwhile
    # The stalled connection is idle (nothing completes): closed after connections.max.idle.ms.
    assert wait_until(lambda: any("greedy" in line or "idle for" in line for line in server.log_text().splitlines()), timeout=10)
    greedy.close()
    witness.close()
