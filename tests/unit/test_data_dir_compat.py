"""A data dir written before the metadata left LogManager (tests/data/sidecar-0.1-datadir, written
by the LogManager of commit 2a534bb: two topics with config overrides, a grown partition count,
three producer ids handed out, dynamic broker configs at both scopes, one record) loads the same
through the TopicRegistry, ProducerIdManager and DynamicBrokerConfig, and is written back in the
same layout."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from kafka_sidecar.storage.dynamic_broker_config import BROKER_CONFIGS_FILE, DynamicBrokerConfig
from kafka_sidecar.storage.log_manager import LogManager
from kafka_sidecar.storage.metadata_files import TOPICS_FILE, kafka_uuid_str
from kafka_sidecar.storage.producer_id_manager import PRODUCER_ID_FILE, ProducerIdManager

from tests.support import REPO

FIXTURE = REPO / "tests" / "data" / "sidecar-0.1-datadir"


def _open(d: Path) -> tuple[LogManager, DynamicBrokerConfig, ProducerIdManager]:
    """What Broker does at start: lock, dynamic configs (the logs' defaults), then the logs."""
    lm = LogManager(d, {})
    dyn = DynamicBrokerConfig(d, {}, lm.reconfigure_default_log_config)
    lm.lock_data_dir()
    lm.broker_log_defaults = dyn.load()
    lm.startup()
    return lm, dyn, ProducerIdManager(d, lm.highest_producer_id)


def test_a_data_dir_from_before_the_split_loads_the_same(tmp_path: Path) -> None:
    d = tmp_path / "data"
    shutil.copytree(FIXTURE, d)
    stored = json.loads((FIXTURE / TOPICS_FILE).read_text())["topics"]
    lm, dyn, pids = _open(d)
    try:
        topics = lm.metadata.topics
        assert {n: (kafka_uuid_str(t.topic_id), t.partitions, t.configs) for n, t in topics.items()} == {
            n: (s["topic_id"], s["partitions"], s["configs"]) for n, s in stored.items()}
        assert set(lm.metadata.topics_by_id) == {t.topic_id for t in topics.values()}
        assert sorted(lm.logs) == [("compacted", 0), ("plain", 0), ("plain", 1), ("plain", 2)]
        assert [lm.get_log("plain", p).log_end_offset for p in range(3)] == [0, 1, 0]
        # Dynamic configs: the node's segment.bytes and the cluster's retention.ms reach the logs;
        # the topics' own overrides win over them.
        assert dyn.get("") == {"log.retention.ms": "7200000"} and dyn.get("1") == {"log.segment.bytes": "2097152"}
        plain, compacted = lm.get_log("plain", 0).config, lm.get_log("compacted", 0).config
        assert (plain.segment_bytes, plain.retention_ms, plain.retention_bytes) == (2097152, 7200000, 1048576)
        assert (compacted.compact, compacted.retention_ms) == (True, 3600000)
        # Three ids were handed out: the next is 3, and the file says 4 after it.
        assert pids.allocate() == 3
        assert (d / PRODUCER_ID_FILE).read_text() == "4\n"
    finally:
        lm.shutdown()
    # Written back in the same layout: the topics and broker-configs files as the old code wrote them.
    assert json.loads((d / TOPICS_FILE).read_text()) == json.loads((FIXTURE / TOPICS_FILE).read_text())
    assert (d / BROKER_CONFIGS_FILE).read_bytes() == (FIXTURE / BROKER_CONFIGS_FILE).read_bytes()
    dyn2 = DynamicBrokerConfig(d, {})
    dyn2.load()
    dyn2.set("", {"log.retention.ms": "7200000"})  # the same change again: the same bytes
    assert (d / BROKER_CONFIGS_FILE).read_bytes() == (FIXTURE / BROKER_CONFIGS_FILE).read_bytes()


def test_a_topic_whose_dirs_vanished_keeps_its_declared_partitions(tmp_path: Path) -> None:
    d = tmp_path / "data"
    shutil.copytree(FIXTURE, d)
    shutil.rmtree(d / "plain-2")
    lm, _dyn, _pids = _open(d)
    try:
        assert lm.metadata.topics["plain"].partitions == 3 and lm.get_log("plain", 2) is not None
    finally:
        lm.shutdown()
