"""Conformance: tombstones on an idle compacted log stay until its next real cleaning.

Kafka's LogCleanerManager picks a log for its dirty bytes only (dirty ratio, or dirty bytes
past ``max.compaction.lag.ms``): a tombstone whose delete horizon (KIP-534, set in its batch
at the first cleaning) has passed is not a reason to clean. So on a log that receives nothing
more the expired tombstone stays and is fetched; new dirt makes the log cleanable, and that
cleaning drops it. Both brokers run with ``log.cleaner.backoff.ms=500`` (``BROKER_OVERRIDES``).
"""

from __future__ import annotations

import time
from typing import Any

from tests.conformance.harness import Ctx, wait_for
from tests.conformance.wire import batch, now_ms

DELETE_RETENTION_MS = 1000


def scenario_idle_tombstones(ctx: Ctx) -> dict[str, Any]:
    ctx.target.require_fast_timers()
    w = ctx.wire()
    t = ctx.topic("idle")
    w.create_topic(t, configs={"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01", "segment.ms": "100",
                               "min.compaction.lag.ms": "0", "delete.retention.ms": str(DELETE_RETENTION_MS)})
    base = now_ms() - 60_000

    def produce(r: int, items: list[tuple[str, str | None]]) -> tuple[int, int]:
        # One round a second apart in timestamps: segment.ms=100 rolls a segment at each round.
        res = w.produce(t, batch([None if v is None else v.encode() for _, v in items], keys=[k.encode() for k, _ in items],
                                 timestamps=[base + 1000 * r + j for j in range(len(items))]))
        return res["error"], res["base_offset"]

    def survivors() -> list[tuple[int, str, str | None]]:
        return [(rec.offset, rec.key.decode(), None if rec.value is None else rec.value.decode()) for rec in w.records(t)]

    produced = [produce(0, [(f"k{i}", f"r0-k{i}") for i in range(5)])]  # 0-4
    produced.append(produce(1, [("k0", None), ("k1", "r1-k1")]))  # 5: tombstone of k0, 6
    produced.append(produce(2, [("k9", "active")]))  # 7: stays in the active segment
    first_pass = wait_for(lambda: [o for o, _, _ in survivors()][:2] == [2, 3], timeout=30, interval=0.25)
    after_first = survivors()
    time.sleep(DELETE_RETENTION_MS / 1000 + 2.5)  # past the horizon, five cleaner backoffs
    idle = survivors()
    horizons = [(b.base_offset, b.has_delete_horizon) for b in w.fetch_all(t)]
    produced.append(produce(3, [("k2", "r3-k2")]))  # 8: new dirt ...
    produced.append(produce(4, [("k9", "active-2")]))  # 9: ... rolled out of the active segment
    second_pass = wait_for(lambda: all(v is not None for _, _, v in survivors()) and survivors()[0][0] == 3,
                           timeout=30, interval=0.25)
    return {
        "produced": produced,
        "first_pass": bool(first_pass),
        "after_first_pass": after_first,
        "idle_past_horizon": idle,
        "batches_with_horizon": horizons,
        "second_pass": bool(second_pass),
        "after_new_dirt": survivors(),
        "offsets": w.offsets(t),
    }


def test_idle_tombstones(conform):
    obs = conform(scenario_idle_tombstones)
    assert obs["first_pass"] and obs["second_pass"], obs
    tombstone = [5, "k0", None]
    assert tombstone in obs["after_first_pass"]
    assert obs["idle_past_horizon"] == obs["after_first_pass"], "an idle log lost its expired tombstone"
    assert tombstone not in obs["after_new_dirt"]
    assert obs["after_new_dirt"] == [[3, "k3", "r0-k3"], [4, "k4", "r0-k4"], [6, "k1", "r1-k1"],
                                     [7, "k9", "active"], [8, "k2", "r3-k2"], [9, "k9", "active-2"]]
