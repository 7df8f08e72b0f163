"""A 2-minute mixed soak (``make soak-mixed`` runs an hour, tests/soak/mixed.py): librdkafka,
kafka-python, aiokafka and Kafka's Java producer at once; a consumer group per client kind (the
Java one with the classic and the KIP-848 protocol) each consuming every acknowledged record
exactly once; a share group; Kafka's transactional copier read back read_committed; topics
created and deleted, DeleteRecords, retention and compaction running; no ERROR line, memory and
open files flat, every segment verified after a clean stop."""

from __future__ import annotations

import os

import pytest

from tests.soak.mixed import run
from tests.support import kafka_tool_missing

SECONDS = float(os.environ.get("SOAK_MIXED_TEST_SECONDS", "120"))


@pytest.mark.timeout(SECONDS + 780)  # 2 minutes, then up to 5 for the JVMs to start and 3 to catch up
@pytest.mark.skipif(kafka_tool_missing("kafka-verifiable-consumer.sh") is not None,
                    reason=str(kafka_tool_missing("kafka-verifiable-consumer.sh")))
def test_mixed_soak(tmp_path):
    result = run(SECONDS, rate=50, sample=15, data_dir=tmp_path / "data", verbose=False)
    summary = {k: v for k, v in result.items() if k != "samples"}
    assert result["ok"], summary
    assert set(result["by_producer"]) == {"librdkafka", "kafka-python", "aiokafka", "java"}, summary
    assert result["counts"].get("topics_churned", 0) >= 5 and result["counts"].get("txn_committed", 0) >= 1 \
        and result["counts"].get("txn_aborted", 0) >= 1, summary
