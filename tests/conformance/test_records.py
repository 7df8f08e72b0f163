"""Conformance: offsets, watermarks, fetch and ListOffsets semantics, idempotent dedup.

Each test runs one scenario on kafka-sidecar and on Apache Kafka (see conftest.py) and compares
what the clients saw; the assertions in the test bodies hold for both (they are checked
against Kafka in the ``[reference]`` half).
"""

from __future__ import annotations

from typing import Any

from kafka_sidecar.protocol.records import RecordBatch, decode_batches

from tests.conformance.clients import ck_produce, ck_read, kp_offsets, kp_read
from tests.conformance.harness import Ctx
from tests.conformance.wire import EARLIEST, LATEST, MAX_TIMESTAMP, batch, now_ms

# --------------------------------------------------------------------------- helpers


def text(b: bytes | None) -> str | None:
    return None if b is None else b.decode(errors="replace")


def rel(ts: int, base: int) -> int:
    """A timestamp relative to the scenario's base (-1 stays -1)."""
    return ts - base if ts >= 0 else ts


def batches_view(batches: list[RecordBatch], base: int) -> list[dict[str, Any]]:
    return [{
        "base_offset": b.base_offset, "last_offset_delta": b.last_offset_delta, "records": b.record_count,
        "timestamp_type": b.timestamp_type, "max_timestamp": rel(b.max_timestamp, base),
        "producer_id_set": b.producer_id >= 0, "base_sequence": b.base_sequence,
        "data": [(r.offset, rel(r.timestamp, base), text(r.key), text(r.value)) for r in b.records],
    } for b in batches]


def fetch_view(p: dict[str, Any], base: int) -> dict[str, Any]:
    raw = p["records"]
    return {
        "error": p["error"], "high_watermark": p["high_watermark"], "last_stable_offset": p["last_stable_offset"],
        "log_start_offset": p["log_start_offset"],
        "batches": batches_view(decode_batches(raw, verify_crc=True), base),
        "partial_batch_bytes": len(raw) - sum(b.size for b in decode_batches(raw)),
    }


def lo_view(r: dict[str, Any], base: int) -> dict[str, Any]:
    return {"error": r["error"], "offset": r["offset"], "timestamp": rel(r["timestamp"], base)}


def produce_view(r: dict[str, Any]) -> dict[str, Any]:
    out = dict(r)
    out["log_append_time_set"] = r["log_append_time"] not in (None, -1)
    del out["log_append_time"]
    return out


# --------------------------------------------------------------------------- offsets and watermarks


def scenario_offsets(ctx: Ctx) -> dict[str, Any]:
    w = ctx.wire()
    t, t3, lat = ctx.topic("t"), ctx.topic("t3"), ctx.topic("append-time")
    w.create_topic(t)
    w.create_topic(t3, partitions=3)
    w.create_topic(lat, configs={"message.timestamp.type": "LogAppendTime"})
    base = now_ms() - 60_000
    obs: dict[str, Any] = {}

    sizes = [1, 5, 3]
    obs["produce"] = [
        produce_view(w.produce(t, batch([f"v{i}-{j}".encode() for j in range(n)], keys=[f"k{j}".encode() for j in range(n)],
                                        timestamps=[base + 10 * i + j for j in range(n)])))
        for i, n in enumerate(sizes)
    ]
    obs["produce_acks1"] = produce_view(w.produce(t, batch([b"acks1"], timestamp=base + 5), acks=1))
    obs["list_offsets"] = {name: lo_view(w.list_offsets(t, 0, ts), base)
                           for name, ts in (("earliest", EARLIEST), ("latest", LATEST), ("max_timestamp", MAX_TIMESTAMP))}
    obs["fetch_from_0"] = fetch_view(w.fetch(t, 0, 0), base)
    obs["fetch_mid_batch_3"] = fetch_view(w.fetch(t, 0, 3), base)
    obs["fetch_at_hw"] = fetch_view(w.fetch(t, 0, 10), base)
    obs["fetch_partition_max_bytes_1"] = fetch_view(w.fetch(t, 0, 0, partition_max_bytes=1), base)
    obs["fetch_max_bytes_1"] = fetch_view(w.fetch(t, 0, 1, max_bytes=1), base)
    obs["fetch_partition_max_bytes_150"] = fetch_view(w.fetch(t, 0, 0, partition_max_bytes=150), base)

    md = w.metadata([t3])
    (topic,) = md["topics"]
    obs["metadata"] = {
        "error": topic["error_code"], "is_internal": topic["is_internal"], "topic_id_set": topic["topic_id"].int != 0,
        "partitions": sorted((p["partition_index"], p["error_code"], p["leader_id"] == md["brokers"][0]["node_id"],
                              p["leader_epoch"], len(p["replica_nodes"]), len(p["isr_nodes"]), len(p["offline_replicas"]))
                             for p in topic["partitions"]),
        "brokers": len(md["brokers"]), "controller_is_broker": md["controller_id"] == md["brokers"][0]["node_id"],
    }

    # librdkafka: explicit partitions, so both brokers get the same records in the same places.
    msgs = [(i % 3, f"key-{i}".encode(), f"value-{i}".encode()) for i in range(30)]
    obs["ck_delivered"] = ck_produce(ctx.bootstrap, t3, msgs)
    obs["ck_consumed"] = [(p, o, text(k), text(v)) for p, o, k, v in ck_read(ctx.bootstrap, t3, [0, 1, 2], 30)]
    obs["kafka_python_offsets"] = kp_offsets(ctx.bootstrap, t3, [0, 1, 2])
    obs["kafka_python_read"] = [(o, text(k), text(v)) for o, k, v in kp_read(ctx.bootstrap, t, 0, 10)]

    # LogAppendTime: the broker's clock goes into the answer and into every record.
    r = w.produce(lat, batch([b"a", b"b"], timestamp=base))
    obs["append_time_produce"] = produce_view(r)
    (b,) = w.fetch_all(lat)
    obs["append_time_batch"] = {
        "timestamp_type": b.timestamp_type,
        "max_timestamp_is_append_time": b.max_timestamp == r["log_append_time"],
        "records_carry_append_time": [rec.timestamp == r["log_append_time"] for rec in b.records],
        "append_time_recent": abs(r["log_append_time"] - now_ms()) < 60_000,
    }
    obs["append_time_list_offsets_max"] = {
        k: v for k, v in w.list_offsets(lat, 0, MAX_TIMESTAMP).items() if k != "timestamp"
    }
    return obs


