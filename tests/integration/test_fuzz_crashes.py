"""Every input the fuzzers ever failed on (tests/fuzz/crashes/), replayed: each must now get an
answer that decodes with Kafka's response schema (or, where Kafka closes the connection, a clean
close), without a handler's exception behind it (``Target.run_one``, a real in-process broker).

A file is one request frame payload (after the int32 size) or, starting ``ff fe``, the input of
a schema-valid request drawn by ``fuzz_requests.structured_payload``; a ``.frames`` file is
several whole frames (size prefix included) sent in turn, for a finding that needed the state
an earlier request left. ``make fuzz-long`` writes
new findings to fuzz-artifacts/; each fixed one is copied here with a name saying what it was.
"""

from __future__ import annotations

import struct

import pytest

from tests.fuzz.fuzz_requests import CRASHES, Target, payload_of

CASES = sorted(CRASHES.glob("*"))


@pytest.fixture(scope="module")
def target():
    t = Target()
    yield t
    t.close()


def test_crash_cases_exist() -> None:
    assert len(CASES) >= 6


@pytest.mark.parametrize("path", CASES, ids=[p.name for p in CASES])
def test_crash_case_is_answered(target: Target, path) -> None:
    data = path.read_bytes()
    if path.suffix != ".frames":
        target.run_one(payload_of(data))
        return
    pos = 0
    while pos < len(data):
        (size,) = struct.unpack_from(">i", data, pos)
        target.run_one(data[pos + 4 : pos + 4 + size])
        pos += 4 + size
