"""The Produce path in process: channel, dispatch, Produce, log append and answer, no sockets.

    python -m bench.produce_path                    # CPU us per request, best of 5 x 20,000
    python -m bench.produce_path --instructions     # instructions per request (valgrind), load-free
    python -m bench.produce_path --instructions --server   # the same for the whole server over TCP

What Python does for one Produce request of ``bench.connections`` (Produce v11, acks=1, one batch
of 10 x 100 B, 8 partitions round robin) between the bytes arriving and the answer's bytes:
``KafkaChannel.receive_data``/``next_event``, ``dispatch.handle_request`` (header, decode, the
Produce handler, the append through ReplicaManager into a real on-disk log, metrics, the answer's
encode) and ``send_response``. The sockets, the event loop's wake-ups and the task switch are
what ``bench.floor`` measures; the two add up to ``bench.connections``' figure.

CPU time on this shared machine moves with the load (x2-x4); ``--instructions`` runs the loop
under valgrind (cachegrind, no cache simulation) twice, with ``--requests`` and 3x as many, and
divides the difference of the instruction counts by the extra requests: start-up and imports
cancel out, and the figure does not depend on what else the machine runs. Use it to compare
builds (``--pythonpath`` of another tree). ``--server`` does the same with the real
``kafka-sidecar serve`` under valgrind, answering ``--connections`` raw closed-loop connections
over loopback TCP: the event loop, asyncio's transports and the connection's code are in the
figure too (the kernel's work in the syscalls is not: valgrind counts user-space instructions).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PARTITIONS = 8


async def run(requests: int, rounds: int, data_dir: Path) -> list[float]:
    """CPU seconds per request of each round."""
    from kafka_sidecar.protocol.connection import KafkaChannel, RequestReceived
    from kafka_sidecar.server.broker import Broker
    from kafka_sidecar.server.config import BrokerConfig
    from kafka_sidecar.server.dispatch import handle_request
    from kafka_sidecar.server.request_context import ClientInfo

    from bench.connections import produce_frame

    config = BrokerConfig.load(overrides={"log.initial.task.delay.ms": "600000"})
    broker = Broker(config, data_dir, "127.0.0.1", 0)
    await broker.start()
    try:
        broker.log_manager.create_topic("path", PARTITIONS)
        frames = [produce_frame("path", p, 10, 100, p + 1) for p in range(PARTITIONS)]  # size-prefixed
        services, client, channel = broker.services, ClientInfo("127.0.0.1:9", "127.0.0.1", "PLAINTEXT"), KafkaChannel(
            broker.max_request_size)
        per_request = []
        for _ in range(rounds):
            start = time.process_time()
            for i in range(requests):
                channel.receive_data(frames[i % PARTITIONS])
                event = channel.next_event()
                assert event.__class__ is RequestReceived
                response, _ = await handle_request(services, client, event.frame)  # type: ignore[attr-defined]
                assert response is not None
                channel.send_response(response)
            per_request.append((time.process_time() - start) / requests)
        return per_request
    finally:
        await broker.stop()


def instructions(requests: int, pythonpath: str | None) -> float:
    """Instructions per request: valgrind runs of ``requests`` and ``3 * requests``, differenced."""
    if not shutil.which("valgrind"):
        raise SystemExit("--instructions needs valgrind (apt-get install valgrind)")
    counts = []
    for n in (requests, 3 * requests):
        with tempfile.TemporaryDirectory(prefix="bench-path-vg-") as tmp:
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(x for x in (pythonpath, str(REPO)) if x)}
            out = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no", f"--cachegrind-out-file={tmp}/cg.out",
                                  sys.executable, "-m", "bench.produce_path", "--requests", str(n), "--rounds", "1"],
                                 cwd=REPO, env=env, capture_output=True, text=True, timeout=1800)
            found = re.search(r"I\s+refs:\s+([\d,]+)", out.stderr)
            if out.returncode != 0 or not found:
                raise SystemExit(f"valgrind run failed:\n{out.stderr[-2000:]}")
            counts.append(int(found.group(1).replace(",", "")))
    return (counts[1] - counts[0]) / (2 * requests)


async def _closed_loop(port: int, connections: int, requests: int) -> int:
    """``requests`` Produce requests over ``connections`` connections, one outstanding on each."""
    from bench.connections import _SIZE, produce_frame

    frames = [produce_frame("path", p, 10, 100, p + 1) for p in range(PARTITIONS)]

    async def one(i: int, count: int) -> int:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        frame, answered = frames[i % PARTITIONS], 0
        for _ in range(count):
            writer.write(frame)
            (size,) = _SIZE.unpack(await reader.readexactly(4))
            await reader.readexactly(size)
            answered += 1
        writer.close()
        return answered

    share = [requests // connections + (1 if i < requests % connections else 0) for i in range(connections)]
    return sum(await asyncio.gather(*[one(i, n) for i, n in enumerate(share)]))


def server_instructions(requests: int, connections: int, pythonpath: str | None) -> float:
    """Instructions per request of ``kafka-sidecar serve`` under valgrind, runs of ``requests``
    and ``3 * requests`` differenced."""
    import signal

    from bench.connections import create_topic
    from bench.run import free_port, port_open, sidecar_command

    if not shutil.which("valgrind"):
        raise SystemExit("--instructions needs valgrind (apt-get install valgrind)")
    counts = []
    for n in (requests, 3 * requests):
        with tempfile.TemporaryDirectory(prefix="bench-path-server-") as tmp:
            port = free_port()
            env = {**os.environ, **({"PYTHONPATH": pythonpath} if pythonpath else {})}
            err = open(f"{tmp}/valgrind.err", "w")
            proc = subprocess.Popen(["valgrind", "--tool=cachegrind", "--cache-sim=no", f"--cachegrind-out-file={tmp}/cg.out",
                                     *sidecar_command(), "serve", "--data-dir", f"{tmp}/data", "--listen", f"127.0.0.1:{port}"],
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, env=env)
            try:
                deadline = time.monotonic() + 600
                while not port_open("127.0.0.1", port, timeout=1.0):
                    if proc.poll() is not None or time.monotonic() > deadline:
                        raise SystemExit(f"kafka-sidecar under valgrind did not start: {Path(tmp, 'valgrind.err').read_text()[-2000:]}")
                    time.sleep(0.5)
                create_topic(f"127.0.0.1:{port}", "path", PARTITIONS)
                answered = asyncio.run(_closed_loop(port, connections, n))
                assert answered == n, f"{answered} of {n} answered"
            finally:
                proc.send_signal(signal.SIGTERM)
                proc.wait(600)
                err.close()
            found = re.search(r"I\s+refs:\s+([\d,]+)", Path(tmp, "valgrind.err").read_text())
            if not found:
                raise SystemExit(f"no instruction count from valgrind: {Path(tmp, 'valgrind.err').read_text()[-2000:]}")
            counts.append(int(found.group(1).replace(",", "")))
    return (counts[1] - counts[0]) / (2 * requests)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.produce_path", description=__doc__.split("\n")[0])
    p.add_argument("--requests", type=int, default=20_000)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--instructions", action="store_true", help="instructions per request under valgrind")
    p.add_argument("--pythonpath", help="measure another tree's kafka_sidecar (instructions only)")
    p.add_argument("--server", action="store_true", help="with --instructions: the whole server over TCP")
    p.add_argument("--connections", type=int, default=10, help="with --server: closed-loop connections (default 10)")
    cfg = p.parse_args(argv)
    if cfg.instructions and cfg.server:
        n = min(cfg.requests, 4000)
        print(f"instructions per Produce request, whole server over TCP, {cfg.connections} connections: "
              f"{server_instructions(n, cfg.connections, cfg.pythonpath):,.0f} (valgrind, {n} and {3 * n} requests differenced)")
        return 0
    if cfg.instructions:
        n = min(cfg.requests, 4000)
        print(f"instructions per Produce request: {instructions(n, cfg.pythonpath):,.0f} "
              f"(valgrind, {n} and {3 * n} requests differenced)")
        return 0
    with tempfile.TemporaryDirectory(prefix="bench-path-") as tmp:
        got = asyncio.run(run(cfg.requests, cfg.rounds, Path(tmp) / "data"))
    print(f"CPU per Produce request in process: best {min(got) * 1e6:.1f} us, rounds "
          f"{', '.join(f'{x * 1e6:.1f}' for x in got)} (load average {os.getloadavg()[0]:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
