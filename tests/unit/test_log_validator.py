"""Kafka's LogValidator record checks (storage/log_validator.py): which batches are refused, with
Kafka's codes, messages and record errors, and which are passed from their header alone."""

from __future__ import annotations

import pytest
from kafka_sidecar.protocol import errors
from kafka_sidecar.protocol.compression import GZIP, NONE
from kafka_sidecar.protocol.record_batch import validate_batches
from kafka_sidecar.protocol.records import Record, encode_batch
from kafka_sidecar.storage import log_validator
from kafka_sidecar.storage.log_config import LogConfig
from kafka_sidecar.storage.log_validator import RecordValidationError, validate_records

NOW = 1_800_000_000_000
HOUR = 3_600_000


def check(records: list[Record], compression: int = NONE, **overrides: object) -> None:
    raw = encode_batch(records, compression=compression)
    validate_records(raw, validate_batches(raw), LogConfig(None, overrides), "t", 0, NOW)


def test_default_config_accepts_past_and_near_future_from_the_header(monkeypatch):
    # With before.max.ms infinite and the max timestamp in range, records are never decoded.
    monkeypatch.setattr(log_validator, "decode_batches", lambda *a, **k: pytest.fail("records decoded"))
    check([Record(0, 0, b"k", b"v"), Record(1, NOW + HOUR, b"k", b"v"), Record(2, -1, None, b"v")])


@pytest.mark.parametrize("compression", [NONE, GZIP])
def test_future_timestamp_is_invalid_timestamp_with_kafkas_record_error(compression):
    late = NOW + HOUR + 1
    with pytest.raises(RecordValidationError) as e:
        check([Record(0, NOW, b"k", b"v"), Record(1, late, b"k", b"v"), Record(2, late + 5, b"k", b"v")], compression)
    assert e.value.error_code == errors.INVALID_TIMESTAMP
    assert e.value.message == "One or more records have been rejected due to invalid timestamp"
    low = NOW - (2**63 - 1)  # now - Long.MAX_VALUE, as Java computes it
    assert e.value.record_errors == [
        (i, f"Timestamp {ts} of message with offset {i} is out of range. The timestamp should be within [{low}, {NOW + HOUR}]")
        for i, ts in ((1, late), (2, late + 5))
    ]


def test_before_max_ms_is_checked_record_by_record():
    # The batch's first and largest timestamps are in range; the middle record is too old.
    with pytest.raises(RecordValidationError) as e:
        check([Record(0, NOW, b"k", b"v"), Record(1, NOW - 2 * HOUR, b"k", b"v"), Record(2, NOW, b"k", b"v")],
              **{"message.timestamp.before.max.ms": HOUR})
    assert [i for i, _ in e.value.record_errors] == [1]
    assert f"should be within [{NOW - HOUR}, {NOW + HOUR}]" in e.value.record_errors[0][1]


def test_log_append_time_topics_do_not_check_timestamps():
    check([Record(0, NOW + 100 * HOUR, b"k", b"v")], **{"message.timestamp.type": "LogAppendTime"})


def test_keyless_records_on_compacted_topics_list_the_first_three():
    records = [Record(i, NOW, None if i % 2 else b"k", b"v") for i in range(10)]
    with pytest.raises(RecordValidationError) as e:
        check(records, **{"cleanup.policy": "compact"})
    assert e.value.error_code == errors.INVALID_RECORD
    assert [i for i, _ in e.value.record_errors] == [1, 3, 5, 7, 9]
    shown = ", ".join(f"RecordError(batchIndex={i}, message='Compacted topic cannot accept message without key in topic partition t-0')"
                      for i in (1, 3, 5))
    assert e.value.message == ("One or more records have been rejected due to 5 record errors in total, and only showing "
                               f"the first three errors at most: [{shown}]")


def test_a_timestamp_error_makes_the_whole_batch_invalid_timestamp():
    # A keyless record and a late one on a compacted topic: both listed, the code is INVALID_TIMESTAMP.
    with pytest.raises(RecordValidationError) as e:
        check([Record(0, NOW, None, b"v"), Record(1, NOW + 2 * HOUR, b"k", b"v")], **{"cleanup.policy": "compact"})
    assert e.value.error_code == errors.INVALID_TIMESTAMP
    assert [i for i, _ in e.value.record_errors] == [0, 1]