def test_offsets_and_watermarks(conform):
    obs = conform(scenario_offsets)
    assert [p["base_offset"] for p in obs["produce"]] == [0, 1, 6]
    assert obs["produce_acks1"]["base_offset"] == 9
    assert obs["list_offsets"]["earliest"]["offset"] == 0
    assert obs["list_offsets"]["latest"]["offset"] == 10
    f = obs["fetch_from_0"]
    assert (f["error"], f["high_watermark"], f["last_stable_offset"], f["log_start_offset"]) == (0, 10, 10, 0)
    assert [b["base_offset"] for b in f["batches"]] == [0, 1, 6, 9]
    assert obs["fetch_mid_batch_3"]["batches"][0]["base_offset"] == 1  # the whole batch holding offset 3
    assert obs["fetch_at_hw"]["batches"] == [] and obs["fetch_at_hw"]["error"] == 0
    assert len(obs["fetch_partition_max_bytes_1"]["batches"]) == 1  # KIP-74: at least one whole batch
    assert sorted(p for p, _, _ in obs["ck_delivered"]) == sorted(i % 3 for i in range(30))
    assert obs["kafka_python_offsets"] == {0: [0, 10], 1: [0, 10], 2: [0, 10]}
    assert obs["append_time_batch"]["timestamp_type"] == 1


# --------------------------------------------------------------------------- ListOffsets by timestamp

# Batches (relative timestamps): not monotonic inside or across batches, as CreateTime allows.
TS_BATCHES = [[100, 100, 200], [150, 300], [300, 250], [500], [400, 450]]
TS_QUERIES = [0, 100, 101, 150, 199, 200, 250, 251, 300, 301, 400, 450, 451, 500, 501, 10_000]


def scenario_list_offsets(ctx: Ctx) -> dict[str, Any]:
    w = ctx.wire()
    t = ctx.topic("t")
    w.create_topic(t)
    base = now_ms() - 3_600_000
    obs: dict[str, Any] = {"produce": []}
    for i, stamps in enumerate(TS_BATCHES):
        r = w.produce(t, batch([f"b{i}-{j}".encode() for j in range(len(stamps))], timestamps=[base + s for s in stamps]))
        obs["produce"].append((r["error"], r["base_offset"]))
    obs["by_timestamp"] = {q: lo_view(w.list_offsets(t, 0, base + q), base) for q in TS_QUERIES}
    obs["special"] = {name: lo_view(w.list_offsets(t, 0, ts), base)
                      for name, ts in (("earliest", EARLIEST), ("latest", LATEST), ("max_timestamp", MAX_TIMESTAMP))}
    obs["v1_by_timestamp_150"] = {k: v for k, v in lo_view(w.list_offsets(t, 0, base + 150, version=1), base).items()}
    obs["v1_latest"] = lo_view(w.list_offsets(t, 0, LATEST, version=1), base)
    # After DeleteRecords the answers never go below the log start offset.
    obs["delete_records_4"] = w.delete_records(t, 0, 4)
    obs["after_delete"] = {q: lo_view(w.list_offsets(t, 0, base + q), base) for q in (0, 100, 150, 300, 301)}
    obs["after_delete_special"] = {name: lo_view(w.list_offsets(t, 0, ts), base)
                                   for name, ts in (("earliest", EARLIEST), ("max_timestamp", MAX_TIMESTAMP))}
    return obs


