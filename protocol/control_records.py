"""Kafka's control records (ControlRecordType, EndTransactionMarker): the one record of a control
batch, whose key is (version int16, type int16) and, for a transaction marker, whose value is
(version int16, coordinator epoch int32). Written by the log for COMMIT/ABORT; read by the log
loader, the cleaner, the coordinators' replay, dump-log and the Spark reader."""

from __future__ import annotations

import struct

CONTROL_KEY = struct.Struct(">hh")  # version, ControlRecordType
END_TXN_MARKER_VALUE = struct.Struct(">hi")  # version, coordinator epoch
CONTROL_KEY_VERSION = 0
END_TXN_MARKER_VERSION = 0

# ControlRecordType's ids.
ABORT = 0
COMMIT = 1
LEADER_CHANGE = 2
UNKNOWN = -1
CONTROL_TYPE_NAMES = {ABORT: "ABORT", COMMIT: "COMMIT", LEADER_CHANGE: "LEADER_CHANGE", 3: "SNAPSHOT_HEADER",
                      4: "SNAPSHOT_FOOTER", 5: "KRAFT_VERSION", 6: "KRAFT_VOTERS"}


def control_type(key: bytes | bytearray | memoryview | None) -> int:
    """The ControlRecordType id of a control record's key; UNKNOWN (-1) for a missing or short key."""
    if key is None or len(key) < CONTROL_KEY.size:
        return UNKNOWN
    return CONTROL_KEY.unpack_from(key)[1]


def end_txn_marker_key(commit: bool) -> bytes:
    return CONTROL_KEY.pack(CONTROL_KEY_VERSION, COMMIT if commit else ABORT)


def end_txn_marker_value(coordinator_epoch: int) -> bytes:
    return END_TXN_MARKER_VALUE.pack(END_TXN_MARKER_VERSION, coordinator_epoch)


def marker_coordinator_epoch(value: bytes | bytearray | memoryview | None) -> int:
    """The coordinator epoch of an EndTransactionMarker's value; -1 when it is missing or short."""
    if value is None or len(value) < END_TXN_MARKER_VALUE.size:
        return -1
    return END_TXN_MARKER_VALUE.unpack_from(value)[1]
