"""The floor under a Python Produce answer: what an asyncio server that does nothing but answer costs.

    python -m bench.floor                          # 100 connections: the floors, then ours
    python -m bench.floor --connections 100,500 --rounds 3 --seconds 5

Issue 26 asks for <= 40 us of broker CPU per Produce request at 100 connections. This says how
much of a request's cost is left to cut in our code: the same closed-loop load as
``bench.connections`` (its ``produce_load``: N raw connections, Produce v11, acks=1, one batch
of 10 x 100 B each) against four servers, one after the other in each round:

- **floor**: one asyncio Protocol per connection (as our ``ChannelReader``), frames split from
  the received bytes, and for each an answer written to the transport; the answer is the real
  Produce v11 answer for that request, made once per distinct request bytes and then reused
  (the load sends the same bytes again), so no decode, no checks, no log, no encode per request;
- **floor + write**: the same, plus one ``os.write`` of the request to a file per request (the
  log append's syscall: our segment write is one ``write`` of the batch);
- **floor + write + task**: the same, each frame answered by a task per connection woken through
  a future (as ``ChannelReader`` wakes ``Connection.serve``): asyncio's task switch per request;
- **ours**: ``kafka-sidecar serve``, as ``bench.connections`` runs it.

Broker CPU per request is each server's utime + stime over the timed window divided by the
answers. The difference ours - floor is what Python does for Kafka per request (header, decode,
batch checks, the append's bookkeeping, metrics, encode, the connection's state machine) plus
asyncio's task switch; floor is asyncio + the two syscalls per request and their kernel work
(loopback TCP delivery to the client included) and what no rewrite in Python removes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.connections import PRODUCE, _Frames, produce_load
from bench.run import Sidecar, free_port, log, machine_info

REPO = Path(__file__).resolve().parents[1]
KINDS = ("floor", "floor + write", "floor + write + task", "ours")


def produce_answer(frame: bytes) -> bytes:
    """The whole framed Produce answer (error NONE, base offset 0) for a Produce request frame."""
    from kafka_sidecar.protocol.framing import framed_response, parse_request_header
    from kafka_sidecar.protocol.produce_request import decode_produce, encode_produce_response

    header = parse_request_header(frame, True)
    assert header.api_key == PRODUCE, f"the floor answers Produce only, not API {header.api_key}"
    request = decode_produce(header.api_version, frame, header.body_offset)
    assert request is not None
    body = encode_produce_response(header.api_version, {"throttle_time": 0, "responses": [
        {"name": t.name, "topic_id": None, "partition_responses": [
            {"index": p.index, "error_code": 0, "base_offset": 0, "log_append_time": -1, "log_start_offset": 0,
             "record_errors": [], "error_message": None} for p in t.partition_data]}
        for t in request.topic_data]})
    assert body is not None
    return framed_response(header.correlation_id, True, body)


class FloorConnection(_Frames):
    """Frames in (``bench.connections``' frame splitting), the cached answer out (and, with a
    log file, the frame written to it).

    With ``task``, each frame is answered by a task per connection woken through a future, as
    ``Connection.serve`` is by ``ChannelReader``: the difference is asyncio's task switch."""

    answers: dict[bytes, bytes] = {}

    def __init__(self, log_fd: int | None, task: bool = False) -> None:
        super().__init__()
        self.log_fd = log_fd
        self.task = task
        self.frames: list[bytes] = []
        self.waiter: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        if self.task:
            asyncio.get_running_loop().create_task(self.serve())

    async def serve(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            while not self.frames:
                self.waiter = loop.create_future()
                await self.waiter
                self.waiter = None
            self.answer(self.frames.pop(0))

    def answered(self, payload: bytes) -> None:
        """A whole request frame (the name is the client side's: here it is what arrived)."""
        if not self.task:
            self.answer(payload)
            return
        self.frames.append(payload)
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    def answer(self, frame: bytes) -> None:
        answer = self.answers.get(frame)
        if answer is None:
            answer = self.answers[frame] = produce_answer(frame)
        if self.log_fd is not None:
            os.write(self.log_fd, frame)
        assert self.transport is not None
        self.transport.write(answer)


def serve(port: int, log_path: str | None, task: bool) -> None:
    """Run the floor server on 127.0.0.1:port until killed."""
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644) if log_path else None

    async def main() -> None:
        server = await asyncio.get_running_loop().create_server(lambda: FloorConnection(log_fd, task), "127.0.0.1", port,
                                                               backlog=1024)
        print("ready", flush=True)
        await server.serve_forever()

    asyncio.run(main())


