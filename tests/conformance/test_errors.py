"""Conformance: the answer to each bad request (error code, and the message a client shows).

Bad requests on produce, fetch, ListOffsets, DeleteRecords, CreateTopics, DeleteTopics and
the config APIs; bad topic names; invalid configs. Each case records the error code and the
error message (messages are part of what admin clients print); topic names in messages are
normalized to ``<logical>``. After the bad produce requests the log must hold exactly the
accepted records (nothing partly appended).
"""

from __future__ import annotations

import uuid
from typing import Any

from tests.conformance.harness import Ctx, wait_for
from tests.conformance.wire import (
    BROKER_RESOURCE,
    LATEST,
    TOPIC_RESOURCE,
    Wire,
    batch,
    corrupt_crc,
    now_ms,
)

MAX_MESSAGE_BYTES = 2000
BROKER_MESSAGE_MAX_BYTES = 1048588  # Kafka's default message.max.bytes


def sized_batch(size: int) -> bytes:
    """A one-record batch of exactly ``size`` bytes (log overhead included)."""
    n = max(0, size - 80)
    for _ in range(50):
        raw = batch([b"x" * n], timestamp=now_ms())
        if len(raw) == size:
            return raw
        n += size - len(raw)
    raise AssertionError(f"could not build a batch of {size} bytes")


def short(r: dict[str, Any]) -> dict[str, Any]:
    """A produce answer without the fields that depend on what was accepted before."""
    return {"error": r["error"], "base_offset": r["base_offset"], "log_start_offset": r["log_start_offset"],
            "message": r["message"], "record_errors": r["record_errors"]}


