"""The image and the compose examples configure what they say, checked without Docker: the
server runs here with exactly the environment and command the Dockerfile and
compose/two-listeners.yml give it (wildcard hosts on loopback, free ports), a real client
reads the advertised endpoint of each listener, and the image's healthcheck command runs."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from confluent_kafka.admin import AdminClient

from tests.support import REPO, free_port, sidecar_command

DOCKERFILE = REPO / "Dockerfile"
TWO_LISTENERS = REPO / "compose" / "two-listeners.yml"


def dockerfile() -> tuple[dict[str, str], list[str], list[str], str]:
    """(ENV, ENTRYPOINT, CMD, HEALTHCHECK command) of the Dockerfile, continuation lines joined."""
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text())
    env: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("ENV "):
            for item in shlex.split(line[4:]):
                k, _, v = item.partition("=")
                env[k] = v
    entrypoint = json.loads(re.search(r"^ENTRYPOINT (\[.*\])$", text, re.M).group(1))
    cmd = json.loads(re.search(r"^CMD (\[.*\])$", text, re.M).group(1))
    health = json.loads(re.search(r"^HEALTHCHECK .*? CMD (\[.*\])$", text, re.M).group(1))
    return env, entrypoint, cmd, health[-1]


def start(env: dict[str, str], args: list[str], tmp_path: Path) -> subprocess.Popen[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("KAFKA_")}
    proc = subprocess.Popen([*sidecar_command(), *args], env={**clean, **env}, cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if "listening on" in line:
            return proc
        if not line and proc.poll() is not None:
            raise AssertionError(f"exited {proc.returncode}: {proc.stderr.read() if proc.stderr else ''}")
    proc.kill()
    raise AssertionError("not ready in 30 s")


def advertised(bootstrap: str) -> list[tuple[str, int]]:
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    return [(b.host, b.port) for b in md.brokers.values()]


def test_image_env_configures_listeners_and_the_healthcheck_asks_readyz(tmp_path: Path) -> None:
    env, entrypoint, cmd, health = dockerfile()
    assert entrypoint == ["kafka-sidecar"] and cmd[0] == "serve"
    assert "--listen" not in cmd and "--data-dir" not in cmd  # they would win over KAFKA_LISTENERS / KAFKA_LOG_DIRS
    assert env["KAFKA_LISTENERS"] == "PLAINTEXT://:9092" and env["KAFKA_LOG_DIRS"] == "/data"
    assert "/readyz" in health
    metrics = cmd[cmd.index("--metrics-port") + 1]
    port, mport = free_port(), free_port()
    run_env = {"KAFKA_LISTENERS": f"PLAINTEXT://127.0.0.1:{port}", "KAFKA_LOG_DIRS": str(tmp_path / "data"),
               "KAFKA_ADVERTISED_LISTENERS": "PLAINTEXT://broker.example.com:19092"}
    args = [a if a != metrics else str(mport) for a in cmd]
    proc = start(run_env, args, tmp_path)
    try:
        assert advertised(f"127.0.0.1:{port}") == [("broker.example.com", 19092)]
        assert (tmp_path / "data" / "meta.properties").is_file()
        check = subprocess.run(["python3", "-c", health.replace(metrics, str(mport))], capture_output=True, text=True, timeout=30)
        assert check.returncode == 0, check.stderr
    finally:
        proc.terminate()
        proc.wait(30)
    down = subprocess.run(["python3", "-c", health.replace(metrics, str(mport))], capture_output=True, text=True, timeout=30)
    assert down.returncode != 0  # nothing answers: unhealthy


def test_two_listener_compose_example(tmp_path: Path) -> None:
    compose = yaml.safe_load(TWO_LISTENERS.read_text())
    env = {k: str(v) for k, v in compose["services"]["sidecar"]["environment"].items()}
    listeners = dict(item.split("://") for item in env["KAFKA_LISTENERS"].split(","))
    assert set(listeners) == {"HOST", "DOCKER"}
    # Here: the same listeners on loopback and free ports; the advertised addresses as written.
    ports = {name: free_port() for name in listeners}
    env["KAFKA_LISTENERS"] = ",".join(f"{n}://127.0.0.1:{ports[n]}" for n in listeners)
    env["KAFKA_LOG_DIRS"] = str(tmp_path / "data")
    _, _, cmd, _ = dockerfile()
    cmd = [a if a != "9308" else str(free_port()) for a in cmd]
    proc = start(env, cmd, tmp_path)
    try:
        assert advertised(f"127.0.0.1:{ports['HOST']}") == [("localhost", 9092)]
        assert advertised(f"127.0.0.1:{ports['DOCKER']}") == [("sidecar", 19092)]
        published = compose["services"]["sidecar"]["ports"]
        assert published == ["127.0.0.1:9092:9092"]  # the HOST listener, on the host's loopback only
    finally:
        proc.terminate()
        proc.wait(30)
    client = compose["services"]["client"]["command"][0]
    assert "-b sidecar:19092" in client and "kafka-sidecar produce" in client and "kafka-sidecar consume" in client


@pytest.mark.parametrize("path", [TWO_LISTENERS, REPO / "compose" / "docker-compose.yml"])
def test_compose_files_pass_no_listen_flag(path: Path) -> None:
    for name, service in yaml.safe_load(path.read_text())["services"].items():
        command = service.get("command") or []
        assert "--listen" not in " ".join(map(str, command)), f"{path.name}: {name} overrides KAFKA_LISTENERS with --listen"
