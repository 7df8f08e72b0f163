"""glibc malloc settings for the serving process: large request buffers reused, not re-faulted.

A Produce of large batches allocates megabyte buffers per request (the frame, the copy the
offsets are written into). glibc gives such a buffer back to the kernel when it is freed (an
``munmap`` above its mmap threshold, or a trim of the heap's top above its trim threshold, which
its dynamic threshold sets to only twice the largest buffer seen), so the next request faults
every page in again: measured with one confluent-kafka producer of 1 KB records (linger 5 ms,
200,000 records, ~1 MB requests) 21,000-58,000 minor faults per run on the loop, 80,000 when
answers are made inside ``data_received``, and ~300 with the settings below, at 10-40% less
CPU. Kept: up to ``TRIM_THRESHOLD`` of freed heap stays with the process after a burst
(requests larger than ``MMAP_THRESHOLD`` still get their own mapping). A user's own
``MALLOC_*_`` or ``GLIBC_TUNABLES`` settings win. Only ``serve`` calls this: an embedded broker
(``kafka_sidecar.testing``) leaves its host process's allocator alone.
"""

from __future__ import annotations

import logging
import os

log = logging.getLogger(__name__)

_M_TRIM_THRESHOLD = -1  # glibc's mallopt parameter numbers (malloc.h)
_M_MMAP_THRESHOLD = -3
TRIM_THRESHOLD = 32 << 20
MMAP_THRESHOLD = 16 << 20  # glibc caps it at 32 MiB on 64-bit
_USER_SETTINGS = ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_", "GLIBC_TUNABLES")


def tune_malloc() -> bool:
    """Set glibc's trim and mmap thresholds; False where not glibc or the user set their own."""
    if any(name in os.environ for name in _USER_SETTINGS):
        return False
    try:
        if not os.confstr("CS_GNU_LIBC_VERSION"):
            return False
    except (ValueError, OSError):  # not glibc (musl, macOS)
        return False
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    ok = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    if not ok:
        log.debug("mallopt refused the trim/mmap thresholds: glibc's defaults stay")
    return ok
