"""Options of Spark's Kafka source and sink, parsed and resolved the way Spark does.

Names, defaults, precedence and error messages follow Spark's ``kafka``
connector (``KafkaSourceProvider``, ``KafkaOffsetReader``,
``KafkaOffsetRangeCalculator``, ``KafkaMicroBatchStream.rateLimit``), so a
pipeline moves to the built-in connector by changing the format name. No
pyspark here; the data sources call these on the driver.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ._wire import EARLIEST, LATEST, Broker, TopicPartition

DEFAULT_MAX_RECORDS_PER_PARTITION = 1_000_000
DEFAULT_FETCH_BYTES = 8 << 20


class OptionError(ValueError):
    """An invalid or unsupported option (Spark raises IllegalArgumentException)."""


class DataLossError(RuntimeError):
    """Offsets the query needs are gone (retention, DeleteRecords, topic deletion)."""


_LOSS_HINT_FAIL = (
    "Some data may have been lost because they are not available in Kafka any more; either the "
    "data was aged out by Kafka or the topic may have been deleted before all the data in the "
    "topic was processed. If you don't want your streaming query to fail on such cases, set the "
    'source option "failOnDataLoss" to "false".'
)


def data_loss(kind: str, reason: str) -> DataLossError:
    return DataLossError(f"[KAFKA_DATA_LOSS.{kind}] {_LOSS_HINT_FAIL} Reason: {reason}")


def _get(options: Mapping[str, str], name: str) -> str | None:
    """Option lookup, case-insensitive (Spark's options are)."""
    if name in options:
        return options[name]
    lower = name.lower()
    for k, v in options.items():
        if k.lower() == lower:
            return v
    return None


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    value = _get(options, name)
    if value is None:
        return default
    v = str(value).strip().lower()
    if v in ("true", "false"):
        return v == "true"
    raise OptionError(f"Invalid value '{value}' for option '{name}', must be true or false")


def _int(options: Mapping[str, str], name: str, *, minimum: int = 1) -> int | None:
    value = _get(options, name)
    if value is None:
        return None
    try:
        n = int(str(value).strip())
    except ValueError:
        raise OptionError(f"Invalid value '{value}' for option '{name}', must be an integer") from None
    if n < minimum:
        raise OptionError(f"Invalid value '{value}' for option '{name}', must be >= {minimum}")
    return n


# --------------------------------------------------------------------------- topics


@dataclass(frozen=True)
class ConsumerStrategy:
    """subscribe / subscribePattern / assign."""

    kind: str
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assignment: tuple[TopicPartition, ...] = ()

    def partitions(self, broker: Broker) -> list[TopicPartition]:
        """The topic-partitions this strategy reads now (sorted)."""
        if self.kind == "assign":
            metas = broker.metadata(sorted({t for t, _ in self.assignment}))
            for t, p in self.assignment:
                meta = metas.get(t)
                if meta is None or meta.error != 0 or p not in meta.leaders:
                    raise OptionError(f"Assigned partition {t}-{p} does not exist")
            return sorted(self.assignment)
        if self.kind == "subscribe":
            metas = broker.metadata(list(self.topics))
            names = [t for t in self.topics if t in metas and metas[t].error == 0]
        else:
            metas = broker.metadata(None)
            regex = re.compile(self.pattern or "")
            names = [t for t, m in metas.items() if m.error == 0 and not m.internal and regex.fullmatch(t)]
        return sorted((t, p) for t in names for p in metas[t].leaders)


def parse_strategy(options: Mapping[str, str]) -> ConsumerStrategy:
    given = [k for k in ("assign", "subscribe", "subscribePattern") if _get(options, k) is not None]
    if not given:
        raise OptionError(
            "One of the following options must be specified for Kafka source: subscribe, "
            "subscribePattern, assign. See the docs for more details."
        )
    if len(given) > 1:
        raise OptionError(
            "Only one of the following options can be specified for Kafka source: subscribe, "
            "subscribePattern, assign. See the docs for more details."
        )
    kind = given[0]
    value = _get(options, kind) or ""
    if kind == "subscribe":
        topics = tuple(t.strip() for t in value.split(",") if t.strip())
        if not topics:
            raise OptionError(f"No topics to subscribe to as specified value for option 'subscribe' is '{value}'")
        return ConsumerStrategy("subscribe", topics=topics)
    if kind == "subscribePattern":
        if not value.strip():
            raise OptionError(f"Pattern to subscribe is empty as specified value for option 'subscribePattern' is '{value}'")
        try:
            re.compile(value.strip())
        except re.error as e:
            raise OptionError(f"Invalid subscribePattern '{value}': {e}") from None
        return ConsumerStrategy("subscribePattern", pattern=value.strip())
    try:
        parsed = json.loads(value)
        assignment = tuple(sorted({(str(t), int(p)) for t, ps in parsed.items() for p in ps}))
    except (ValueError, AttributeError, TypeError):
        raise OptionError(
            f"""Expected e.g. {{"topicA":[0,1],"topicB":[0,1]}}, got {value}"""
        ) from None
    if not assignment:
        raise OptionError(f"No topicpartitions to assign as specified value for option 'assign' is '{value}'")
    return ConsumerStrategy("assign", assignment=assignment)


# --------------------------------------------------------------------------- offsets


@dataclass(frozen=True)
class OffsetSpec:
    """earliest | latest | offsets {tp: offset} | timestamp (all partitions) | timestamps {tp: ts}."""

    kind: str
    offsets: tuple[tuple[TopicPartition, int], ...] = ()
    timestamp: int | None = None

    def as_dict(self) -> dict[TopicPartition, int]:
        return dict(self.offsets)


EARLIEST_SPEC = OffsetSpec("earliest")
LATEST_SPEC = OffsetSpec("latest")


def parse_partition_json(value: str, option: str) -> dict[TopicPartition, int]:
    """{"topicA":{"0":23,"1":-1}} -> {(topicA, 0): 23, ...}."""
    try:
        parsed = json.loads(value)
        return {(str(t), int(p)): int(o) for t, ps in parsed.items() for p, o in ps.items()}
    except (ValueError, AttributeError, TypeError):
        raise OptionError(
            f"""Expected e.g. {{"topicA":{{"0":23,"1":-1}},"topicB":{{"0":-2}}}}, got {value} (option '{option}')"""
        ) from None


def parse_offset_spec(options: Mapping[str, str], prefix: str, default: OffsetSpec) -> OffsetSpec:
    """``<prefix>Timestamp`` > ``<prefix>OffsetsByTimestamp`` > ``<prefix>Offsets`` (Spark's precedence)."""
    ts = _get(options, f"{prefix}Timestamp")
    if ts is not None:
        try:
            return OffsetSpec("timestamp", timestamp=int(ts))
        except ValueError:
            raise OptionError(f"Invalid value '{ts}' for option '{prefix}Timestamp', must be a long") from None
    by_ts = _get(options, f"{prefix}OffsetsByTimestamp")
    if by_ts is not None:
        return OffsetSpec("timestamps", offsets=tuple(sorted(parse_partition_json(by_ts, f"{prefix}OffsetsByTimestamp").items())))
    value = _get(options, f"{prefix}Offsets")
    if value is None:
        return default
    v = value.strip()
    if v.lower() == "earliest":
        return EARLIEST_SPEC
    if v.lower() == "latest":
        return LATEST_SPEC
    return OffsetSpec("offsets", offsets=tuple(sorted(parse_partition_json(v, f"{prefix}Offsets").items())))


def resolve_offsets(
    broker: Broker,
    tps: list[TopicPartition],
    spec: OffsetSpec,
    *,
    is_start: bool,
    no_match_latest: bool = False,
    isolation_level: int = 0,
) -> dict[TopicPartition, int]:
    """Concrete offsets for ``tps`` (ListOffsets for earliest/latest/timestamps)."""
    if not tps:
        return {}
    if spec.kind == "earliest":
        return broker.earliest(tps, isolation_level)
    if spec.kind == "latest":
        return broker.latest(tps, isolation_level)
    name = "startingOffsets" if is_start else "endingOffsets"
    if spec.kind in ("offsets", "timestamps"):
        given = spec.as_dict()
        if set(given) != set(tps):
            if spec.kind == "timestamps":
                name = name.replace("Offsets", "OffsetsByTimestamp")
            raise OptionError(
                f"If {name} contains specific offsets, you must specify all TopicPartitions.\n"
                "Use -1 for latest, -2 for earliest.\n"
                f"Specified: {_tp_set(given)} Assigned: {_tp_set(tps)}"
            )
    if spec.kind == "offsets":
        given = spec.as_dict()
        need = {tp: o for tp, o in given.items() if o in (EARLIEST, LATEST)}
        resolved = broker.list_offsets(need, isolation_level) if need else {}
        return {tp: (resolved[tp][0] if tp in resolved else o) for tp, o in given.items()}
    targets = spec.as_dict() if spec.kind == "timestamps" else dict.fromkeys(tps, spec.timestamp)
    found = broker.list_offsets(targets, isolation_level)
    out: dict[TopicPartition, int] = {}
    latest: dict[TopicPartition, int] | None = None
    for tp in tps:
        offset = found[tp][0]
        if offset < 0:
            if is_start and not no_match_latest:
                raise OptionError(
                    f"No offset matched from request of topic-partition {tp[0]}-{tp[1]} and timestamp "
                    f"{targets[tp]}. (startingOffsetsByTimestampStrategy is 'error'; set it to "
                    "'latest' to start such partitions from the latest offset.)"
                )
            if latest is None:
                latest = broker.latest(tps, isolation_level)
            offset = latest[tp]
        out[tp] = offset
    return out


def _tp_set(tps) -> str:
    return "Set(" + ", ".join(f"{t}-{p}" for t, p in sorted(tps)) + ")"


def offsets_to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """{(t, p): o} -> {"t": {"p": o}}: the offset JSON of Spark's Kafka source."""
    out: dict[str, dict[str, int]] = {}
    for (t, p), o in sorted(offsets.items()):
        out.setdefault(t, {})[str(p)] = int(o)
    return out


def offsets_from_json(value: Mapping[str, Any]) -> dict[TopicPartition, int]:
    return {(str(t), int(p)): int(o) for t, ps in value.items() for p, o in ps.items()}


# --------------------------------------------------------------------------- source


_UNSUPPORTED_KAFKA = {
    "group.id": None,  # accepted: we use no consumer group
    "auto.offset.reset": "Kafka option 'auto.offset.reset' is not supported.\nInstead set the source "
    "option 'startingOffsets' to 'earliest' or 'latest' to specify where to start. Structured Streaming "
    "manages which offsets are consumed internally, rather than relying on the kafkaConsumer to do it.",
    "key.deserializer": "Kafka option 'key.deserializer' is not supported, as keys are deserialized as "
    "byte arrays with ByteArrayDeserializer. Use DataFrame operations to explicitly deserialize the keys.",
    "value.deserializer": "Kafka option 'value.deserializer' is not supported, as values are deserialized "
    "as byte arrays with ByteArrayDeserializer. Use DataFrame operations to explicitly deserialize the values.",
    "enable.auto.commit": "Kafka option 'enable.auto.commit' is not supported. Offsets are not committed "
    "to Kafka; Spark keeps them in its checkpoint.",
    "interceptor.classes": "Kafka option 'interceptor.classes' is not supported as returning a batch of "
    "records from the source can break Spark's assumptions.",
}


@dataclass(frozen=True)
class SourceOptions:
    bootstrap: str
    strategy: ConsumerStrategy
    starting: OffsetSpec
    ending: OffsetSpec
    fail_on_data_loss: bool = True
    include_headers: bool = False
    max_offsets_per_trigger: int | None = None
    min_partitions: int | None = None
    max_records_per_partition: int | None = DEFAULT_MAX_RECORDS_PER_PARTITION
    no_match_latest: bool = False
    isolation_level: int = 0
    fetch_bytes: int = DEFAULT_FETCH_BYTES
    timeout_s: float = 30.0


def bootstrap_servers(options: Mapping[str, str], what: str = "consumer") -> str:
    value = _get(options, "kafka.bootstrap.servers")
    if not value or not value.strip():
        raise OptionError(f"Option 'kafka.bootstrap.servers' must be specified for configuring Kafka {what}")
    return value.strip()


def parse_source_options(options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    bootstrap = bootstrap_servers(options)
    for key, message in _UNSUPPORTED_KAFKA.items():
        if message and _get(options, f"kafka.{key}") is not None:
            raise OptionError(message)
    strategy = parse_strategy(options)
    starting = parse_offset_spec(options, "starting", LATEST_SPEC if streaming else EARLIEST_SPEC)
    ending = parse_offset_spec(options, "ending", LATEST_SPEC)
    if streaming:
        if any(_get(options, k) is not None for k in ("endingOffsets", "endingOffsetsByTimestamp", "endingTimestamp")):
            raise OptionError("ending offset not valid in streaming queries")
    else:
        if starting.kind == "latest":
            raise OptionError("starting offset can't be latest for batch queries on Kafka")
        for tp, o in starting.offsets if starting.kind == "offsets" else ():
            if o == LATEST:
                raise OptionError(f"startingOffsets for {tp[0]}-{tp[1]} can't be latest for batch queries on Kafka")
        if ending.kind == "earliest":
            raise OptionError("ending offset can't be earliest for batch queries on Kafka")
        for tp, o in ending.offsets if ending.kind == "offsets" else ():
            if o == EARLIEST:
                raise OptionError(f"endingOffsets for {tp[0]}-{tp[1]} can't be earliest for batch queries on Kafka")
    strategy_name = (_get(options, "startingOffsetsByTimestampStrategy") or "error").strip().lower()
    if strategy_name not in ("error", "latest"):
        raise OptionError(
            f"Invalid value '{strategy_name}' for option 'startingOffsetsByTimestampStrategy', must be 'error' or 'latest'"
        )
    isolation = (_get(options, "kafka.isolation.level") or "read_uncommitted").strip().lower()
    if isolation not in ("read_uncommitted", "read_committed"):
        raise OptionError(f"Invalid value '{isolation}' for option 'kafka.isolation.level'")
    max_records = _int(options, "maxRecordsPerPartition")
    timeout_ms = _int(options, "kafka.request.timeout.ms") or 30000
    return SourceOptions(
        bootstrap=bootstrap,
        strategy=strategy,
        starting=starting,
        ending=ending,
        fail_on_data_loss=_bool(options, "failOnDataLoss", True),
        include_headers=_bool(options, "includeHeaders", False),
        max_offsets_per_trigger=_int(options, "maxOffsetsPerTrigger"),
        min_partitions=_int(options, "minPartitions"),
        max_records_per_partition=max_records if max_records is not None else DEFAULT_MAX_RECORDS_PER_PARTITION,
        no_match_latest=strategy_name == "latest",
        isolation_level=1 if isolation == "read_committed" else 0,
        fetch_bytes=_int(options, "kafka.max.partition.fetch.bytes") or DEFAULT_FETCH_BYTES,
        timeout_s=timeout_ms / 1000.0,
    )


# --------------------------------------------------------------------------- planning


@dataclass(frozen=True)
class OffsetRange:
    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


def _divide(parts: int, r: OffsetRange) -> list[OffsetRange]:
    remaining = r.size
    start = r.start
    out = []
    for part in range(parts):
        this = remaining // (parts - part)
        remaining -= this
        end = min(start + this, r.end)
        out.append(OffsetRange(r.topic, r.partition, start, end))
        start = end
    return [x for x in out if x.size > 0]


def _part_count(size: int, total: int, min_parts: int) -> int:
    return max(int(math.floor(size / total * min_parts + 0.5)), 1)


def split_ranges(ranges: list[OffsetRange], min_partitions: int | None, max_records: int | None) -> list[OffsetRange]:
    """Spark's KafkaOffsetRangeCalculator.getRanges: one range per topic-partition,
    divided so none exceeds ``max_records`` and there are at least ``min_partitions``."""
    ranges = [r for r in ranges if r.size > 0]
    if (min_partitions is None or len(ranges) >= min_partitions) and max_records is None:
        return ranges
    divided = ranges
    if max_records is not None:
        divided = [x for r in ranges for x in _divide(math.ceil(r.size / max_records), r)]
    if min_partitions is not None and min_partitions > len(divided):
        total = sum(r.size for r in divided)
        unsplit = [r for r in divided if _part_count(r.size, total, min_partitions) == 1]
        unsplit_tps = {(r.topic, r.partition) for r in unsplit}
        split_total = total - sum(r.size for r in unsplit)
        split_min = max(min_partitions - len(unsplit), 1)
        out = []
        for r in divided:
            parts = 1 if (r.topic, r.partition) in unsplit_tps else _part_count(r.size, split_total, split_min)
            out += _divide(parts, r)
        return out
    return divided


def rate_limit(limit: int, start: Mapping[TopicPartition, int], until: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
    """Spark's KafkaMicroBatchStream.rateLimit: ``limit`` records spread over partitions in
    proportion to their backlog, never starving a small partition completely."""
    sizes = {tp: end - start[tp] for tp, end in until.items() if tp in start and end - start[tp] > 0}
    total = float(sum(sizes.values()))
    if total < 1:
        return dict(until)
    out = {}
    for tp, end in until.items():
        if tp not in sizes:
            out[tp] = end
            continue
        prorate = limit * (sizes[tp] / total)
        n = int(math.ceil(prorate) if prorate < 1 else math.floor(prorate))
        out[tp] = min(end, start[tp] + n)
    return out


# --------------------------------------------------------------------------- sink


@dataclass(frozen=True)
class SinkOptions:
    bootstrap: str
    topic: str | None
    acks: int = -1
    compression: int = 0
    batch_size: int = 512 * 1024
    max_request_size: int = 1 << 20
    idempotent: bool = True
    retries: int = 5
    timeout_ms: int = 30000


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    from kafka_sidecar.protocol.compression import CODECS_BY_NAME

    bootstrap = bootstrap_servers(options, "producer")
    for key in ("key.serializer", "value.serializer"):
        if _get(options, f"kafka.{key}") is not None:
            raise OptionError(
                f"Kafka option '{key}' is not supported, as {key.split('.')[0]}s are serialized with "
                "ByteArraySerializer. Use DataFrame operations to explicitly serialize them into either "
                "strings or byte arrays."
            )
    acks_raw = (_get(options, "kafka.acks") or "all").strip().lower()
    acks = {"all": -1, "-1": -1, "1": 1}.get(acks_raw)
    if acks is None:
        raise OptionError(f"Invalid value '{acks_raw}' for option 'kafka.acks': kafka-sidecar's sink supports all (-1) and 1")
    codec_name = (_get(options, "kafka.compression.type") or "none").strip().lower()
    if codec_name not in CODECS_BY_NAME:
        raise OptionError(f"Invalid value '{codec_name}' for option 'kafka.compression.type'")
    idempotent = _bool(options, "kafka.enable.idempotence", True)
    if idempotent and acks != -1:
        if _get(options, "kafka.enable.idempotence") is not None:
            raise OptionError("Must set acks to all in order to use the idempotent producer.")
        idempotent = False
    topic = _get(options, "topic")
    return SinkOptions(
        bootstrap=bootstrap,
        topic=topic.strip() if topic is not None else None,
        acks=acks,
        compression=CODECS_BY_NAME[codec_name],
        batch_size=_int(options, "kafka.batch.size") or 512 * 1024,
        max_request_size=_int(options, "kafka.max.request.size") or (1 << 20),
        idempotent=idempotent,
        retries=_int(options, "kafka.retries", minimum=0) if _get(options, "kafka.retries") is not None else 5,
        timeout_ms=_int(options, "kafka.request.timeout.ms") or 30000,
    )
