"""Fuzz target: request decoding and dispatch, in-process (atheris, or hypothesis-style mutation).

    python -m tests.fuzz.fuzz_requests [-atheris_runs=N] [-max_total_time=S] [CORPUS_DIR ...]
    python -m tests.fuzz.fuzz_requests --no-atheris --runs N [--seed S]

Each input is one request frame payload (what follows the int32 size): it goes through
``server.dispatch.handle_request`` on a real Broker (its own temporary data dir, a few
topics and a group) exactly as a connection would hand it over. Allowed outcomes: an
answer (whose frame sizes add up), None (acks=0), or FrameError/ProtocolViolation (the
connection is closed). Anything else raised is a bug; so is a handler that does not
finish within its time (a long-poll Fetch or a JoinGroup waiting for others may
legitimately wait: those get up to their request's own timeout, capped).

With atheris installed (``pip install atheris``; not a dependency) it runs coverage-guided,
seeded with the golden captures; without it (``--no-atheris``) the same target is driven
by random mutations of the golden frames and structured requests from
``tests/fuzz/strategies.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import hashlib
import logging
import random
import shutil
import struct
import sys
import tempfile
from pathlib import Path

from kafka_sidecar.protocol.framing import FrameError
from kafka_sidecar.server.broker import Broker
from kafka_sidecar.server.config import BrokerConfig
from kafka_sidecar.server.dispatch import SUPPORTED_APIS, ProtocolViolation, handle_request
from kafka_sidecar.server.request_context import ClientInfo
from kafka_sidecar.storage.log_segment import FileSlice

from tests.fuzz.schema_requests import check_answer

# Requests that may legitimately wait (a Fetch or ShareFetch long poll, a JoinGroup or SyncGroup
# waiting for other members) are cut after LONG_POLL_CUT seconds; any other request that takes
# longer than HANDLER_TIMEOUT is a finding (a hang).
LONG_POLL_APIS = (1, 11, 14, 78)
LONG_POLL_CUT = 0.1
HANDLER_TIMEOUT = 10.0


def plaintext_client() -> ClientInfo:
    """What handlers see of a connection on a PLAINTEXT listener (no SASL authenticator)."""
    return ClientInfo("127.0.0.1:9", "127.0.0.1", "PLAINTEXT")


class _FailureLog(logging.Handler):
    def __init__(self, into: list[str]) -> None:
        super().__init__(logging.ERROR)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        exc = record.exc_info[1] if record.exc_info else None
        self.into.append(f"{record.getMessage()}: {exc!r}")


class Target:
    """A broker in this process, and a function that feeds it one request."""

    def __init__(self) -> None:
        shm = Path("/dev/shm")  # fsync-free: topics created by the fuzzer are cheap there
        self.dir = Path(tempfile.mkdtemp(prefix="kafka-sidecar-fuzz-", dir=shm if shm.is_dir() else None))
        self.loop = asyncio.new_event_loop()
        config = BrokerConfig.load(overrides={
            "log.segment.bytes": "65536", "group.initial.rebalance.delay.ms": "0",
            "log.initial.task.delay.ms": "600000", "offsets.topic.num.partitions": "2",
        })
        self.broker = Broker(config, self.dir / "data", "127.0.0.1", 0)
        self.client = plaintext_client()
        self.loop.run_until_complete(self.broker.start())
        lm = self.broker.log_manager
        for name in ("fuzz-a", "fuzz-b"):
            lm.create_topic(name, 2)
        lm.create_topic("fuzz-compact", 1, {"cleanup.policy": "compact"})
        self.cases = 0
        # What dispatch's safety net logs (a handler's exception, an answer that does not encode).
        self.failures: list[str] = []
        self._watch = _FailureLog(self.failures)
        logging.getLogger("kafka_sidecar.server.dispatch").addHandler(self._watch)

    def run_one(self, payload: bytes) -> None:
        self.cases += 1
        self.failures.clear()
        try:
            long_poll = len(payload) >= 2 and struct.unpack_from(">h", payload)[0] in LONG_POLL_APIS
            timeout = LONG_POLL_CUT if long_poll else HANDLER_TIMEOUT
            result = self.loop.run_until_complete(asyncio.wait_for(handle_request(self.broker.services, self.client, payload), timeout))[0]
        except (FrameError, ProtocolViolation):
            return  # the connection would be closed, with one log line
        except TimeoutError:
            if long_poll:
                return
            raise
        if self.failures:  # dispatch's safety net answered a handler's exception: still a bug
            raise AssertionError(f"handler failed: {self.failures[0]}")
        if result is None:
            return
        head = result[0]
        assert isinstance(head, bytes) and len(head) >= 8
        (size,) = struct.unpack_from(">i", head)
        total = len(head) - 4 + sum(len(p) if isinstance(p, bytes) else p.size for p in result[1:])
        assert size == total, f"response size prefix {size} != {total} bytes"
        for p in result[1:]:
            assert isinstance(p, bytes | FileSlice), type(p)
        if len(result) == 1:  # a plain answer: it must decode with Kafka's schema for the request
            self._check_answer(payload, head)

    def _check_answer(self, payload: bytes, answer: bytes) -> None:
        api_key, version, correlation_id = struct.unpack_from(">hhi", payload)
        if api_key == 18 and not SUPPORTED_APIS[18].min_version <= version <= SUPPORTED_APIS[18].max_version:
            version = 0  # Kafka's answer to an ApiVersions version it does not know is a v0 body
        out = check_answer(api_key, version, correlation_id, answer[4:], "answered")
        assert out.kind == "answered", f"{SUPPORTED_APIS[api_key].name} v{version}: {out.detail}"

    def close(self) -> None:
        logging.getLogger("kafka_sidecar.server.dispatch").removeHandler(self._watch)
        try:
            self.loop.run_until_complete(self.broker.stop())
        finally:
            self.loop.close()
            shutil.rmtree(self.dir, ignore_errors=True)


def _quiet() -> None:
    logging.basicConfig(level=logging.CRITICAL)
    logging.getLogger("kafka_sidecar").setLevel(logging.CRITICAL)
    # The safety net's ERROR lines still reach Target's watch (not printed: they become findings).
    dispatch = logging.getLogger("kafka_sidecar.server.dispatch")
    dispatch.setLevel(logging.ERROR)
    dispatch.propagate = False


def run_random(runs: int, seed: int) -> int:
    """Without atheris: random mutations of the golden frames and structured requests."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from tests.fuzz.strategies import request_frames

    target = Target()
    try:
        @settings(max_examples=runs, database=None, deadline=None, derandomize=False,
                  suppress_health_check=list(HealthCheck))
        @given(st.randoms(use_true_random=False), request_frames())
        def case(_rnd: random.Random, frame: bytes) -> None:
            target.run_one(frame[4:])

        random.seed(seed)
        case()
    finally:
        target.close()
    print(f"{target.cases} cases, no failure")
    return 0