def scenario_errors(ctx: Ctx) -> dict[str, Any]:
    w = ctx.wire()
    t = ctx.topic("limited")
    plain_t, compact, compact_delete = ctx.topic("plain"), ctx.topic("compact"), ctx.topic("compact-delete")
    future, past = ctx.topic("future"), ctx.topic("past")
    missing = ctx.topic("missing")
    w.create_topic(t, configs={"max.message.bytes": str(MAX_MESSAGE_BYTES)})
    w.create_topic(plain_t)
    w.create_topic(compact, configs={"cleanup.policy": "compact"})
    w.create_topic(compact_delete, configs={"cleanup.policy": "compact,delete"})
    w.create_topic(future)
    w.create_topic(past)
    obs: dict[str, Any] = {}

    # ---- produce
    p: dict[str, Any] = {}
    p["ok"] = short(w.produce(t, batch([b"a", b"b"])))
    p["exactly_max_message_bytes"] = short(w.produce(t, sized_batch(MAX_MESSAGE_BYTES)))
    p["one_byte_over_max_message_bytes"] = short(w.produce(t, sized_batch(MAX_MESSAGE_BYTES + 1)))
    p["ok_plain"] = short(w.produce(plain_t, batch([b"p"])))
    p["over_broker_message_max_bytes"] = short(w.produce(plain_t, sized_batch(BROKER_MESSAGE_MAX_BYTES + 1)))
    p["bad_crc"] = short(w.produce(t, corrupt_crc(batch([b"y" * 10]))))
    p["truncated_batch"] = short(w.produce(t, batch([b"z" * 10])[:-5]))
    p["unknown_topic"] = short(w.produce(missing, batch([b"a"])))
    p["unknown_partition"] = short(w.produce(t, batch([b"a"]), partition=7))
    p["acks_2"] = short(w.produce(t, batch([b"a"]), acks=2))
    p["keyless_on_compacted"] = short(w.produce(compact, batch([b"v", b"w"], keys=[b"k", None])))
    p["keyed_on_compacted"] = short(w.produce(compact, batch([b"v"], keys=[b"k"])))
    p["timestamp_3h_ahead"] = short(w.produce(future, batch([b"f"], timestamp=now_ms() + 3 * 3_600_000)))
    p["timestamp_1y_behind"] = short(w.produce(past, batch([b"old"], timestamp=now_ms() - 365 * 86_400_000)))
    obs["produce"] = p
    obs["limited_log_after_bad_produces"] = {
        "offsets": w.offsets(t), "records": [(r.offset, len(r.value or b"")) for r in w.records(t)],
    }

    # ---- fetch and ListOffsets
    f: dict[str, Any] = {}
    hw = w.offsets(t)[1]

    def fetch_codes(topic: str, partition: int, offset: int) -> dict[str, Any]:
        r = w.fetch(topic, partition, offset)
        return {k: r[k] for k in ("error", "high_watermark", "last_stable_offset", "log_start_offset")} | {"bytes": len(r["records"])}

    f["at_hw"] = fetch_codes(t, 0, hw)
    f["beyond_hw"] = fetch_codes(t, 0, hw + 5)
    f["negative_offset"] = fetch_codes(t, 0, -1)
    f["unknown_topic"] = fetch_codes(missing, 0, 0)
    f["unknown_partition"] = fetch_codes(t, 7, 0)
    f["unknown_topic_id_v13"] = w.fetch_by_id(uuid.uuid4())
    f["list_offsets_unknown_topic"] = w.list_offsets(missing, 0, LATEST)
    f["list_offsets_unknown_partition"] = w.list_offsets(t, 7, LATEST)
    # Negative timestamps other than -1/-2/-3 at ListOffsets v7: -4 (EARLIEST_LOCAL) needs v8, -7 means nothing.
    f["list_offsets_v7_timestamp_-4"] = w.list_offsets(plain_t, 0, -4)
    f["list_offsets_v7_timestamp_-7"] = w.list_offsets(plain_t, 0, -7)
    obs["fetch"] = f

    # ---- DeleteRecords
    d: dict[str, Any] = {}
    d["beyond_hw"] = w.delete_records(t, 0, hw + 1)
    d["unknown_topic"] = w.delete_records(missing, 0, 0)
    d["unknown_partition"] = w.delete_records(t, 7, 0)
    d["compact_topic"] = w.delete_records(compact, 0, 1)
    d["compact_delete_topic"] = w.delete_records(compact_delete, 0, 0)
    d["to_1"] = w.delete_records(t, 0, 1)
    d["fetch_below_log_start"] = fetch_codes(t, 0, 0)
    d["minus_1_is_hw"] = w.delete_records(t, 0, -1)
    d["minus_2"] = w.delete_records(t, 0, -2)
    d["offsets_after"] = w.offsets(t)
    obs["delete_records"] = d

    # ---- topic names and partition counts (CreateTopics)
    bad_names = {"space": "bad name!", "dot": ".", "dotdot": "..", "too_long": "x" * 250, "empty": "",
                 "slash": "a/b", "unicode": "t\u00e9st"}
    obs["create_bad_names"] = {k: _create(w, name) for k, name in bad_names.items()}
    obs["create_249_chars"] = _create(w, ctx.topic("l") + "x" * (249 - len(ctx.topic("l"))), validate_only=True)
    auto = ctx.topic("auto")
    obs["metadata_auto_create_first_answer"] = [(x["name"], x["error_code"]) for x in w.metadata([auto], auto_create=True)["topics"]]
    w.wait_ready(auto)
    obs["metadata_auto_create_then"] = [(x["name"], x["error_code"], len(x["partitions"])) for x in w.metadata([auto])["topics"]]
    obs["metadata_auto_create_bad_name"] = [(x["name"], x["error_code"]) for x in w.metadata(["bad name!"], auto_create=True)["topics"]]
    obs["create_existing"] = _create(w, t)
    dotted = ctx.topic("a.b")
    obs["create_dotted"] = _create(w, dotted)
    obs["create_colliding_underscore"] = _create(w, ctx.alias(dotted.replace(".", "_"), "a_b"))
    obs["create_partitions_0"] = _create(w, ctx.topic("p0"), partitions=0, validate_only=True)
    obs["create_partitions_-5"] = _create(w, ctx.topic("p-5"), partitions=-5, validate_only=True)
    obs["create_rf_2"] = _create(w, ctx.topic("rf2"), rf=2, validate_only=True)
    obs["create_rf_0"] = _create(w, ctx.topic("rf0"), rf=0, validate_only=True)
    obs["create_defaults_-1"] = _create(w, ctx.topic("defaults"), partitions=-1, rf=-1, validate_only=True)
    obs["create_same_name_twice_in_one_request"] = {
        k: v for k, v in w.create_topics([{"name": ctx.topic("twice")}, {"name": ctx.topic("twice")}], validate_only=True).items()
    }
    obs["delete_unknown_topic"] = w.delete_topics([missing])
    obs["metadata_unknown_topic"] = [(x["name"], x["error_code"]) for x in w.metadata([missing])["topics"]]
    return obs


def _create(w: Wire, name: str, partitions: int = 1, rf: int = 1, configs: dict[str, str] | None = None,
            validate_only: bool = False) -> dict[str, Any]:
    res = w.create_topics([{"name": name, "partitions": partitions, "rf": rf, "configs": configs or {}}], validate_only)
    (r,) = res.values()
    return r


def test_error_codes(conform):
    obs = conform(scenario_errors)
    p = obs["produce"]
    assert p["ok"]["error"] == 0
    assert p["one_byte_over_max_message_bytes"]["error"] == 10  # MESSAGE_TOO_LARGE
    assert p["bad_crc"]["error"] == 2  # CORRUPT_MESSAGE
    assert p["unknown_topic"]["error"] == 3  # UNKNOWN_TOPIC_OR_PARTITION
    assert p["keyless_on_compacted"]["error"] == 87  # INVALID_RECORD
    assert obs["fetch"]["beyond_hw"]["error"] == 1  # OFFSET_OUT_OF_RANGE
    assert obs["delete_records"]["beyond_hw"]["error"] == 1
    assert obs["delete_records"]["compact_topic"]["error"] == 44  # POLICY_VIOLATION
    assert all(r["error"] == 17 for r in obs["create_bad_names"].values())  # INVALID_TOPIC_EXCEPTION
    assert obs["create_existing"]["error"] == 36  # TOPIC_ALREADY_EXISTS


# --------------------------------------------------------------------------- invalid configs

