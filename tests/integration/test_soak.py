"""A 15-second soak (``make soak`` runs 10 minutes): producers and consumers (standalone and in a
group) on loopback; no error, every acknowledged record consumed at its offset, memory flat,
every segment verified after a clean stop (tests/soak/soak.py)."""

from __future__ import annotations

import os

from tests.soak.soak import run

SECONDS = float(os.environ.get("SOAK_TEST_SECONDS", "15"))


def test_short_soak(tmp_path):
    result = run(SECONDS, producers=3, consumers=4, rate=200, partitions=4, data_dir=tmp_path / "data", verbose=False)
    assert result["ok"], result
    assert result["records_acknowledged"] >= SECONDS * 3 * 200 * 0.5
