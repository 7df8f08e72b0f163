"""DescribeLogDirs (API 35): the data directory, its volume's space, and each partition's size.

Answered as Kafka's ReplicaManager.describeLogDirs answers it for one ``log.dirs`` entry:
the directory's absolute path, ``TotalBytes``/``UsableBytes`` of its file system (v4+), and
for each requested partition (every partition when the request's topic list is null) the
size of its segments and its offset lag (high watermark minus log end offset: always 0 here,
as on a leader). Topics none of whose requested partitions are hosted are left out.
v5's ``IsCordoned`` (KIP-1066) is always false: ``cordoned.log.dirs`` is not supported here, and
with it unset (its default) Kafka answers false too.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafka_sidecar.protocol import errors

from ..security.acls import AclOperation
from ..security.authorizer import CLUSTER_AUTHORIZATION_FAILED

if TYPE_CHECKING:
    from ..request_context import RequestContext
    from ..services import BrokerServices


def _space(path: Path) -> tuple[int, int]:
    """(total, usable) bytes of the file system holding ``path``, as Java's FileStore reports them."""
    st = os.statvfs(path)
    return st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize


def _describe(services: BrokerServices, request: Any) -> list[dict[str, Any]]:
    """One result for the data dir; runs in the storage thread (segment sizes, statvfs)."""
    lm = services.log_manager
    log_dir = str(Path(lm.data_dir).absolute())
    if request.topics is None:
        wanted = None
    else:
        wanted = {(t.topic, p) for t in request.topics for p in t.partitions}
    try:
        total, usable = _space(lm.data_dir)
    except OSError:
        return [{"error_code": errors.KAFKA_STORAGE_ERROR, "log_dir": log_dir, "topics": []}]
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for lg in sorted(lm.all_logs(), key=lambda lg: (lg.topic, lg.partition)):
        if wanted is not None and (lg.topic, lg.partition) not in wanted:
            continue
        with lg.lock:
            size = lg.size_in_bytes
            lag = max(lg.high_watermark - lg.log_end_offset, 0)
        by_topic.setdefault(lg.topic, []).append(
            {"partition_index": lg.partition, "partition_size": size, "offset_lag": lag, "is_future_key": False}
        )
    return [{
        "error_code": errors.NONE,
        "log_dir": log_dir,
        "topics": [{"name": name, "partitions": parts} for name, parts in by_topic.items()],
        "total_bytes": total,
        "usable_bytes": usable,
        "is_cordoned": False,
    }]


async def handle_describe_log_dirs(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    header = context.header
    if not services.authorizer.authorize_cluster(context, header, AclOperation.DESCRIBE):
        return {"throttle_time": 0, "error_code": CLUSTER_AUTHORIZATION_FAILED, "results": []}
    results = await services.run_blocking(_describe, services, request)
    return {"throttle_time": 0, "error_code": errors.NONE, "results": results}