BAD_TOPIC_CONFIGS = {
    "cleanup.policy": "bogus",
    "retention.ms": "abc",
    "retention.bytes": "1.5",
    "segment.bytes": "100",
    "segment.ms": "0",
    "max.message.bytes": "-1",
    "min.insync.replicas": "0",
    "min.cleanable.dirty.ratio": "2",
    "message.timestamp.type": "Foo",
    "compression.type": "brotli",
    "unclean.leader.election.enable": "maybe",
    "foo.bar": "1",
}
GOOD_TOPIC_CONFIGS = {"segment.bytes": "1048576", "retention.ms": "-1", "cleanup.policy": "compact,delete",
                      "min.cleanable.dirty.ratio": "0.01", "compression.type": "zstd"}


def scenario_configs(ctx: Ctx) -> dict[str, Any]:
    w = ctx.wire()
    t = ctx.topic("t")
    w.create_topic(t, configs={"retention.ms": "3600000"})
    obs: dict[str, Any] = {}
    obs["create_bad"] = {k: _create(w, ctx.topic("bad"), configs={k: v}, validate_only=True) for k, v in BAD_TOPIC_CONFIGS.items()}
    obs["create_good"] = {k: _create(w, ctx.topic("good"), configs={k: v}, validate_only=True) for k, v in GOOD_TOPIC_CONFIGS.items()}
    obs["incremental_set_bad"] = {k: w.incremental_alter_configs(TOPIC_RESOURCE, t, [(k, 0, v)]) for k, v in BAD_TOPIC_CONFIGS.items()}
    obs["alter_bad"] = {k: w.alter_configs(TOPIC_RESOURCE, t, {k: v}, validate_only=True) for k, v in BAD_TOPIC_CONFIGS.items()}
    obs["incremental_unknown_topic"] = w.incremental_alter_configs(TOPIC_RESOURCE, ctx.topic("missing"), [("retention.ms", 0, "1")])
    obs["incremental_bad_operation"] = w.incremental_alter_configs(TOPIC_RESOURCE, t, [("retention.ms", 7, "1")])
    obs["incremental_append_to_non_list"] = w.incremental_alter_configs(TOPIC_RESOURCE, t, [("retention.ms", 2, "1")])
    obs["incremental_delete_unknown_key"] = w.incremental_alter_configs(TOPIC_RESOURCE, t, [("foo.bar", 1, None)])
    obs["incremental_same_key_twice"] = w.incremental_alter_configs(TOPIC_RESOURCE, t, [("retention.ms", 0, "1"), ("retention.ms", 0, "2")])
    obs["incremental_broker_read_only"] = w.incremental_alter_configs(
        BROKER_RESOURCE, str(ctx.target.node_id), [("log.retention.check.interval.ms", 0, "5000")], validate_only=True)
    obs["incremental_unknown_broker"] = w.incremental_alter_configs(BROKER_RESOURCE, "99", [("log.cleaner.backoff.ms", 0, "500")], validate_only=True)
    obs["describe_unknown_topic"] = {k: v for k, v in w.describe_configs(TOPIC_RESOURCE, ctx.topic("missing")).items() if k in ("error_code", "error_message", "configs")}
    # What a topic's configs look like after the valid changes (value, source, read-only, sensitive, type).
    obs["incremental_good"] = w.incremental_alter_configs(TOPIC_RESOURCE, t, [("segment.bytes", 0, "2097152"), ("retention.ms", 1, None),
                                                                             ("cleanup.policy", 2, "compact")])

    def changed() -> dict[str, Any] | None:
        # Kafka applies a change when the controller's metadata reaches the broker: a moment later.
        d = w.describe_configs(TOPIC_RESOURCE, t)
        return d if {c["name"]: c["value"] for c in d["configs"]}.get("segment.bytes") == "2097152" else None

    described = wait_for(changed, timeout=15, interval=0.1) or w.describe_configs(TOPIC_RESOURCE, t)
    obs["describe"] = {c["name"]: (c["value"], c["config_source"], c["read_only"], c["is_sensitive"], c["config_type"])
                       for c in described["configs"]}
    # Kafka 4's `kafka-storage.sh format` turns min.insync.replicas from server.properties into a
    # cluster-wide dynamic default (source DYNAMIC_DEFAULT_BROKER_CONFIG); our server has no format
    # step and reports it as a static broker config. Not a behaviour a client can act on: the value counts.
    if "min.insync.replicas" in obs["describe"]:
        value, _source, *rest = obs["describe"]["min.insync.replicas"]
        obs["describe"]["min.insync.replicas"] = (value, "<not compared>", *rest)
    return obs


def test_invalid_configs(conform):
    obs = conform(scenario_configs)
    # INVALID_CONFIG for each (segment.bytes=100 only on Kafka 4: see known_differences.py)
    assert all(r["error"] == 40 for k, r in obs["create_bad"].items() if k != "segment.bytes")
    assert all(r["error"] == 0 for r in obs["create_good"].values())
    assert obs["describe"]["segment.bytes"][:2] == ("2097152", 1) or obs["describe"]["segment.bytes"][:2] == ["2097152", 1]
