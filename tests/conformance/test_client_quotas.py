"""Client quotas side by side with Apache Kafka 4.3.1: kafka-configs.sh --alter/--describe for
users, clients, users with clients, default entities and ips; raw AlterClientQuotas with several
entities in one request and validate_only; DescribeClientQuotas with exact, default and
"specified" filters, strict or not; and the errors (unknown keys, bad values, bad entities and
filter combinations) with Kafka's messages. Entries, entity components and values are compared
in the order each broker sends them (Kafka answers from HashMaps: server/quotas/store.py).

The names are fixed (not per run) because the answer's order depends on their hashes; every
quota the scenario sets is removed at its start and end, so it can run again on the same broker.
"""

from __future__ import annotations

import os
import subprocess
import time
from typing import Any

import pytest

from bench.reference import find_java, find_kafka_home
from tests.conformance.harness import Ctx
from tests.conformance.wire import Wire

pytestmark = pytest.mark.skipif(find_java() is None or find_kafka_home() is None,
                                reason="needs Java and Kafka 4.3.1's kafka-configs.sh (KAFKA_HOME or make reference)")

Ops = dict[str, float | None]
EntitySpec = list[tuple[str, str | None]]


def _configs(ctx: Ctx, *args: str) -> list[str]:
    home = find_kafka_home()
    assert home is not None
    env = {**os.environ, "KAFKA_HEAP_OPTS": "-Xmx256m",
           "KAFKA_JVM_PERFORMANCE_OPTS": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"}
    run = subprocess.run([str(home / "bin" / "kafka-configs.sh"), "--bootstrap-server", ctx.bootstrap, *args],
                         capture_output=True, text=True, env=env, timeout=120)
    lines = (run.stdout + "\n" + run.stderr).splitlines()
    # Stack frames are the JVM's, not the answer; the exit status is part of it.
    return [f"exit {run.returncode}"] + [" ".join(line.replace(ctx.bootstrap, "<bootstrap>").split()) for line in lines
                                         if line.strip() and not line.lstrip().startswith("at ")]


def _entry(entity: EntitySpec, ops: Ops) -> dict[str, Any]:
    return {"entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
            "ops": [{"key": k, "value": 0.0 if v is None else v, "remove": v is None} for k, v in ops.items()]}


def _alter(w: Wire, entries: list[tuple[EntitySpec, Ops]], validate_only: bool = False, version: int = 1) -> list[Any]:
    body = w.call(49, version, {"validate_only": validate_only, "entries": [_entry(e, o) for e, o in entries]})
    return [(e["error_code"], e["error_message"], [(c["entity_type"], c["entity_name"]) for c in e["entity"]])
            for e in body["entries"]]


def _describe(w: Wire, components: list[tuple[str, int, str | None]], strict: bool = False, version: int = 1) -> Any:
    body = w.call(48, version, {"strict": strict, "components": [
        {"entity_type": t, "match_type": m, "match": n} for t, m, n in components]})
    if body["error_code"]:
        return body["error_code"], body["error_message"]
    return [([(c["entity_type"], c["entity_name"]) for c in e["entity"]], [(v["key"], v["value"]) for v in e["values"]])
            for e in body["entries"]]


def _settled(w: Wire, before: Any, timeout: float = 10.0) -> Any:
    """DescribeClientQuotas once the broker shows a change (Kafka answers from its metadata
    image, updated shortly after the controller commits the alteration)."""
    deadline = time.monotonic() + timeout
    while True:
        now = _describe(w, [])
        if now != before or time.monotonic() > deadline:
            return now
        time.sleep(0.05)


def _clear(w: Wire) -> None:
    """Remove every quota (this scenario's and any left by an interrupted run)."""
    for entity, values in _describe(w, []):
        before = _describe(w, [])
        _alter(w, [(entity, {k: None for k, _ in values})])
        _settled(w, before)


def scenario_client_quotas(ctx: Ctx) -> dict[str, Any]:
    w = ctx.wire()
    _clear(w)
    obs: dict[str, Any] = {}
    try:
        _tool_part(ctx, w, obs)
        _clear(w)
        _raw_alter_part(w, obs)
        _describe_part(w, obs)
    finally:
        _clear(w)
    return obs


def _tool_part(ctx: Ctx, w: Wire, obs: dict[str, Any]) -> None:
    c = lambda *a: _configs(ctx, *a)  # noqa: E731
    obs["tool_user"] = c("--alter", "--add-config", "producer_byte_rate=1024,request_percentage=50",
                         "--entity-type", "users", "--entity-name", "alice")
    obs["tool_client"] = c("--alter", "--add-config", "consumer_byte_rate=2048", "--entity-type", "clients",
                           "--entity-name", "app-1")
    obs["tool_user_client"] = c("--alter", "--add-config", "producer_byte_rate=4096,consumer_byte_rate=8192",
                                "--entity-type", "users", "--entity-name", "alice",
                                "--entity-type", "clients", "--entity-name", "app-1")
    obs["tool_default_user"] = c("--alter", "--add-config", "consumer_byte_rate=100,controller_mutation_rate=2.5",
                                 "--entity-type", "users", "--entity-default")
    obs["tool_user_default_client"] = c("--alter", "--add-config", "request_percentage=12.5", "--entity-type", "users",
                                        "--entity-name", "bob", "--entity-type", "clients", "--entity-default")
    obs["tool_default_client"] = c("--alter", "--add-config", "producer_byte_rate=300", "--entity-type", "clients",
                                   "--entity-default")
    obs["tool_ip"] = c("--alter", "--add-config", "connection_creation_rate=10", "--entity-type", "ips",
                       "--entity-name", "127.0.0.1")
    obs["tool_default_ip"] = c("--alter", "--add-config", "connection_creation_rate=20", "--entity-type", "ips",
                               "--entity-default")
    # Errors: an unknown key, a fractional LONG, a key ips do not take, a value that is no number.
    obs["tool_unknown_key"] = c("--alter", "--add-config", "nope_rate=1", "--entity-type", "users", "--entity-name", "alice")
    obs["tool_fractional"] = c("--alter", "--add-config", "producer_byte_rate=1.5", "--entity-type", "clients",
                               "--entity-name", "app-1")
    obs["tool_ip_wrong_key"] = c("--alter", "--add-config", "producer_byte_rate=10", "--entity-type", "ips",
                                 "--entity-name", "127.0.0.1")
    obs["tool_not_a_number"] = c("--alter", "--add-config", "producer_byte_rate=fast", "--entity-type", "users",
                                 "--entity-name", "alice")
    obs["tool_describe_user"] = c("--describe", "--entity-type", "users", "--entity-name", "alice")
    obs["tool_describe_users"] = c("--describe", "--entity-type", "users")
    obs["tool_describe_clients"] = c("--describe", "--entity-type", "clients")
    obs["tool_describe_user_clients"] = c("--describe", "--entity-type", "users", "--entity-name", "alice",
                                          "--entity-type", "clients")
    obs["tool_describe_default_user"] = c("--describe", "--entity-type", "users", "--entity-default")
    obs["tool_describe_ips"] = c("--describe", "--entity-type", "ips")
    before = _describe(w, [])
    obs["tool_delete"] = c("--alter", "--delete-config", "producer_byte_rate", "--entity-type", "users",
                           "--entity-name", "alice")
    obs["raw_after_tool"] = _settled(w, before)


def _raw_alter_part(w: Wire, obs: dict[str, Any]) -> None:
    # Several entities in one request, validate_only: every result, nothing stored.
    several: list[tuple[EntitySpec, Ops]] = [
        ([("user", "u1")], {"producer_byte_rate": 1000.0, "request_percentage": 10.0}),
        ([("client-id", "c1")], {"consumer_byte_rate": 2000.0}),
        ([("user", "u1"), ("client-id", "c1")], {"producer_byte_rate": 3000.0}),
        ([("user", None), ("client-id", None)], {"request_percentage": 200.0}),
        ([("user", None)], {"controller_mutation_rate": 0.5}),
        ([("client-id", None)], {"producer_byte_rate": 10.0}),
        ([("ip", "10.0.0.1")], {"connection_creation_rate": 5.0}),
        ([("ip", None)], {"connection_creation_rate": 7.0}),
    ]
    for version in (0, 1):
        obs[f"v{version}_several_validate_only"] = _alter(w, several, validate_only=True, version=version)
    obs["after_validate_only"] = _describe(w, [])
    obs["several"] = _alter(w, several)
    obs["after_several"] = before = _settled(w, [])
    obs["change_and_remove"] = _alter(w, [
        ([("user", "u1")], {"producer_byte_rate": None, "request_percentage": 20.0}),
        ([("client-id", "c1")], {"consumer_byte_rate": None}),
        ([("user", "nobody")], {"producer_byte_rate": None}),
    ])
    obs["after_change"] = before = _settled(w, before)
    bad: list[tuple[EntitySpec, Ops]] = [
        ([("user", "e1")], {"nope": 1.0}),
        ([("user", "e2")], {"producer_byte_rate": 1.5}),
        ([("user", "e3")], {"producer_byte_rate": 0.0}),
        ([("user", "e4")], {"request_percentage": -1.0}),
        ([("user", "e5")], {"producer_byte_rate": 1e19}),
        ([("ip", "10.0.0.2")], {"connection_creation_rate": 3e9}),
        ([("ip", "10.0.0.3")], {"connection_creation_rate": 2.5}),
        ([("ip", "10.0.0.4")], {"request_percentage": 1.0}),
        ([("ip", "10.0.0.5"), ("user", "e6")], {"connection_creation_rate": 1.0}),
        ([("user", "")], {"producer_byte_rate": 1.0}),
        ([("client-id", "")], {"producer_byte_rate": 1.0}),
        ([("group", "g")], {"producer_byte_rate": 1.0}),
        ([], {"producer_byte_rate": 1.0}),
        ([("ip", "not-an-ip")], {"connection_creation_rate": 1.0}),
        ([("user", "e7")], {"producer_byte_rate": 1.0, "consumer_byte_rate": 2.0}),
        ([("user", "e8")], {}),
    ]
    obs["bad"] = _alter(w, bad)
    obs["after_bad"] = before = _settled(w, before)
    # One entity twice, and a key twice in one entity.
    obs["duplicate_entity"] = _alter(w, [([("user", "d1")], {"producer_byte_rate": 1.0}),
                                         ([("user", "d1")], {"consumer_byte_rate": 2.0})])
    before = _settled(w, before)
    body = w.call(49, 1, {"validate_only": False, "entries": [{
        "entity": [{"entity_type": "user", "entity_name": "d2"}],
        "ops": [{"key": "producer_byte_rate", "value": 1.0, "remove": False},
                {"key": "producer_byte_rate", "value": 2.0, "remove": False}]}]})
    obs["duplicate_key"] = [(e["error_code"], e["error_message"]) for e in body["entries"]]
    obs["after_duplicates"] = _settled(w, before, timeout=1.0)


def _describe_part(w: Wire, obs: dict[str, Any]) -> None:
    before = _describe(w, [])
    obs["describe_setup"] = _alter(w, [
        ([("user", "alice")], {"producer_byte_rate": 1.0}),
        ([("user", "bob")], {"producer_byte_rate": 2.0}),
        ([("client-id", "app-1")], {"consumer_byte_rate": 3.0}),
        ([("user", "alice"), ("client-id", "app-1")], {"request_percentage": 4.0}),
        ([("user", "alice"), ("client-id", None)], {"request_percentage": 5.0}),
        ([("user", None), ("client-id", "app-2")], {"request_percentage": 6.0}),
        ([("user", None)], {"consumer_byte_rate": 7.0}),
        ([("client-id", None)], {"consumer_byte_rate": 8.0}),
        ([("user", None), ("client-id", None)], {"consumer_byte_rate": 9.0}),
        ([("ip", "10.0.0.1")], {"connection_creation_rate": 10.0}),
        ([("ip", None)], {"connection_creation_rate": 11.0}),
    ])
    _settled(w, before)
    filters: dict[str, list[tuple[str, int, str | None]]] = {
        "all": [],
        "user_alice": [("user", 0, "alice")],
        "user_default": [("user", 1, None)],
        "user_any": [("user", 2, None)],
        "client_app1": [("client-id", 0, "app-1")],
        "client_default": [("client-id", 1, None)],
        "client_any": [("client-id", 2, None)],
        "alice_any_client": [("user", 0, "alice"), ("client-id", 2, None)],
        "alice_default_client": [("user", 0, "alice"), ("client-id", 1, None)],
        "default_user_app2": [("user", 1, None), ("client-id", 0, "app-2")],
        "any_user_any_client": [("user", 2, None), ("client-id", 2, None)],
        "ip_exact": [("ip", 0, "10.0.0.1")],
        "ip_default": [("ip", 1, None)],
        "ip_any": [("ip", 2, None)],
        "unknown_user": [("user", 0, "nobody")],
    }
    for name, components in filters.items():
        for strict in (False, True):
            obs[f"describe_{name}{'_strict' if strict else ''}"] = _describe(w, components, strict)
    obs["describe_v0_user_any"] = _describe(w, [("user", 2, None)], version=0)
    errors: dict[str, list[tuple[str, int, str | None]]] = {
        "empty_type": [("", 2, None)],
        "twice": [("user", 0, "a"), ("user", 2, None)],
        "unknown_type": [("group", 2, None)],
        "exact_null": [("user", 0, None)],
        "default_with_name": [("user", 1, "a")],
        "specified_with_name": [("client-id", 2, "a")],
        "unknown_match": [("user", 7, None)],
        "ip_and_user": [("ip", 2, None), ("user", 2, None)],
        "user_and_ip": [("user", 0, "alice"), ("ip", 1, None)],
    }
    for name, components in errors.items():
        obs[f"describe_error_{name}"] = _describe(w, components)


def test_client_quotas(conform):
    obs = conform(scenario_client_quotas)
    assert obs["tool_user"][0] == "exit 0" and "Completed updating config for user alice." in obs["tool_user"]
    assert any("producer_byte_rate cannot be a fractional value." in line for line in obs["tool_fractional"])
    assert obs["after_validate_only"] == []
    assert len(obs["after_several"]) == 8
    assert obs["describe_error_ip_and_user"][0] == 42
    assert obs["describe_error_unknown_type"][0] == 35
