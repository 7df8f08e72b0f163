"""bench/scale.py at tiny sizes against our server only: every axis runs and the JSON holds
every figure with sane values (the full run, with the reference, is the lead's to make)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import scale


def test_scale_small_run_writes_every_figure(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "scale.json"
    code = scale.main(["--partitions", "1,10", "--no-reference", "--big-mb", "20", "--spread-records", "2000",
                       "--spread-warmup", "200", "--connections", "1,4", "--consumers", "1", "--connection-seconds", "0.5",
                       "--fetch-mb", "2", "--json", str(out)])
    assert code == 0
    got = json.loads(out.read_text())

    assert set(got["partitions"]) == {"1", "10"}
    for p, point in got["partitions"].items():
        ours = point["kafka-sidecar"]
        assert point["kafka"] == {"unavailable": "--no-reference"}
        for case in ("clean_restart", "kill9_restart"):
            assert 0 < ours[case]["seconds"] < 60
            assert 10 < ours[case]["rss_mb"] < 1000
            assert ours[case]["open_fds"] >= int(p)  # at least one open segment per partition
        spread = ours["produce_spread"]
        assert spread["partitions"] == int(p) and spread["records"] == 2000
        assert spread["records_per_s"] > 0 and spread["mb_per_s"] > 0 and spread["server_cpu_pct"] >= 0  # clock ticks: 0 for a short run
        assert len(spread["runs"]) == 3 and spread["cold"]["records"] == 200
        assert spread["runs"][1]["records_per_s"] == spread["records_per_s"]  # the median run

    big = got["big_partition"]["kafka-sidecar"]
    assert big["acked_mb"] >= 20 and big["last_acked_offset"] == big["acked_records"] - 1
    assert big["lost"] is False and big["high_watermark"] > big["last_acked_offset"]
    assert 0 < big["list_offsets_seconds"] <= big["serve_seconds"] < 60

    conn = got["connections"]
    assert [r["connections"] for r in conn["kafka-sidecar"]["produce"]] == [1, 4]
    assert all(r["requests"] > 0 and r["errors"] == {} for r in conn["kafka-sidecar"]["produce"])
    assert conn["kafka-sidecar"]["fetch"][0]["mb_per_s"] > 0

    rows = got["rows"]
    assert {r["load"] for r in rows} >= {"1 partitions", "10 partitions", "1 partition, 20 MB", "produce x4 connections",
                                         "fetch x1 consumers"}
    assert all(r["kafka"] is None and r["ratio"] is None for r in rows)
    assert [r["met"] for r in rows if r["goal"] == "none lost"] == [True]
    table = capsys.readouterr().out
    assert "restart after kill -9 (s)" in table and "kill -9 mid-produce: serving (s)" in table
