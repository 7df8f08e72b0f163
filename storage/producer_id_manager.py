"""ProducerIdManager: hands out producer ids (InitProducerId), never the same twice across restarts.

Kafka's controller allocates blocks of ids through its metadata log (ProducerIdControlManager);
a sidecar keeps the next id in ``sidecar-producer-id`` in the data dir, written before an id is
handed out.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

from . import checkpoint

log = logging.getLogger("kafka_sidecar.storage.log_manager")  # the logger operators know these lines by

PRODUCER_ID_FILE = "sidecar-producer-id"
# Ids in use from here up are not counted: a client may write any producer id into an
# idempotent batch (Kafka accepts it; its controller's allocator never looks at logs), and
# continuing after such an id would run the counter off the int64 range (found by fuzzing: one
# Produce with producer id 2**63-1 made every later InitProducerId fail). Counting up from 0,
# the allocator never gets near it.
FOREIGN_PRODUCER_IDS = 2**62


class ProducerIdManager:
    def __init__(self, data_dir: Path, highest_in_use: Callable[[int], int]) -> None:
        """``highest_in_use(below)``: the highest producer id below ``below`` some log holds state
        for (-1 if none)."""
        self.path = Path(data_dir) / PRODUCER_ID_FILE
        self._highest_in_use = highest_in_use
        self._lock = threading.Lock()
        # A node of a ``--processes N`` cluster hands out only the ids ``k - 1 mod N`` (set
        # ``stride = N``, ``offset = k - 1``): no two nodes ever hand out the same id.
        self.stride = 1
        self.offset = 0

    def allocate(self) -> int:
        """Next producer id, persisted before it is handed out so a restart never reuses it.
        Blocking (a file write): on the storage thread."""
        with self._lock:
            path = self.path
            try:
                next_id = int(path.read_text().strip())
            except FileNotFoundError:
                next_id = 0
            except (OSError, ValueError) as e:
                log.warning("ignoring unreadable %s (%s): next producer id recomputed from the logs", path, e)
                next_id = 0
            # Never hand out an id some log already holds state for (a damaged or lost file).
            known = self._highest_in_use(FOREIGN_PRODUCER_IDS)
            if next_id <= known:
                if path.exists() and known % self.stride == self.offset:  # (ids of other nodes are expected)
                    log.warning("%s says %d but producer id %d is in use: continuing from %d", path.name, next_id, known, known + 1)
                next_id = known + 1
            next_id += (self.offset - next_id) % self.stride
            checkpoint.atomic_write(path, f"{next_id + 1}\n".encode())
            return next_id
