"""Every request Kafka's schemas allow gets a well-formed answer (issue 29).

For every (API, version) that ApiVersions advertises (server/dispatch.py SUPPORTED_APIS), the
requests of ``tests/fuzz/schema_requests.py`` (nulls, empty, maximal and minimal values,
unknown tagged fields, and ``SCHEMA_RANDOM`` drawn ones: 4 here, ``make fuzz`` raises it) go
over TCP to one kafka-sidecar; each answer must decode strictly with Kafka's response schema
for that version, with the request's correlation id, and the connection must stay open, except
where Apache Kafka 4.3.1 closes it (measured by running the same generator against it):

- a tagged field the request's version does not define but another version of that struct does
  (a tag of Fetch v17's partitions in a v12 request, say): Kafka's generated reader throws "Tag N
  is not valid for version V" (a tag no version defines is skipped, and answered);
- DescribeAcls, CreateAcls, DeleteAcls naming an UNKNOWN (0) resource type, pattern type,
  operation or permission type: Kafka's request constructor throws while parsing, and a
  request that does not parse closes the connection.

The server log must hold no traceback. A second test makes every handler fail and checks the
safety net: Kafka's error response for that request (UNKNOWN_SERVER_ERROR), never a close.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from kafka_sidecar.protocol.request_rewrite import _tags_of_all_versions
from kafka_sidecar.server.dispatch import SUPPORTED_APIS, handle_request
from kio.index import load_request_schema, load_response_schema

from tests.fuzz.fuzz_requests import Target
from tests.fuzz.schema_codec import UNKNOWN_TAGS, schema_fields
from tests.fuzz.schema_requests import (
    TOPICS,
    Case,
    Context,
    Sender,
    cases,
    check_answer,
    error_codes,
    header,
    topic_ids,
)
from tests.integration.test_bad_input import create_topic
from tests.support import SidecarProcess

RANDOM = int(os.environ.get("SCHEMA_RANDOM", "4"))
ACL_APIS = {29: "filter", 30: "creations", 31: "filters"}
_ACL_ENUMS = ("resource_type", "resource_type_filter", "resource_pattern_type", "pattern_type_filter", "operation",
              "permission_type")


def _other_versions_tag(case: Case) -> bool:
    """A tagged field this version does not define but another version of the struct does."""
    every = _tags_of_all_versions(case.api_key)

    def walk(cls: type, data: dict[str, Any], path: tuple[str, ...]) -> bool:
        if set(data.get(UNKNOWN_TAGS) or ()) & every.get(path, set()):
            return True
        regular, tagged = schema_fields(cls)
        for f in (*regular, *tagged):
            if f.entity is None or data.get(f.name) is None:
                continue
            items = data[f.name] if f.array else [data[f.name]]
            if any(walk(f.entity, item, (*path, f.name)) for item in items):
                return True
        return False

    return walk(load_request_schema(case.api_key, case.version), case.data, ())


def kafka_closes(case: Case) -> bool:
    """Whether Apache Kafka 4.3.1 closes the connection on this request instead of answering."""
    if _other_versions_tag(case):
        return True
    if case.api_key not in ACL_APIS:
        return False
    items: list[dict[str, Any]] = [case.data] if case.api_key == 29 else list(case.data[ACL_APIS[case.api_key]])
    return any(item.get(k) == 0 for item in items for k in _ACL_ENUMS)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    shm = Path("/dev/shm")
    base = shm if shm.is_dir() else tmp_path_factory.mktemp("schema")
    data = base / f"kafka-sidecar-schema-{os.getpid()}-{time.monotonic_ns()}"
    s = SidecarProcess(data, {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "2"})
    s.log_path = tmp_path_factory.mktemp("schema-log") / "server.log"
    s.start()
    try:
        for name in TOPICS:
            create_topic(s.port, name, partitions=2, configs={"cleanup.policy": "compact"} if "compact" in name else None)
        yield s
    finally:
        if s.proc is not None and s.proc.poll() is None:
            s.stop(timeout=120)  # a machine busy with other suites can make the clean stop slow
        shutil.rmtree(data, ignore_errors=True)


def test_every_advertised_request_is_answered(server: SidecarProcess) -> None:
    ctx = Context(topic_ids("127.0.0.1", server.port))
    sender = Sender("127.0.0.1", server.port, timeout=15)
    outcomes: Counter[str] = Counter()
    per_pair: Counter[tuple[int, int]] = Counter()
    closed, failures = [], []
    try:
        for case in cases(ctx, RANDOM):
            out = sender.run(case)
            outcomes[out.kind] += 1
            per_pair[case.api_key, case.version] += 1
            if out.kind == "closed":
                closed.append(case.name)
                if not kafka_closes(case):
                    failures.append(f"{case.name}: closed (Kafka answers)")
            elif out.kind in ("bad-answer", "timeout"):
                failures.append(f"{case.name}: {out.kind}: {out.detail}")
            elif kafka_closes(case):
                failures.append(f"{case.name}: answered (Kafka closes the connection)")
    finally:
        sender.close()
    pairs = {(s.key, v) for s in SUPPORTED_APIS.values() for v in range(s.min_version, s.max_version + 1)}
    assert set(per_pair) == pairs
    print(f"\n{sum(outcomes.values())} requests over {len(pairs)} (API, version) pairs "
          f"({min(per_pair.values())}-{max(per_pair.values())} each): {dict(outcomes)}; "
          f"{sender.reconnects} connections; closed as Kafka closes: {len(closed)} ({', '.join(closed[:6])}...)")
    assert not failures, "\n".join(failures[:40])
    assert server.proc is not None and server.proc.poll() is None
    log = server.log_text()
    assert "Traceback" not in log and "internal error" not in log, log[-3000:]


def test_failing_handlers_answer_kafkas_error_response(monkeypatch) -> None:
    """Every handler made to raise: the request's error response with UNKNOWN_SERVER_ERROR (-1),
    decoded with Kafka's schema (dispatch's safety net, KafkaApis' handleError)."""
    async def boom(*_a: Any) -> Any:
        raise RuntimeError("a handler's bug")

    target = Target()
    try:
        for spec in SUPPORTED_APIS.values():
            monkeypatch.setitem(SUPPORTED_APIS, spec.key, dataclasses.replace(spec, handler=boom))
        checked = 0
        for case in cases(Context([]), 0):
            if case.variant != "min" or case.api_key == 18 or kafka_closes(case):  # ApiVersions: dispatch's own
                continue
            flexible = bool(load_request_schema(case.api_key, case.version).__flexible__)
            payload = header(case.api_key, case.version, 7, flexible) + case.body
            parts = target.loop.run_until_complete(handle_request(target.broker.services, target.client, payload))[0]
            if case.acks0:
                assert parts is None
                continue
            answer = b"".join(p for p in parts)[4:]
            out = check_answer(case.api_key, case.version, 7, answer, "answered")
            assert out.kind == "answered", f"{case.name}: {out.detail}"
            assert -1 in error_codes(out.answer) or not _has_error_code(case), f"{case.name}: {out.answer}"
            checked += 1
        assert checked > 200
    finally:
        target.close()


def _has_error_code(case: Case) -> bool:
    def walk(cls: type) -> bool:
        regular, _ = schema_fields(cls)
        return any(f.name == "error_code" or (f.entity is not None and walk(f.entity)) for f in regular)

    return walk(load_response_schema(case.api_key, case.version))