def test_list_offsets_by_timestamp(conform):
    obs = conform(scenario_list_offsets)
    by = obs["by_timestamp"]
    assert by[100]["offset"] == 0 and by[101]["offset"] == 2  # first record with timestamp >= target
    assert by[10_000] == {"error": 0, "offset": -1, "timestamp": -1}
    assert obs["special"]["max_timestamp"]["offset"] == 7


# --------------------------------------------------------------------------- idempotent dedup


def scenario_idempotence(ctx: Ctx) -> dict[str, Any]:
    w = ctx.wire()
    t, tck = ctx.topic("t"), ctx.topic("ck")
    w.create_topic(t)
    w.create_topic(tck)
    obs: dict[str, Any] = {}
    pid = w.init_producer_id()
    obs["init_producer_id"] = {"error": pid["error"], "epoch": pid["producer_epoch"], "id_valid": pid["producer_id"] >= 0}
    p, e = pid["producer_id"], pid["producer_epoch"]

    def idem(seq: int, n: int, tag: str, epoch: int = e, producer: int = p) -> bytes:
        return batch([f"{tag}-{i}".encode() for i in range(n)], keys=[b"k"] * n,
                     producer_id=producer, producer_epoch=epoch, base_sequence=seq)

    def send(frame: bytes) -> dict[str, Any]:
        r = w.produce_result(w.send_frame(0, 9, frame))
        return {"error": r["error"], "base_offset": r["base_offset"], "log_start_offset": r["log_start_offset"]}

    first = w.produce_frame(t, idem(0, 3, "first"))
    obs["first"] = send(first)
    obs["first_again"] = send(first)  # the exact same request bytes: a retry
    second = w.produce_frame(t, idem(3, 2, "second"))
    obs["second"] = send(second)
    obs["first_again_after_second"] = send(first)  # still among the last five batches
    obs["second_again"] = send(second)
    obs["sequence_gap"] = send(w.produce_frame(t, idem(10, 1, "gap")))
    obs["third"] = send(w.produce_frame(t, idem(5, 1, "third")))
    obs["new_epoch_seq_0"] = send(w.produce_frame(t, idem(0, 1, "epoch1", epoch=e + 1)))
    obs["old_epoch"] = send(w.produce_frame(t, idem(6, 1, "stale", epoch=e)))
    obs["unknown_producer_seq_0"] = send(w.produce_frame(t, idem(0, 1, "stranger0", producer=p + 1000)))
    obs["unknown_producer_seq_5"] = send(w.produce_frame(t, idem(5, 1, "stranger5", producer=p + 2000)))
    obs["offsets"] = w.offsets(t)
    obs["log"] = [(r.offset, text(r.value)) for r in w.records(t)]

    # librdkafka's idempotent producer.
    delivered = ck_produce(ctx.bootstrap, tck, [(0, None, f"m{i}".encode()) for i in range(50)],
                           {"enable.idempotence": True, "linger.ms": 2})
    obs["ck_delivered"] = delivered
    batches = w.fetch_all(tck)
    obs["ck_batches"] = {
        "records": sum(b.record_count for b in batches),
        "producer_ids_set": all(b.producer_id >= 0 for b in batches),
        "sequences_gapless": [b.base_sequence for b in batches] == [b.base_offset for b in batches],
        "values": [text(r.value) for b in batches for r in b.records] == [f"m{i}" for i in range(50)],
    }
    return obs


def test_idempotent_dedup(conform):
    obs = conform(scenario_idempotence)
    assert obs["first"] == {"error": 0, "base_offset": 0, "log_start_offset": 0}
    assert obs["first_again"]["error"] == 0 and obs["first_again"]["base_offset"] == 0
    assert obs["second"]["base_offset"] == 3
    assert obs["sequence_gap"]["error"] == 45  # OUT_OF_ORDER_SEQUENCE_NUMBER
    assert [v for _, v in obs["log"]].count("first-0") == 1
    assert [o for _, o, _ in obs["ck_delivered"]] == list(range(50))