def run_floor(cfg: argparse.Namespace, n: int, write: bool, task: bool = False) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-floor-") as tmp:
        port = free_port()
        cmd = [sys.executable, "-m", "bench.floor", "--serve", str(port)]
        if write:
            cmd += ["--log", str(Path(tmp) / "floor.log")]
        if task:
            cmd += ["--task"]
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, text=True)
        try:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready", "the floor server did not start"
            routes = [f"127.0.0.1:{port}"] * cfg.partitions
            return asyncio.run(produce_load(routes, "floor", n, cfg, [proc.pid]))
        finally:
            proc.kill()
            proc.wait()


def run_ours(cfg: argparse.Namespace, n: int) -> dict[str, Any]:
    from bench.connections import create_topic, leaders

    with tempfile.TemporaryDirectory(prefix="bench-floor-ours-") as tmp:
        server = Sidecar(Path(tmp), {"max.connections": "10000"})
        server.start()
        try:
            topic = f"floor{n}-{time.monotonic_ns()}"
            create_topic(server.bootstrap, topic, cfg.partitions)
            return asyncio.run(produce_load(leaders(server.bootstrap, topic), topic, n, cfg, server.pids))
        finally:
            server.stop()


def _median(rows: list[dict[str, Any]], field: str) -> float:
    return sorted(x[field] for x in rows)[len(rows) // 2]


def main(argv: list[str] | None = None) -> int:
    ints = lambda s: [int(x) for x in s.split(",") if x]  # noqa: E731
    p = argparse.ArgumentParser(prog="python -m bench.floor", description=__doc__.split("\n")[0])
    p.add_argument("--connections", type=ints, default=[100])
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--warmup", type=float, default=1.0)
    p.add_argument("--rounds", type=int, default=1, help="every server in KINDS, this many times")
    p.add_argument("--partitions", type=int, default=8)
    p.add_argument("--batch-records", type=int, default=10)
    p.add_argument("--value-size", type=int, default=100)
    p.add_argument("--json", default=str(REPO / "bench" / "results" / "floor.json"))
    p.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    p.add_argument("--log", help=argparse.SUPPRESS)
    p.add_argument("--task", action="store_true", help=argparse.SUPPRESS)
    cfg = p.parse_args(argv)
    if cfg.serve:
        serve(cfg.serve, cfg.log, cfg.task)
        return 0
    started, results = time.time(), []
    for r in range(cfg.rounds):
        for n in cfg.connections:
            for kind in KINDS:
                got = run_ours(cfg, n) if kind == "ours" else run_floor(cfg, n, "write" in kind, "task" in kind)
                log(f"round {r + 1}: {kind} x{n}: {got['requests_per_s']} req/s, {got['server_cpu_us_per_request']} us "
                    f"broker CPU/request, p99 {got['p99_ms']} ms, errors {got['errors']}, load average {got['load_average']}")
                results.append({"round": r + 1, "server": kind, **got})
    print(f"{'server':<22} {'connections':>11} {'req/s (median)':>15} {'us CPU/request (median)':>24}")
    for n in cfg.connections:
        for kind in KINDS:
            rows = [x for x in results if x["server"] == kind and x["connections"] == n]
            print(f"{kind:<22} {n:>11} {_median(rows, 'requests_per_s'):>15,.0f} "
                  f"{_median(rows, 'server_cpu_us_per_request'):>24.1f}")
    Path(cfg.json).write_text(json.dumps({"started": started, "machine": machine_info(), "results": results},
                                         indent=1, default=str) + "\n")
    print(f"wrote {cfg.json}")
    return 1 if any(x["errors"] for x in results) else 0


if __name__ == "__main__":
    sys.exit(main())
