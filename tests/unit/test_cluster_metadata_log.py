"""The cluster's topic log (server/cluster/metadata_log.py) as two nodes see it: a node that has
read another's record but not finished applying it still has news, so a request arriving meanwhile
waits for the catch-up instead of answering without the topic (found by the cluster crash
harness: Metadata at node 1 answered UNKNOWN_TOPIC_OR_PARTITION right after CreateTopics through
node 2, while node 1's periodic catch-up was still creating the topic's logs)."""

from __future__ import annotations

from kafka_sidecar.server.cluster.metadata_log import MetadataLog


def test_news_until_applied(tmp_path):
    one, two = MetadataLog(tmp_path), MetadataLog(tmp_path)
    try:
        with two.turn(lambda records: None):
            two.append({"op": "topic", "name": "t", "topic_id": "AAAAAAAAAAAAAAAAAAAAAA", "partitions": 2, "configs": {}})
        assert one.has_news() and not two.has_news()
        seen_during_apply = []

        def apply(records):
            seen_during_apply.append(([r["name"] for r in records], one.has_news()))

        one.caught_up(apply)
        assert seen_during_apply == [(["t"], True)]  # read, not yet applied: still news
        assert not one.has_news()
        assert one.topics["t"]["partitions"] == 2
    finally:
        one.close()
        two.close()
