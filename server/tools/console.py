"""``kafka-sidecar produce`` / ``consume``: a first message with nothing else installed.

kcat-like and over the wire (Metadata, Produce, ListOffsets, Fetch, OffsetFetch/OffsetCommit),
so they work against Apache Kafka as well. They reuse the blocking client of the Spark data
sources (``spark._wire.Broker``) and its record codec: Produce sends RecordBatch v2 batches of
many records, Fetch answers are decoded batch by batch.

Consuming with ``--group`` works as Kafka's consumer does with manually assigned partitions: it
starts from the group's committed offsets (else from ``--from-beginning``'s earliest or the end)
and commits what it printed (OffsetCommit with generation -1, which a group with no active
members accepts), so a second run goes on where the first stopped. It does not join the group.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
import time
from pathlib import Path
from typing import TextIO

from kafka_sidecar.protocol.record_batch import CONTROL_MASK
from kafka_sidecar.protocol.records import iter_batches
from kafka_sidecar.protocol.topic import InvalidTopicError, validate_topic_name
from kafka_sidecar.spark._records import (
    Columns,
    decode_into,
    new_columns,
)
from kafka_sidecar.spark._wire import (
    EARLIEST,
    LATEST,
    UNKNOWN_TOPIC_OR_PARTITION,
    Broker,
    KafkaError,
    TopicPartition,
    error_name,
)

from . import console_producer
from .admin import commit_offsets
from .command_config import command_config
from .groups import GroupCommandError, committed_offsets

FETCH_BYTES = 4 << 20


class ConsoleError(Exception):
    """A problem the user can see the cause of: printed as one line, exit status 1."""


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("-b", "--bootstrap-server", required=True, metavar="HOST:PORT", help="a broker to bootstrap from")
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-p", "--partition", type=int, default=None, help="only this partition")
    p.add_argument("-K", "--key-separator", default=None, metavar="SEP",
                   help="produce: split each line into key SEP value; consume: print the key, then SEP")
    p.add_argument("--command-config", "--producer.config", "--consumer.config", dest="command_config",
                   type=Path, default=None, metavar="FILE",
                   help="client properties (security.protocol, ssl.*, sasl.*), as Kafka's tools take them")


def add_produce_arguments(p: argparse.ArgumentParser) -> None:
    _common(p)
    console_producer.add_arguments(p)


def add_consume_arguments(p: argparse.ArgumentParser) -> None:
    _common(p)
    start = p.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true", help="start at the earliest offset (default: the end)")
    start.add_argument("-o", "--offset", default=None, metavar="N",
                       help="start at offset N (with -p), -N: N before the end, or beginning / end")
    start.add_argument("--timestamp", type=int, default=None, metavar="MS",
                       help="start at the first record with a timestamp >= MS (epoch milliseconds)")
    p.add_argument("-g", "--group", default=None, help="start from the group's committed offsets and commit what is printed")
    p.add_argument("-c", "--max-messages", type=int, default=None, metavar="N", help="exit after N records")
    p.add_argument("-e", "--exit-at-end", action="store_true", help="exit once every partition is read to its end")
    p.add_argument("--timeout-ms", type=int, default=None, metavar="MS", help="exit when no record arrives for MS")
    p.add_argument("--print-key", action="store_true", help="print the key before the value (separated by -K, default tab)")
    p.add_argument("--print-headers", action="store_true", help="print headers (k:v,k:v) before the key and value")
    p.add_argument("--print-offset", action="store_true", help="print partition and offset first")
    p.add_argument("--json", action="store_true",
                   help="one JSON object per record: topic, partition, offset, timestamp, key, value, headers")


def _connect(args: argparse.Namespace, client_id: str) -> Broker:
    return Broker(args.bootstrap_server, client_id=client_id, command_config=command_config(args))


def _partitions(broker: Broker, topic: str, only: int | None, create: bool = False, producing: bool = False) -> list[int]:
    try:
        validate_topic_name(topic)  # Kafka's rule, stated before asking any broker
    except InvalidTopicError as e:
        raise ConsoleError(str(e)) from None
    try:
        meta = broker.wait_for_topics([topic], auto_create=create, timeout=10.0)[topic]
    except KafkaError as e:
        hint = ""
        if producing and not create and e.code == UNKNOWN_TOPIC_OR_PARTITION:
            hint = " (add --create to have the broker create it, or create it with kafka-sidecar topics --create)"
        raise ConsoleError(f"topic {topic}: {e}{hint}") from None
    partitions = sorted(meta.leaders)
    if only is not None:
        if only not in meta.leaders:
            raise ConsoleError(f"topic {topic} has no partition {only} (partitions 0-{len(partitions) - 1})")
        return [only]
    return partitions


# ---- produce ---------------------------------------------------------------------------------


def _header(value: str) -> tuple[str, bytes]:
    key, sep, val = value.partition("=")
    if not sep:
        raise ConsoleError(f"--header expects KEY=VALUE, got {value!r}")
    return key, val.encode()


def produce(args: argparse.Namespace, stdin: TextIO | None = None) -> int:
    """Send each value, or each stdin line as it arrives (``console_producer``)."""
    try:
        headers = [_header(h) for h in args.header] or None
        broker = _connect(args, "kafka-sidecar-produce")
    except ConsoleError as e:
        return _fail(e)
    try:
        partitions = _partitions(broker, args.topic, args.partition, create=args.create, producing=True)
        return console_producer.run(broker, args.topic, partitions, args, headers, stdin)
    except ConsoleError as e:
        return _fail(e)
    finally:
        broker.close()


# ---- consume ---------------------------------------------------------------------------------


def _start_offsets(broker: Broker, args: argparse.Namespace, tps: list[TopicPartition],
                   committed: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
    earliest, latest = broker.earliest(tps), broker.latest(tps)
    if args.timestamp is not None:
        found = broker.list_offsets(dict.fromkeys(tps, args.timestamp))
        return {tp: (off if off >= 0 else latest[tp]) for tp, (off, _) in found.items()}
    if args.offset is not None:
        value = args.offset.strip().lower()
        if value == "beginning":
            return earliest
        if value == "end":
            return latest
        try:
            n = int(value)
        except ValueError:
            raise ConsoleError(f"--offset expects N, -N, beginning or end, got {args.offset!r}") from None
        if n < 0:
            return {tp: max(earliest[tp], latest[tp] + n) for tp in tps}
        return {tp: min(max(n, earliest[tp]), latest[tp]) for tp in tps}
    reset = earliest if args.from_beginning else latest
    return {tp: committed.get(tp, reset[tp]) for tp in tps}


def _committed(broker: Broker, group: str, topic: str) -> dict[TopicPartition, int]:
    try:
        offsets = committed_offsets(broker.client, group)
    except GroupCommandError as e:
        raise ConsoleError(str(e)) from None
    return {tp: off for tp, off in offsets.items() if tp[0] == topic}


def _commit(broker: Broker, group: str, positions: dict[TopicPartition, int]) -> None:
    code = commit_offsets(broker.client, group, positions)
    if code:
        raise ConsoleError(f"committing offsets of group {group} failed: {error_name(code)}")


def _text(data: bytes | None) -> str | None:
    if data is None:
        return None
    try:
        return data.decode()
    except UnicodeDecodeError:
        return "base64:" + base64.b64encode(data).decode()


def _write(out: TextIO, args: argparse.Namespace, topic: str, part: int, cols: Columns, i: int) -> None:
    key, value, headers = cols.keys[i], cols.values[i], (cols.headers[i] if cols.headers else None) or []
    if args.json:
        out.write(json.dumps({
            "topic": topic, "partition": part, "offset": cols.offsets[i], "timestamp": cols.timestamps[i],
            "key": _text(key), "value": _text(value), "headers": [[k, _text(v)] for k, v in headers],
        }) + "\n")
        return
    fields = []
    if args.print_offset:
        fields.append(f"{part}:{cols.offsets[i]}")
    if args.print_headers:
        fields.append(",".join(f"{k}:{_text(v) or ''}" for k, v in headers) or "NO_HEADERS")
    if args.print_key or args.key_separator is not None:
        fields.append("null" if key is None else (_text(key) or ""))
    fields.append("null" if value is None else (_text(value) or ""))
    out.write((args.key_separator if args.key_separator is not None else "\t").join(fields) + "\n")


def consume(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Print records until --max-messages, --exit-at-end, --timeout-ms or Ctrl-C."""
    out = out or sys.stdout
    try:
        broker = _connect(args, "kafka-sidecar-consume")
    except ConsoleError as e:
        return _fail(e)
    positions: dict[TopicPartition, int] = {}
    printed = 0
    try:
        tps = [(args.topic, p) for p in _partitions(broker, args.topic, args.partition)]
        committed = _committed(broker, args.group, args.topic) if args.group else {}
        positions = _start_offsets(broker, args, tps, committed)
        last_record = time.monotonic()
        while True:
            at_end = True
            for tp in tps:
                code, hw, _lso, records, _aborted = broker.fetch(*tp, positions[tp], max_bytes=FETCH_BYTES,
                                                                 max_wait_ms=100 if len(tps) == 1 else 0)
                if code:
                    raise ConsoleError(f"fetching {tp[0]}-{tp[1]} at offset {positions[tp]} failed: {error_name(code)}")
                cols = new_columns(include_headers=True)
                for pos, h in iter_batches(records):
                    if h.last_offset < positions[tp]:
                        continue
                    if h.attributes & CONTROL_MASK:  # transaction markers are not records
                        positions[tp] = h.last_offset + 1
                        continue
                    decode_into(cols, records, pos, h, lo=positions[tp])
                    positions[tp] = h.last_offset + 1
                for i in range(len(cols)):
                    _write(out, args, tp[0], tp[1], cols, i)
                    printed += 1
                    if args.max_messages is not None and printed >= args.max_messages:
                        positions[tp] = cols.offsets[i] + 1
                        out.flush()
                        return 0
                if len(cols):
                    last_record = time.monotonic()
                    out.flush()
                at_end = at_end and positions[tp] >= hw
            if args.exit_at_end and at_end:
                return 0
            if args.timeout_ms is not None and (time.monotonic() - last_record) * 1000 >= args.timeout_ms:
                return 0
            if at_end and len(tps) > 1:
                time.sleep(0.1)
    except ConsoleError as e:
        return _fail(e)
    finally:
        try:
            if args.group and positions:
                _commit(broker, args.group, positions)
        finally:
            broker.close()
            if not args.json:  # as kafka-console-consumer.sh, on stderr, 0 included
                sys.stderr.write(f"Processed a total of {printed} messages\n")


def _fail(e: Exception) -> int:
    sys.stderr.write(f"kafka-sidecar: error: {e}\n")
    return 1


__all__ = ["EARLIEST", "LATEST", "add_consume_arguments", "add_produce_arguments", "consume", "produce"]
