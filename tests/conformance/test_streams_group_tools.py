"""kafka-streams-groups.sh and kafka-streams-application-reset.sh (Kafka 4.3.1's own tools) on a
streams group (KIP-1071) made by Kafka 4.3.1's Streams word count (tests/tools/streams_app/
WordCount.java, ``group.protocol=streams``), side by side with Apache Kafka: the internal topics
the broker created, --list (--state), --describe with --state/--members/--offsets while the app
runs, then with the app gone --reset-offsets, the application reset tool and --delete."""

from __future__ import annotations

import functools
import os
import re
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from bench.reference import find_java, find_kafka_home
from tests.conformance.harness import Ctx
from tests.conformance.wire import batch

pytestmark = pytest.mark.skipif(find_java() is None or find_kafka_home() is None,
                                reason="needs Java and Kafka 4.3.1's Streams and tools (KAFKA_HOME or make reference)")

APP = Path(__file__).resolve().parents[1] / "tools" / "streams_app" / "WordCount.java"
_ID = re.compile(r"^[A-Za-z0-9_-]{22}$|^[0-9a-f]{8}-[0-9a-f-]{27}$")


@functools.cache
def _classes() -> Path:
    home = find_kafka_home()
    assert home is not None
    out = Path(tempfile.mkdtemp(prefix="streams-app-"))
    subprocess.run(["javac", "-d", str(out), "-cp", f"{home / 'libs'}/*", str(APP)], check=True, timeout=180)
    return out


def _tool(ctx: Ctx, script: str, *args: str) -> list[list[str]]:
    home = find_kafka_home()
    assert home is not None
    env = {**os.environ, "KAFKA_HEAP_OPTS": "-Xmx256m"}
    run = subprocess.run([str(home / "bin" / script), "--bootstrap-server", ctx.bootstrap, *args],
                         capture_output=True, text=True, env=env, timeout=120)
    lines = (run.stdout + "\n" + "\n".join(e for e in run.stderr.splitlines() if e.startswith("Error"))).splitlines()
    out = []
    for line in lines:
        words = [f"<{ctx.names[w]}>" if w in ctx.names else w for w in line.replace("'", " ' ").replace(",", " , ").split()]
        words = ["<id>" if _ID.match(w) else w for w in words]
        if words:
            out.append(words)
    return out


def _groups(ctx: Ctx, *args: str) -> list[list[str]]:
    return _tool(ctx, "kafka-streams-groups.sh", *args)


def scenario_streams_group_tools(ctx: Ctx) -> dict[str, Any]:
    home = find_kafka_home()
    assert home is not None
    w = ctx.wire()
    src, dst, app = ctx.topic("in"), ctx.topic("out"), ctx.group("app")
    changelog, repartition = ctx.alias(f"{app}-counts-changelog", "changelog"), ctx.alias(f"{app}-counts-repartition", "repartition")
    w.create_topic(src, partitions=2)
    w.create_topic(dst, partitions=2)
    for p in (0, 1):
        assert w.produce(src, batch([b"a b c", b"a b", b"a"]), partition=p)["error"] == 0
    state = Path(tempfile.mkdtemp(prefix="streams-state-"))
    proc = subprocess.Popen(["java", "-Xmx256m", "-cp", f"{home / 'libs'}/*:{_classes()}", "WordCount", ctx.bootstrap, app,
                             src, dst, str(state)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(proc.stdout or ()), daemon=True).start()
    obs: dict[str, Any] = {}
    try:
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline and not any(x.startswith("ASSIGNED") for x in lines) and proc.poll() is None:
            time.sleep(0.5)
        obs["app_running"] = [x.strip() for x in lines if x.startswith(("STATE RUNNING", "ASSIGNED", "FATAL"))][:2]
        # the app commits its input offsets (6 records, 3 per partition) within its 200 ms interval
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            offsets = sorted(_groups(ctx, "--describe", "--group", app, "--offsets"))
            if sum(1 for r in offsets if r[:2] == ["<app>", "<in>"] and r[-1] == "0") == 2:
                break
            time.sleep(1)
        obs["describe_offsets"] = offsets
        topics = w.metadata([changelog, repartition])["topics"]
        obs["internal_topics"] = sorted((f"<{ctx.names[t['name']]}>", t["error_code"], len(t["partitions"])) for t in topics)
        obs["list_state"] = [r for r in _groups(ctx, "--list", "--state") if r[0] in ("GROUP", "<app>")]
        obs["describe_state"] = [r[:1] + r[-2:] for r in _groups(ctx, "--describe", "--group", app, "--state")]
        obs["describe_members"] = [r[:1] + r[4:] if r[0] == "<app>" else r for r in _groups(ctx, "--describe", "--group", app, "--members")]
        obs["delete_while_running"] = _groups(ctx, "--delete", "--group", app)
    finally:
        proc.terminate()
        proc.wait(60)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        state = [r[:1] + r[-2:] for r in _groups(ctx, "--describe", "--group", app, "--state")]
        if state and state[-1][-1] == "0":
            break
        time.sleep(1)
    obs["describe_state_after_leave"] = state
    obs["reset_dry_run"] = sorted(_groups(ctx, "--reset-offsets", "--group", app, "--topic", src, "--to-earliest", "--dry-run"))
    obs["reset_execute"] = sorted(_groups(ctx, "--reset-offsets", "--group", app, "--topic", src, "--to-offset", "1", "--execute"))
    reset = _tool(ctx, "kafka-streams-application-reset.sh", "--application-id", app, "--input-topics", src)
    # a line listing topics ("[a, b]") lists a HashSet of names whose order differs per broker (run ids)
    obs["application_reset"] = sorted(sorted(x.strip("[],") for x in r) if any(x.startswith("[") for x in r) else r for r in reset)
    topics = w.metadata([changelog, repartition])["topics"]
    obs["internal_topics_after_reset"] = sorted((f"<{ctx.names[t['name']]}>", t["error_code"]) for t in topics)
    obs["delete"] = _groups(ctx, "--delete", "--group", app)
    obs["list_after_delete"] = [r for r in _groups(ctx, "--list") if r[0] == "<app>"]
    return obs


@pytest.mark.timeout(900)
def test_streams_group_tools(conform):
    obs = conform(scenario_streams_group_tools)
    assert obs["app_running"][0] == "STATE RUNNING", obs["app_running"]
    assert obs["internal_topics"] == [["<changelog>", 0, 2], ["<repartition>", 0, 2]]
    assert obs["list_state"][1][0] == "<app>" and obs["list_after_delete"] == []
