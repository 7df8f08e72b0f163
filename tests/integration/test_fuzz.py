"""Fuzzing the request path (short runs; ``make fuzz`` runs long ones).

- In-process: every case goes through ``dispatch.handle_request`` on a real Broker
  (``tests/fuzz/fuzz_requests.py``): decoding never fails with anything but a clean
  "close the connection", and handlers never raise.
- Over TCP: cases (one to three frames per connection) against a server subprocess; it
  never exits, always answers a witness connection in time, and its memory stays bounded.

Cases: the golden requests of Kafka 4.0.0's clients, mutated; well-formed requests of
every supported API and version with drawn field values; random headers and bodies
(``tests/fuzz/strategies.py``). Derandomized here so a failure reproduces;
``FUZZ_EXAMPLES`` raises the count.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from tests.fuzz.fuzz_requests import Target
from tests.fuzz.strategies import TOPICS, request_frames, request_streams
from tests.integration.test_bad_input import RawClient, api_versions_request, create_topic
from tests.support import SidecarProcess

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "0"))
# Derandomized in the suite (a failure reproduces); `make fuzz` sets FUZZ_RANDOM=1 for new cases each run.
SETTINGS = {"database": None, "deadline": None, "derandomize": not os.environ.get("FUZZ_RANDOM"),
            "suppress_health_check": list(HealthCheck)}


@pytest.fixture(scope="module")
def target():
    t = Target()
    yield t
    t.close()


def test_fuzz_dispatch_in_process(target):
    @settings(max_examples=EXAMPLES or 1500, **SETTINGS)
    @given(request_frames())
    def case(frame: bytes) -> None:
        target.run_one(frame[4:])

    case()
    assert target.cases >= (EXAMPLES or 1500)


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _drain(sock: socket.socket, quiet: float) -> None:
    """Read answers until the server closes or is quiet for ``quiet`` seconds."""
    sock.settimeout(quiet)
    try:
        while sock.recv(1 << 16):
            pass
    except (TimeoutError, ConnectionError, OSError):
        pass


def test_fuzz_server_over_tcp(tmp_path):
    shm = Path("/dev/shm")
    base = Path(os.environ.get("FUZZ_DATA_DIR", shm if shm.is_dir() else tmp_path))
    data = base / f"kafka-sidecar-fuzz-{os.getpid()}-{time.monotonic_ns()}"
    server = SidecarProcess(data, {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "2"})
    server.log_path = tmp_path / "server.log"
    server.start()
    try:
        for name in TOPICS:
            create_topic(server.port, name, partitions=2, configs={"cleanup.policy": "compact"} if "compact" in name else None)
        witness = RawClient(server.port, client_id="witness")
        assert witness.request(api_versions_request()).error_code == 0
        rss_start = _rss_kib(server.proc.pid)
        count = 0

        @settings(max_examples=EXAMPLES or 400, **SETTINGS)
        @given(request_streams())
        def case(stream: bytes) -> None:
            nonlocal count
            count += 1
            with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
                try:
                    s.sendall(stream)
                except OSError:
                    pass  # closed on us mid-send: fine
                _drain(s, 0.02)
            if count % 20 == 0:
                assert server.proc.poll() is None, "the server exited"
                t0 = time.monotonic()
                assert witness.request(api_versions_request()).error_code == 0
                assert time.monotonic() - t0 < 5, "the server took more than 5 s to answer"

        case()
        assert server.proc.poll() is None, "the server exited"
        assert witness.request(api_versions_request()).error_code == 0
        growth = (_rss_kib(server.proc.pid) - rss_start) / 1024
        assert growth < 200, f"server memory grew {growth:.0f} MiB over {count} cases"
        witness.close()
        assert server.stop() == 0
    finally:
        if server.proc is not None and server.proc.poll() is None:
            server.kill()
        import shutil

        shutil.rmtree(data, ignore_errors=True)
