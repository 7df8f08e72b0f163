"""The console's two writes, each the API a Kafka client would send, as the logged-in principal:
Produce (one record, acks=all) and DeleteRecords. They exist only with ``--console-allow-writes``;
the handlers check WRITE and DELETE on the topic, validate the batch (LogValidator: sizes,
compacted topics' keys...) and append through the ReplicaManager, as for any client. Bad input
is refused here, before anything is sent, with a message for the page.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from kafka_sidecar.protocol.records import Record, encode_batch

from ..metrics import error_name
from .api import ConsoleSession, call

if TYPE_CHECKING:
    from ..broker import Broker

PRODUCE, DELETE_RECORDS = 0, 21
TIMEOUT_MS = 30000
MAX_HEADERS = 100


class WriteError(Exception):
    """Refused input or a failed write; the message is shown on the page."""


def field_bytes(text: str, encoding: str, what: str) -> bytes | None:
    """A form field as record bytes: empty is null, ``text`` is UTF-8, ``hex`` is hex digits."""
    if text == "":
        return None
    if encoding == "hex":
        try:
            return bytes.fromhex("".join(text.split()))
        except ValueError:
            raise WriteError(f"the {what} is not hex (pairs of 0-9, a-f): nothing was written") from None
    return text.encode("utf-8")


def parse_headers(text: str) -> list[tuple[str, bytes | None]]:
    """One header a line, ``name: value`` (UTF-8; no colon: a null value)."""
    out: list[tuple[str, bytes | None]] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        name, sep, value = line.partition(":")
        name = name.strip()
        if not name:
            raise WriteError(f"header line {line[:60]!r} has no name: nothing was written")
        out.append((name, value.strip().encode("utf-8") if sep else None))
    if len(out) > MAX_HEADERS:
        raise WriteError(f"{len(out)} headers is more than the console takes ({MAX_HEADERS}): nothing was written")
    return out


def _partition_error(answer: dict, topic: str, partition: int, what: str) -> tuple[int, dict]:
    for t in answer.get("responses") or answer.get("topics") or []:
        for p in t.get("partition_responses") or t.get("partitions") or []:
            index = p.get("index", p.get("partition_index"))
            if index == partition:
                return p["error_code"], p
    raise WriteError(f"the broker gave no answer for {topic}-{partition} to the {what}")


async def produce(broker: Broker, session: ConsoleSession, topic: str, partition: int, key: bytes | None, value: bytes | None,
                  headers: list[tuple[str, bytes | None]]) -> int:
    """Produce one record (acks=all); returns its offset."""
    batch = encode_batch([Record(0, int(time.time() * 1000), key, value, headers)])
    answer = await call(broker, session, PRODUCE, 11, {"transactional_id": None, "acks": -1, "timeout": TIMEOUT_MS, "topic_data": [
        {"name": topic, "partition_data": [{"index": partition, "records": batch}]}]})
    code, p = _partition_error(answer, topic, partition, "Produce")
    if code:
        detail = p.get("error_message") or ""
        record_errors = "; ".join(e.get("batch_index_error_message") or "" for e in p.get("record_errors") or [])
        text = ": ".join(x for x in (detail, record_errors) if x)
        raise WriteError(f"Produce to {topic}-{partition} failed with {error_name(code)}{': ' + text if text else ''}; nothing was written")
    return p["base_offset"]


async def delete_records(broker: Broker, session: ConsoleSession, topic: str, partition: int, offset: int) -> int:
    """DeleteRecords before ``offset``; returns the new log start offset (low watermark)."""
    answer = await call(broker, session, DELETE_RECORDS, 2, {"timeout": TIMEOUT_MS, "topics": [
        {"name": topic, "partitions": [{"partition_index": partition, "offset": offset}]}]})
    code, p = _partition_error(answer, topic, partition, "DeleteRecords")
    if code:
        raise WriteError(f"DeleteRecords on {topic}-{partition} before offset {offset} failed with {error_name(code)}; nothing was deleted")
    return p["low_watermark"]
