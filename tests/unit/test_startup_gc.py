"""The garbage collector while logs load (storage/log_manager.py ``gc_paused``).

Loading leaves long-lived objects (logs, segments, indexes): the collector is off meanwhile,
they are frozen after (left out of later collections), and unfrozen again when the log manager
shuts down or a topic is deleted, so nothing stays frozen for good.
"""

from __future__ import annotations

import gc
from pathlib import Path

from kafka_sidecar.storage.log_manager import LogManager, gc_paused


def test_collector_paused_during_load_then_restored() -> None:
    seen = []
    assert gc.isenabled()
    with gc_paused():
        seen.append(gc.isenabled())
    assert seen == [False] and gc.isenabled()
    assert gc.get_freeze_count() > 0
    gc.unfreeze()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # left as it was found
    finally:
        gc.unfreeze()
        gc.enable()


def test_startup_freezes_and_shutdown_unfreezes(tmp_path: Path) -> None:
    lm = LogManager(tmp_path / "data")
    lm.startup()
    try:
        lm.create_topic("t", 3)
        assert gc.get_freeze_count() > 0
        lm.delete_topic("t")
        assert gc.get_freeze_count() == 0  # the deleted logs' cycles are collectable again
    finally:
        lm.shutdown()
    lm2 = LogManager(tmp_path / "data")
    lm2.startup()
    assert gc.get_freeze_count() > 0 and gc.isenabled()
    lm2.shutdown()
    assert gc.get_freeze_count() == 0
