"""``kafka-sidecar delete-records``: Kafka's kafka-delete-records.sh, same JSON file, same output.

Output lines match Kafka's tool byte for byte, including its error lines, which
name the Java exception class and its default message. Kafka's tool exits 0 even then; ours
exits 1 when any partition failed, so a script notices.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any, TextIO

from kafka_sidecar.client import KafkaClient

# error code -> how Kafka's AdminClient renders the exception
JAVA_ERRORS: dict[int, str] = {
    1: "org.apache.kafka.common.errors.OffsetOutOfRangeException: The requested offset is not within the range of offsets maintained by the server.",
    3: "org.apache.kafka.common.errors.UnknownTopicOrPartitionException: This server does not host this topic-partition.",
    6: "org.apache.kafka.common.errors.NotLeaderOrFollowerException: For requests intended only for the leader, this error indicates that the broker is not the current leader. For requests intended for any replica, this error indicates that the broker is not a replica of the topic partition.",
    7: "org.apache.kafka.common.errors.TimeoutException: The request timed out.",
    29: "org.apache.kafka.common.errors.TopicAuthorizationException: Topic authorization failed.",
    44: "org.apache.kafka.common.errors.PolicyViolationException: Request parameters do not satisfy the configured policy.",
}


class OffsetFileError(ValueError):
    pass


def read_offset_json(path: Path) -> list[tuple[str, int, int]]:
    """Parse Kafka's offset JSON: {"partitions":[{"topic","partition","offset"}],"version":1}."""
    try:
        data = json.loads(Path(path).read_text())
        entries = [(str(p["topic"]), int(p["partition"]), int(p["offset"])) for p in data["partitions"]]
    except OSError as e:
        raise OffsetFileError(f"cannot read {path}: {e.strerror}") from None
    except (ValueError, KeyError, TypeError) as e:
        raise OffsetFileError(f"{path} is not a valid offset JSON file: {e}") from None
    seen = set()
    for topic, partition, _ in entries:
        if (topic, partition) in seen:
            raise OffsetFileError(f"Offset json file contains duplicate topic partitions: {topic}-{partition}")
        seen.add((topic, partition))
    return entries


def delete_records(bootstrap: str, entries: list[tuple[str, int, int]], out: TextIO = sys.stdout, timeout_ms: int = 30000,
                   command_config: dict[str, str] | None = None) -> int:
    out.write("Executing records delete operation\n")
    out.flush()
    client = KafkaClient(bootstrap, client_id="adminclient-kafka-sidecar", command_config=command_config)
    results: dict[tuple[str, int], tuple[int, int]] = {}
    try:
        meta = client.metadata(sorted({t for t, _, _ in entries}))
        leaders = {(t.name, p.partition_index): p.leader_id for t in meta.topics for p in t.partitions}
        by_leader: dict[int, list[tuple[str, int, int]]] = defaultdict(list)
        for topic, partition, offset in entries:
            leader = leaders.get((topic, partition))
            if leader is None or leader < 0:
                results[(topic, partition)] = (3, -1)
            else:
                by_leader[leader].append((topic, partition, offset))
        for leader, items in by_leader.items():
            topics: dict[str, list[dict[str, Any]]] = defaultdict(list)
            for topic, partition, offset in items:
                topics[topic].append({"partition_index": partition, "offset": offset})
            _, body = client.node(leader).request(21, {
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
                "timeout": timeout_ms,
            }, max_version=2)
            for t in body.topics:
                for p in t.partitions:
                    results[(t.name, p.partition_index)] = (p.error_code.value, p.low_watermark)
    finally:
        client.close()
    out.write("Records delete operation completed:\n")
    failed = False
    for topic, partition, _ in entries:
        code, low = results.get((topic, partition), (3, -1))
        if code == 0:
            out.write(f"partition: {topic}-{partition}\tlow_watermark: {low}\n")
        else:
            failed = True
            message = JAVA_ERRORS.get(code, f"org.apache.kafka.common.errors.ApiException: error code {code}")
            out.write(f"partition: {topic}-{partition}\terror: {message}\n")
    out.flush()
    return 1 if failed else 0
