"""bench/connections.py with ``--processes 2``: the real ``serve --processes 2`` cluster, every
request sent to the node Metadata names as its partition's leader, CPU counted over every process."""

from __future__ import annotations

import argparse
import asyncio
import zlib
from pathlib import Path

from bench.connections import create_topic, fetch_load, fill, host_cpu, leaders, pin, produce_load
from bench.run import Sidecar


def _cfg() -> argparse.Namespace:
    return argparse.Namespace(warmup=0.2, seconds=0.5, batch_records=5, value_size=50)


def _written(data_dir: Path, topic: str, partitions: int) -> set[int]:
    """The partitions of the topic whose first segment holds bytes in this node's data dir."""
    segments = {p: data_dir / f"{topic}-{p}" / "00000000000000000000.log" for p in range(partitions)}
    return {p for p, seg in segments.items() if seg.exists() and seg.stat().st_size > 0}


def test_host_cpu_counts_busy_within_total() -> None:
    got = host_cpu()
    assert got is not None
    busy, total, softirq = got
    assert 0 <= softirq <= busy <= total and total > 0


def test_produce_and_fetch_through_a_two_node_cluster(tmp_path: Path) -> None:
    server = Sidecar(tmp_path, processes=2)
    try:
        server.start()
        pids = server.pids
        assert len(pids) == 3  # the supervisor and its two nodes
        pin(pids, [0])
        create_topic(server.bootstrap, "spread", 4)
        routes = leaders(server.bootstrap, "spread")
        ports = {server.port: 1, server.port + 1: 2}
        node_of = [ports[int(r.rpartition(":")[2])] for r in routes]
        # The README's placement: partition p of a topic on node 1 + (crc32(topic) + p) mod N.
        assert node_of == [1 + (zlib.crc32(b"spread") + p) % 2 for p in range(4)]
        r = asyncio.run(produce_load(routes, "spread", 8, _cfg(), pids))
        assert r["processes"] == 2 and r["errors"] == {}
        assert r["requests"] > 0 and r["p99_ms"] is not None
        assert r["server_cpu_us_per_request"] is not None and r["server_cpu_us_per_request"] > 0
        for node in (1, 2):  # each node holds exactly the partitions it leads
            assert _written(server.data_dir / f"node-{node}", "spread", 4) == {p for p in range(4) if node_of[p] == node}

        create_topic(server.bootstrap, "spread-fetch", 4)
        routes = leaders(server.bootstrap, "spread-fetch")
        asyncio.run(fill(routes, "spread-fetch", 0.4))
        f = asyncio.run(fetch_load(routes, "spread-fetch", 3, _cfg()))
        assert f["processes"] == 2 and f["errors"] == {} and f["mb_per_s"] > 0
    finally:
        server.stop()
