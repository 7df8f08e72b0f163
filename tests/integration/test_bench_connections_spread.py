"""bench/connections.py with ``--sidecar-processes 2``: two real kafka-sidecar processes, each
written and read only on the partitions it leads (partition p on process p mod 2)."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from bench.connections import (
    create_topic,
    fetch_load_spread,
    fill,
    host_cpu,
    leader_index,
    produce_load_spread,
)
from bench.run import Sidecar


def _cfg() -> argparse.Namespace:
    return argparse.Namespace(warmup=0.2, seconds=0.5, batch_records=5, value_size=50)


def _written(data_dir: Path, topic: str, partitions: int) -> set[int]:
    """The partitions of the topic whose first segment holds bytes."""
    segments = {p: data_dir / f"{topic}-{p}" / "00000000000000000000.log" for p in range(partitions)}
    return {p for p, seg in segments.items() if seg.exists() and seg.stat().st_size > 0}


def test_leader_index_spreads_partitions_evenly() -> None:
    assert [leader_index(p, 1) for p in range(4)] == [0, 0, 0, 0]
    assert [leader_index(p, 2) for p in range(8)] == [0, 1, 0, 1, 0, 1, 0, 1]
    assert sorted(leader_index(p, 3) for p in range(9)) == [0, 0, 0, 1, 1, 1, 2, 2, 2]


def test_host_cpu_counts_busy_within_total() -> None:
    got = host_cpu()
    assert got is not None
    busy, total, softirq = got
    assert 0 <= softirq <= busy <= total and total > 0


def test_produce_and_fetch_spread_over_two_processes(tmp_path: Path) -> None:
    servers = []
    for k in (1, 2):
        (tmp_path / f"node-{k}").mkdir()
        servers.append(Sidecar(tmp_path / f"node-{k}"))
    try:
        for s in servers:
            s.start()
        bootstraps = [s.bootstrap for s in servers]
        for b in bootstraps:
            create_topic(b, "spread", 4)
        r = asyncio.run(produce_load_spread(bootstraps, "spread", 4, 8, _cfg(), [s.pid for s in servers]))
        assert r["processes"] == 2 and r["errors"] == {}
        assert r["requests"] > 0 and r["p99_ms"] is not None
        assert r["server_cpu_us_per_request"] is not None and r["server_cpu_us_per_request"] > 0
        # Each process got exactly the partitions it leads.
        assert _written(servers[0].data_dir, "spread", 4) == {0, 2}
        assert _written(servers[1].data_dir, "spread", 4) == {1, 3}

        for k, b in enumerate(bootstraps):
            create_topic(b, "spread-fetch", 4)
            asyncio.run(fill(b, "spread-fetch", 4, 0.4, only=[p for p in range(4) if leader_index(p, 2) == k]))
        assert _written(servers[0].data_dir, "spread-fetch", 4) == {0, 2}
        assert _written(servers[1].data_dir, "spread-fetch", 4) == {1, 3}
        f = asyncio.run(fetch_load_spread(bootstraps, "spread-fetch", 4, 3, _cfg()))
        assert f["processes"] == 2 and f["errors"] == {} and f["mb_per_s"] > 0
    finally:
        for s in servers:
            s.stop()
