"""The crash harness's share-group scenario (KIP-932): a share consumer acknowledges records while
the server is killed, and what it was told is durable must stay so.

The consumer speaks raw ShareGroupHeartbeat/ShareFetch (tests/conformance/wire.py), one ShareFetch
per round of the producing loop, its acknowledgements piggy-backed on the next one: ACCEPT, except
REJECT for offsets ending in 3 and RELEASE for offsets ending in 5 on their first delivery. Checks:

- an offset whose ACCEPT/REJECT was answered without error (the answer waits for the share-state
  write to be durable) is never delivered again, by this server life or any later one;
- a delivered offset always holds the value first delivered at it, and an acknowledged produce's value;
- at the end (after a clean restart) a drain leaves nothing: every acknowledged produce to the
  share topic was delivered at least once, and the share-partition's lag is 0.

Acknowledgements in flight when the server died are in doubt: those records may come back.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from kafka_sidecar.protocol.records import decode_batches

from tests.conformance.wire import Wire

SHARE = "crash-share"
SHARE_GROUP = "crash-share-group"
ACCEPT, RELEASE, REJECT = 1, 2, 3
# Failures of a connection to a server being killed (ConnectionError and socket timeouts are OSErrors).
CONNECTION_ERRORS = (OSError, EOFError)


class ShareFailure(AssertionError):
    pass


@dataclass
class ShareLedger:
    """What the share consumer saw, across server lives."""

    done: set[int] = field(default_factory=set)  # ACCEPT/REJECT answered: never to be delivered again
    delivered: set[int] = field(default_factory=set)  # delivered at least once
    values: dict[int, bytes] = field(default_factory=dict)  # the value delivered at each offset
    deliveries: int = 0
    redeliveries: int = 0


def _ack_type(offset: int, delivery_count: int) -> int:
    if offset % 10 == 3:
        return REJECT
    if offset % 10 == 5 and delivery_count == 1:
        return RELEASE
    return ACCEPT


class ShareConsumer:
    """One member and one share session, for one life of the server."""

    def __init__(self, port: int, ledger: ShareLedger, acked_values: dict[int, bytes]) -> None:
        self.ledger = ledger
        self.acked_values = acked_values  # offset -> value of the acknowledged produces (the harness's ledger)
        self.wire = Wire(f"127.0.0.1:{port}", client_id="crash-share", timeout=5)
        self.member_id = uuid.uuid4().hex[:22]
        self.epoch = 0
        self.pending: list[tuple[int, int]] = []  # (offset, acknowledge type) to send with the next ShareFetch
        # share.auto.offset.reset only matters before the first ShareFetch initializes the partition.
        ops = [{"name": "share.auto.offset.reset", "config_operation": 0, "value": "earliest"}]
        self.wire.call(44, 1, {"resources": [{"resource_type": 32, "resource_name": SHARE_GROUP, "configs": ops}],
                               "validate_only": False})
        self.topic_id = self.wire.metadata([SHARE])["topics"][0]["topic_id"]
        joined = self.wire.call(76, 1, {"group_id": SHARE_GROUP, "member_id": self.member_id, "member_epoch": 0,
                                        "rack_id": None, "subscribed_topic_names": [SHARE]})
        if joined["error_code"] != 0:
            raise ShareFailure(f"ShareGroupHeartbeat failed: {joined}")

    def close(self) -> None:
        self.wire.close()

    def step(self) -> int:
        """One ShareFetch carrying the pending acknowledgements; returns how many records it acquired."""
        acks = [{"first_offset": o, "last_offset": o, "acknowledge_types": [t]} for o, t in self.pending]
        body = self.wire.call(78, 2, {
            "group_id": SHARE_GROUP, "member_id": self.member_id, "share_session_epoch": self.epoch, "max_wait": 0,
            "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 200, "batch_size": 200,
            "topics": [{"topic_id": self.topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": acks}]}],
            "forgotten_topics_data": []})
        if body["error_code"] != 0:
            raise ShareFailure(f"ShareFetch (epoch {self.epoch}) failed: error {body['error_code']}")
        self.epoch += 1
        parts = [p for t in body["responses"] for p in t["partitions"]]
        for p in parts:
            if p["error_code"] != 0 or p["acknowledge_error_code"] != 0:
                raise ShareFailure(f"ShareFetch partition error {p['error_code']}, acknowledge error {p['acknowledge_error_code']}")
        # Answered without error: the ACCEPTs and REJECTs are durable now.
        self.ledger.done.update(o for o, t in self.pending if t != RELEASE)
        self.pending = []
        acquired = 0
        for p in parts:
            values = {r.offset: r.value for b in decode_batches(p["records"] or b"") for r in b.records}
            for a in p["acquired_records"]:
                for offset in range(a["first_offset"], a["last_offset"] + 1):
                    self._delivered(offset, a["delivery_count"], values.get(offset))
                    acquired += 1
        return acquired

    def _delivered(self, offset: int, delivery_count: int, value: bytes | None) -> None:
        led = self.ledger
        if offset in led.done:
            raise ShareFailure(f"{SHARE}-0: offset {offset} delivered again (delivery count {delivery_count}) after its acknowledgement was answered")
        if value is None:
            raise ShareFailure(f"{SHARE}-0: offset {offset} acquired but not in the records returned")
        if led.values.setdefault(offset, value) != value or self.acked_values.get(offset, value) != value:
            raise ShareFailure(f"{SHARE}-0: offset {offset} delivered {value[:40]!r}, before/acknowledged {led.values[offset][:40]!r}")
        if offset in led.delivered:
            led.redeliveries += 1
        led.delivered.add(offset)
        led.deliveries += 1
        self.pending.append((offset, _ack_type(offset, delivery_count)))


def try_step(consumer: ShareConsumer | None) -> ShareConsumer | None:
    """A step while the server may be dying: the consumer, or None once its connection failed."""
    if consumer is None:
        return None
    try:
        consumer.step()
    except CONNECTION_ERRORS:
        consumer.close()
        return None
    return consumer


def drain(port: int, ledger: ShareLedger, acked_values: dict[int, bytes], timeout: float = 30.0) -> None:
    """After the last (clean) start: consume until nothing is left, then check every acknowledged
    produce was delivered and the share-partition has no lag."""
    consumer = ShareConsumer(port, ledger, acked_values)
    try:
        deadline = time.monotonic() + timeout
        empty = 0
        while empty < 2:
            if time.monotonic() > deadline:
                raise ShareFailure(f"{SHARE}-0: still delivering after {timeout:.0f} s")
            acquired = consumer.step()
            empty = 0 if acquired or consumer.pending else empty + 1
        missing = sorted(set(acked_values) - ledger.delivered)
        if missing:
            raise ShareFailure(f"{SHARE}-0: {len(missing)} acknowledged records never delivered, e.g. offsets {missing[:10]}")
        lag = _lag(consumer.wire)
        if lag != 0:
            raise ShareFailure(f"{SHARE}-0: lag {lag} after the drain (every record acknowledged or archived)")
    finally:
        consumer.close()


def _lag(wire: Wire) -> Any:
    answer = wire.call(90, 1, {"groups": [{"group_id": SHARE_GROUP, "topics": [{"topic_name": SHARE, "partitions": [0]}]}]})
    return answer["groups"][0]["topics"][0]["partitions"][0]["lag"]
