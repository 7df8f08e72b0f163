"""The image and the compose files configure what they say, checked without a Docker engine.

The server runs here with exactly the environment and command the Dockerfile and the compose
files give it, on loopback: a wildcard listener host becomes 127.0.0.1 and fixed ports become
free ones (the advertised host names stay as written). A real client reads the advertised
endpoint of each listener, the image's HEALTHCHECK command itself runs against the server, the
two-listener example's `client` container command runs as written (with `sidecar` resolving to
127.0.0.1 in a private mount namespace, when this machine allows one), and `docker compose
config` validates the files when a Compose v2 is installed.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml
from confluent_kafka.admin import AdminClient

from tests.support import REPO, free_port, sidecar_command

DOCKERFILE = REPO / "Dockerfile"
TWO_LISTENERS = REPO / "compose" / "two-listeners.yml"
CONFORMANCE = REPO / "compose" / "docker-compose.yml"


# ---- reading the files ------------------------------------------------------------------------


class Image:
    """What the Dockerfile sets: ENV, ENTRYPOINT, CMD, EXPOSE, the HEALTHCHECK's options and
    command, and the `docker run` example of its header."""

    def __init__(self, text: str) -> None:
        joined = re.sub(r"\\\n\s*", " ", text)
        self.env: dict[str, str] = {}
        for line in joined.splitlines():
            if line.startswith("ENV "):
                for item in shlex.split(line[4:]):
                    k, _, v = item.partition("=")
                    self.env[k] = v
        self.entrypoint: list[str] = json.loads(_one(r"^ENTRYPOINT (\[.*\])$", joined))
        self.cmd: list[str] = json.loads(_one(r"^CMD (\[.*\])$", joined))
        self.expose = _one(r"^EXPOSE (.*)$", joined).split()
        health = _one(r"^HEALTHCHECK (.*)$", joined)
        options, _, command = health.partition(" CMD ")
        self.health_options = dict(re.findall(r"--([\w-]+)=(\S+)", options))
        self.health: list[str] = json.loads(command)
        self.run_example = _one(r"^#\s+(docker run .*)$", text)

    @property
    def metrics_port(self) -> str:
        return self.cmd[self.cmd.index("--metrics-port") + 1]


def _one(pattern: str, text: str) -> str:
    found = re.findall(pattern, text, re.M)
    assert len(found) == 1, f"{pattern}: {found}"
    return found[0]


def image() -> Image:
    return Image(DOCKERFILE.read_text())


def compose_file(path: Path) -> dict:
    """The file with Compose's ${VAR:-default} interpolation done (defaults only)."""
    return yaml.safe_load(re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", path.read_text()))


def seconds(duration: str) -> float:
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    return sum(float(n) * units[u] for n, u in re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h)", duration))


def on_loopback(listeners: str, ports: dict[str, int]) -> str:
    """``NAME://:9092,...`` with each wildcard host as 127.0.0.1 and each port from ``ports``."""
    out = []
    for item in listeners.split(","):
        name, _, address = item.partition("://")
        host = address.rpartition(":")[0]
        out.append(f"{name}://{'127.0.0.1' if host in ('', '0.0.0.0', '[::]') else host}:{ports[name]}")
    return ",".join(out)


def with_ports(advertised: str, ports: dict[str, int]) -> str:
    """The advertised listeners as written, with the test's ports."""
    return ",".join(f"{item.rpartition(':')[0]}:{ports[item.partition('://')[0]]}" for item in advertised.split(","))


# ---- running them -----------------------------------------------------------------------------


@contextmanager
def serve(env: dict[str, str], args: list[str], cwd: Path) -> Iterator[subprocess.Popen[str]]:
    """The container's process: ENTRYPOINT + CMD with the container's KAFKA_* environment only."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("KAFKA_")}
    proc = subprocess.Popen([*sidecar_command(), *args], env={**clean, **env}, cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 30
        while True:
            line = proc.stdout.readline()
            if "listening on" in line:
                proc.ready_line = line  # type: ignore[attr-defined]
                break
            if (not line and proc.poll() is not None) or time.monotonic() > deadline:
                raise AssertionError(f"not serving (exit {proc.poll()}): {proc.stderr.read() if proc.stderr else ''}")
        yield proc
    finally:
        proc.terminate()
        proc.wait(30)


def container_args(img: Image, metrics_port: int) -> list[str]:
    """CMD with the metrics endpoint on loopback and a free port (ENTRYPOINT is kafka-sidecar)."""
    assert img.entrypoint == ["kafka-sidecar"]
    out = [str(metrics_port) if a == img.metrics_port else a for a in img.cmd]
    for flag, value in (("--metrics-host", "127.0.0.1"), ("--console-host", "127.0.0.1"), ("--console-port", "0")):
        if flag in out:
            out[out.index(flag) + 1] = value
    return out


def healthcheck(img: Image, metrics_port: int) -> subprocess.CompletedProcess[str]:
    """The image's HEALTHCHECK command as written, with the test's metrics port."""
    cmd = [sys.executable if a == "python" else a.replace(f":{img.metrics_port}/", f":{metrics_port}/") for a in img.health]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=30)


def advertised(bootstrap: str) -> list[tuple[str, int]]:
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    return [(b.host, b.port) for b in md.brokers.values()]


# ---- the image --------------------------------------------------------------------------------


def test_image_is_configured_by_kafka_variables() -> None:
    img = image()
    assert img.cmd[0] == "serve"
    assert "--listen" not in img.cmd and "--data-dir" not in img.cmd  # they would win over KAFKA_LISTENERS / KAFKA_LOG_DIRS
    assert img.env["KAFKA_LISTENERS"] == "PLAINTEXT://:9092" and img.env["KAFKA_LOG_DIRS"] == "/data"
    assert {"9092", img.metrics_port} <= set(img.expose)
    # /readyz on the metrics endpoint, with a start period that covers a long recovery
    assert img.health[0] == "python" and f"127.0.0.1:{img.metrics_port}/readyz" in img.health[-1]
    assert seconds(img.health_options["start-period"]) >= 300
    assert seconds(img.health_options["timeout"]) > 2  # urlopen's own timeout is 2 s


def test_image_serves_and_answers_its_healthcheck(tmp_path: Path) -> None:
    img = image()
    port, mport = free_port(), free_port()
    env = {**{k: v for k, v in img.env.items() if k.startswith("KAFKA_")},
           "KAFKA_LISTENERS": on_loopback(img.env["KAFKA_LISTENERS"], {"PLAINTEXT": port}),
           "KAFKA_LOG_DIRS": str(tmp_path / "data")}
    # As the header's `docker run -e KAFKA_ADVERTISED_LISTENERS=...` example: clients are told that.
    example = dict(e.split("=", 1) for e in re.findall(r"-e (\S+)", img.run_example))
    published = re.search(r"-p 127\.0\.0\.1:(\d+):(\d+)", img.run_example)
    assert published and published.group(2) == "9092"
    with serve({**env, **example}, container_args(img, mport), tmp_path):
        host, _, adv_port = example["KAFKA_ADVERTISED_LISTENERS"].removeprefix("PLAINTEXT://").rpartition(":")
        assert advertised(f"127.0.0.1:{port}") == [(host, int(adv_port))]
        assert adv_port == published.group(1)  # the host port the example publishes
        assert (tmp_path / "data" / "meta.properties").is_file()  # KAFKA_LOG_DIRS is the data dir
        check = healthcheck(img, mport)
        assert check.returncode == 0, check.stderr
    assert healthcheck(img, mport).returncode != 0  # nothing answers: unhealthy
    # Without KAFKA_ADVERTISED_LISTENERS the listener's own address is advertised.
    with serve(env, container_args(img, free_port()), tmp_path):
        assert advertised(f"127.0.0.1:{port}") == [("127.0.0.1", port)]


# ---- compose/two-listeners.yml ----------------------------------------------------------------


def _can_remap_hosts() -> str | None:
    """Why `sidecar` cannot be made to resolve here (None when it can): a private mount
    namespace with its own /etc/hosts needs unshare and root."""
    if shutil.which("unshare") is None:
        return "no unshare"
    probe = subprocess.run(["unshare", "-m", "--propagation", "private", "true"], capture_output=True, text=True)
    return None if probe.returncode == 0 else f"unshare -m: {probe.stderr.strip()}"


def run_as_container(command: str, hosts: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """``sh -c command`` where the given names resolve as in the compose network."""
    hosts_file = tmp_path / "hosts"
    hosts_file.write_text(Path("/etc/hosts").read_text() + "".join(f"{ip} {name}\n" for name, ip in hosts.items()))
    clean = {k: v for k, v in os.environ.items() if not k.startswith("KAFKA_")}
    clean["PATH"] = f"{Path(sidecar_command()[0]).parent}{os.pathsep}{clean.get('PATH', '')}"
    script = f"mount --bind {shlex.quote(str(hosts_file))} /etc/hosts && exec sh -c {shlex.quote(command)}"
    return subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script],
                          capture_output=True, text=True, timeout=120, env=clean)


def test_two_listener_compose_example(tmp_path: Path) -> None:
    compose = compose_file(TWO_LISTENERS)
    sidecar, client = compose["services"]["sidecar"], compose["services"]["client"]
    assert "command" not in sidecar and "entrypoint" not in sidecar  # the image's CMD: no --listen
    env = {k: str(v) for k, v in sidecar["environment"].items()}
    names = [item.partition("://")[0] for item in env["KAFKA_LISTENERS"].split(",")]
    assert names == ["HOST", "DOCKER"]
    assert env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"] == "HOST:PLAINTEXT,DOCKER:PLAINTEXT"
    assert env["KAFKA_ADVERTISED_LISTENERS"] == "HOST://localhost:9092,DOCKER://sidecar:19092"
    # HOST only, on the host's loopback; and the web console of the image's CMD
    assert sidecar["ports"] == ["127.0.0.1:9092:9092", "127.0.0.1:8080:8080"]
    # the client: on demand (`run`), after the broker is healthy, without the image's healthcheck
    assert client["profiles"] == ["client"] and client["healthcheck"] == {"disable": True}
    assert client["depends_on"] == {"sidecar": {"condition": "service_healthy"}}

    img = image()
    ports = {"HOST": free_port(), "DOCKER": free_port()}
    mport = free_port()
    run_env = {**{k: v for k, v in img.env.items() if k.startswith("KAFKA_")}, **env,
               "KAFKA_LISTENERS": on_loopback(env["KAFKA_LISTENERS"], ports),
               "KAFKA_ADVERTISED_LISTENERS": with_ports(env["KAFKA_ADVERTISED_LISTENERS"], ports),
               "KAFKA_LOG_DIRS": str(tmp_path / "data")}
    with serve(run_env, container_args(img, mport), tmp_path) as proc:
        console = proc.ready_line.strip().rpartition("; console on ")[2]
        with urllib.request.urlopen(console, timeout=10) as r:  # the image's console (on loopback here)
            assert r.status == 200 and b"<h2>Topics" in r.read()
        # each client is sent back to the listener it came through, by the advertised name
        assert advertised(f"127.0.0.1:{ports['HOST']}") == [("localhost", ports["HOST"])]
        assert advertised(f"127.0.0.1:{ports['DOCKER']}") == [("sidecar", ports["DOCKER"])]
        assert advertised(f"localhost:{ports['HOST']}") == [("localhost", ports["HOST"])]
        assert healthcheck(img, mport).returncode == 0  # what `condition: service_healthy` waits for

        why_not = _can_remap_hosts()
        if why_not:
            pytest.skip(f"the client container's command needs `sidecar` to resolve: {why_not}")
        assert client["entrypoint"] == ["sh", "-c"] and len(client["command"]) == 1
        command = client["command"][0].replace("sidecar:19092", f"sidecar:{ports['DOCKER']}")
        ran = run_as_container(command, {"sidecar": "127.0.0.1"}, tmp_path)
        assert ran.returncode == 0, ran.stderr
        (record,) = [json.loads(line) for line in ran.stdout.splitlines()]
        assert (record["topic"], record["key"], record["value"]) == ("events", "k1", "from-a-container")
        # KAFKA_NUM_PARTITIONS from the compose file: the auto-created topic has 3 partitions
        md = AdminClient({"bootstrap.servers": f"127.0.0.1:{ports['HOST']}"}).list_topics("events", timeout=10)
        assert len(md.topics["events"].partitions) == int(env["KAFKA_NUM_PARTITIONS"])


# ---- compose/docker-compose.yml (make conformance-compose) ------------------------------------


def test_conformance_compose_sidecar(tmp_path: Path) -> None:
    sidecar = compose_file(CONFORMANCE)["services"]["sidecar"]
    assert "command" not in sidecar  # the image's CMD
    env = {k: str(v) for k, v in sidecar["environment"].items()}
    assert sidecar["ports"] == ["127.0.0.1:29092:9092"] and env["KAFKA_ADVERTISED_LISTENERS"] == "PLAINTEXT://127.0.0.1:29092"
    img = image()
    port = free_port()
    run_env = {**{k: v for k, v in img.env.items() if k.startswith("KAFKA_")}, **env,
               "KAFKA_LISTENERS": on_loopback(img.env["KAFKA_LISTENERS"], {"PLAINTEXT": port}),
               "KAFKA_ADVERTISED_LISTENERS": f"PLAINTEXT://127.0.0.1:{port}", "KAFKA_LOG_DIRS": str(tmp_path / "data")}
    shown = subprocess.run([*sidecar_command(), "config", "--show", "--only-set", "--json"],
                           env={**{k: v for k, v in os.environ.items() if not k.startswith("KAFKA_")}, **run_env},
                           capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr  # every conformance setting is a valid config
    mport = free_port()
    with serve(run_env, container_args(img, mport), tmp_path):
        assert advertised(f"127.0.0.1:{port}") == [("127.0.0.1", port)]
        assert healthcheck(img, mport).returncode == 0


def _compose_v2() -> list[str] | None:
    """A Compose v2 command (`docker compose` or a v2 `docker-compose`), None without one."""
    for cmd in (["docker", "compose"], ["docker-compose"]):
        if shutil.which(cmd[0]) is None:
            continue
        version = subprocess.run([*cmd, "version", "--short"], capture_output=True, text=True)
        if version.returncode == 0 and not version.stdout.strip().startswith("1."):
            return cmd
    return None


@pytest.mark.parametrize("path", [TWO_LISTENERS, CONFORMANCE], ids=lambda p: p.name)
def test_docker_compose_config_accepts_the_file(path: Path) -> None:
    compose = _compose_v2()
    if compose is None:
        pytest.skip("no Docker Compose v2 here (`docker compose config` needs no engine)")
    run = subprocess.run([*compose, "-f", str(path), "--profile", "client", "config", "--format", "json"],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    services = json.loads(run.stdout)["services"]
    assert "--listen" not in json.dumps(services)