# An input starting with this marker (API key -2: never a real request) is a schema-valid
# request drawn from the rest of the input; any other input is a raw request frame payload.
STRUCTURED = b"\xff\xfe"
CORPUS = Path(__file__).resolve().parent / "corpus"
CRASHES = Path(__file__).resolve().parent / "crashes"


def structured_payload(data: bytes) -> bytes:
    """A schema-valid request (tests/fuzz/schema_requests.py) chosen and drawn from ``data``."""
    from kio.index import load_request_schema

    from tests.fuzz.schema_codec import encode
    from tests.fuzz.schema_requests import Context, Generator, header

    specs = sorted(SUPPORTED_APIS.values(), key=lambda s: s.key)
    spec = specs[data[0] % len(specs)] if data else specs[0]
    version = spec.min_version + (data[1] if len(data) > 1 else 0) % (spec.max_version - spec.min_version + 1)
    cls = load_request_schema(spec.key, version)
    rnd = random.Random(bytes(data[2:]))
    variant = "tagged" if cls.__flexible__ and len(data) > 2 and data[2] & 1 else "random"
    body = encode(cls, Generator(variant, rnd, Context([]), spec.key, version).struct(cls, 0))
    return header(spec.key, version, 1, bool(cls.__flexible__)) + body


def payload_of(data: bytes) -> bytes:
    return structured_payload(data[2:]) if data[:2] == STRUCTURED else data


def seed_corpus(into: Path) -> None:
    """The repo's corpus (tests/fuzz/corpus), its crashes (tests/fuzz/crashes) and the golden frames."""
    from tests.fuzz.strategies import golden_request_frames

    for d in (CORPUS, CRASHES):
        for f in sorted(d.glob("*")) if d.is_dir() else ():
            shutil.copy(f, into / f.name)
    for i, f in enumerate(golden_request_frames()):
        if len(f) < 4096:
            (into / f"golden-{i:04d}").write_bytes(f[4:])


def run_atheris(argv: list[str]) -> int:
    import atheris  # noqa: PLC0415 (optional)

    target = Target()
    corpus = Path(tempfile.mkdtemp(prefix="kafka-sidecar-fuzz-corpus-"))
    # libFuzzer ends the process with exit(): remove the temporary dirs then too, if Python gets to.
    atexit.register(shutil.rmtree, target.dir, True)
    atexit.register(shutil.rmtree, corpus, True)
    if not any(not a.startswith("-") for a in argv[1:]):
        seed_corpus(corpus)
        argv = [*argv, str(corpus)]

    # libFuzzer writes a crashing input to -artifact_prefix; it is written here first too, so a
    # finding survives a process that dies on the way (one did, killed while crashing).
    prefix = next((a.split("=", 1)[1] for a in argv if a.startswith("-artifact_prefix=")), "./")

    def test_one_input(data: bytes) -> None:
        try:
            target.run_one(payload_of(data))
        except BaseException:
            Path(f"{prefix}failing-{hashlib.sha1(data).hexdigest()}").write_bytes(data)
            raise

    atheris.Setup(argv, test_one_input)
    atheris.Fuzz()
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv if argv is None else argv)
    parser = argparse.ArgumentParser(add_help=True)
    parser.add_argument("--no-atheris", action="store_true")
    parser.add_argument("--runs", type=int, default=10000)
    parser.add_argument("--seed", type=int, default=0)
    ours, rest = parser.parse_known_args(argv[1:])
    _quiet()
    if not ours.no_atheris:
        try:
            import atheris  # noqa: F401
        except ImportError:
            print("atheris is not installed (pip install atheris): using random mutation instead", file=sys.stderr)
        else:
            return run_atheris([argv[0], *rest])
    return run_random(ours.runs, ours.seed)


if __name__ == "__main__":
    sys.exit(main())
