"""The two brokers an outside suite runs against, started the same way and with the same settings.

- ``ours``: a ``kafka-sidecar serve`` subprocess (``tests.support.SidecarProcess``) with a fresh
  data dir;
- ``reference``: Apache Kafka 4.3.1 (``bench.reference.ReferenceKafka``, KRaft, one node).

Each has two loopback listeners on free ports: PLAINTEXT (``bootstrap``) and SASL_PLAINTEXT
(``sasl_bootstrap``) with SCRAM-SHA-256 and the user ``SCRAM_USER`` (on Kafka made by
``kafka-configs.sh`` after start, on kafka-sidecar by its JAAS ``user_<name>`` convenience); the reference's SASL listener also offers OAUTHBEARER with
Kafka's default (unsecured-token) validator, which kafka-sidecar does not implement.
Both get ``OVERRIDES`` (what the conformance suite uses plus no rebalance delay and, as
librdkafka's CI, ``group.share.min.record.lock.duration.ms=1000``). Automatic topic
creation and share groups are on by default in both (``share.version`` finalized at 1).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from bench.reference import ReferenceKafka, find_kafka_home, free_port, port_open
from tests.conformance.harness import BROKER_OVERRIDES
from tests.support import SidecarProcess, sidecar_command

OURS, REFERENCE = "ours", "reference"
BROKERS = (OURS, REFERENCE)

# librdkafka's CI broker (tests/cluster_testing.py, .semaphore) lowers the share-lock floor so its
# share-consumer tests (0173...) can set a group's share.record.lock.duration.ms to a few seconds.
OVERRIDES: dict[str, str] = {**BROKER_OVERRIDES, "group.initial.rebalance.delay.ms": "0",
                             "group.share.min.record.lock.duration.ms": "1000"}
SCRAM_USER, SCRAM_PASSWORD = "testuser", "testpass"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
SASL_OVERRIDES: dict[str, str] = {
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
    "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": f"{SCRAM_MODULE} required;",
}


class _Sidecar(SidecarProcess):
    """kafka-sidecar with its own ``listeners`` (SidecarProcess passes ``--listen``, which wins)."""

    def __init__(self, data_dir: Path, overrides: dict[str, str]) -> None:
        super().__init__(data_dir, overrides)
        self.ports: dict[str, int] = {}

    def start(self, timeout: float = 60.0) -> _Sidecar:
        cmd = [*sidecar_command(), "serve", "--data-dir", str(self.data_dir)]
        for k, v in self.overrides.items():
            cmd += ["--override", f"{k}={v}"]
        self._log_file = open(self.log_path, "a")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self._log_file, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()  # the ready line, or "" when it exits first
        if "listening on " not in line:
            self.kill()
            raise RuntimeError(f"kafka-sidecar did not start: {line!r} {self.log_text()[-2000:]}")
        self.ports = {name: int(port) for _h, port, name in re.findall(r"(\S+):(\d+) \[(\w+)\]", line)}
        self.port = self.ports["PLAINTEXT"]
        return self


class _Reference(ReferenceKafka):
    """ReferenceKafka plus the SASL_PLAINTEXT listener (SCRAM-SHA-256 and OAUTHBEARER)."""

    sasl_port: int | None = None

    def server_properties(self) -> dict[str, str]:
        props = super().server_properties()
        if self.sasl_port is None:
            self.sasl_port = free_port(self.host)
        sasl = f"SASL_PLAINTEXT://{self.host}:{self.sasl_port}"
        props["listeners"] += "," + sasl
        props["advertised.listeners"] += "," + sasl
        props.update(SASL_OVERRIDES)
        props["sasl.enabled.mechanisms"] = "SCRAM-SHA-256,OAUTHBEARER"
        props["listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config"] = (
            f'{OAUTH_MODULE} required unsecuredLoginStringClaim_sub="admin";')
        return props


def add_scram_user(bootstrap: str) -> None:
    """Kafka's kafka-configs.sh --alter --add-config SCRAM-SHA-256=[...] for SCRAM_USER."""
    home = find_kafka_home()
    if home is None:
        raise RuntimeError("no Kafka distribution for kafka-configs.sh (make reference)")
    cmd = [str(home / "bin" / "kafka-configs.sh"), "--bootstrap-server", bootstrap, "--alter",
           "--add-config", f"SCRAM-SHA-256=[iterations=4096,password={SCRAM_PASSWORD}]",
           "--entity-type", "users", "--entity-name", SCRAM_USER]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=180,
                          env={**os.environ, "KAFKA_HEAP_OPTS": "-Xmx256m"})
    if done.returncode != 0:
        raise RuntimeError(f"kafka-configs.sh --add-config SCRAM-SHA-256 failed: {(done.stdout + done.stderr)[-1500:]}")


@dataclass
class RunningBroker:
    """A started broker: where it listens and how to tell whether it is still up."""

    name: str
    bootstrap: str
    sasl_bootstrap: str
    description: str
    _alive: object = field(repr=False, default=None)

    def alive(self) -> bool:
        host, _, port = self.bootstrap.rpartition(":")
        return bool(self._alive()) and port_open(host, int(port), timeout=2.0)  # type: ignore[operator]


@contextmanager
def running(name: str, work: Path | None = None) -> Iterator[RunningBroker]:
    """Start broker ``name`` (OURS or REFERENCE) in a new dir under ``work``; stop it after and
    remove its data, keeping its logs (``work`` None: a temporary dir, removed whole)."""
    tmp = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=work))
    try:
        if name == OURS:
            # The SCRAM user from the JAAS entry's user_<name> option (kafka-sidecar's documented
            # convenience: no JVM needed for our half).
            overrides = {**OVERRIDES, **SASL_OVERRIDES, "sasl.enabled.mechanisms": "SCRAM-SHA-256",
                         "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
                         "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config":
                             f'{SCRAM_MODULE} required user_{SCRAM_USER}="{SCRAM_PASSWORD}";'}
            server = _Sidecar(tmp / "data", overrides).start()
            try:
                assert server.proc is not None
                yield RunningBroker(OURS, server.bootstrap, f"127.0.0.1:{server.ports['SASL_PLAINTEXT']}",
                                    f"kafka-sidecar pid {server.proc.pid}",
                                    lambda: server.proc is not None and server.proc.poll() is None)
            finally:
                try:
                    server.stop()
                except Exception:  # noqa: BLE001 - stop() killed it; nothing else to do
                    pass
        elif name == REFERENCE:
            kafka = _Reference(dict(OVERRIDES), work_dir=tmp / "kafka", keep_work_dir=True, heap_opts="-Xmx1g").start()
            try:
                add_scram_user(kafka.bootstrap)
                yield RunningBroker(REFERENCE, kafka.bootstrap, f"{kafka.host}:{kafka.sasl_port}",
                                    f"Apache Kafka pid {kafka.pid}", lambda: kafka.pid is not None)
            finally:
                kafka.stop()
        else:
            raise ValueError(f"unknown broker {name!r} (one of {', '.join(BROKERS)})")
    finally:
        if work is None:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            shutil.rmtree(tmp / "data", ignore_errors=True)
            shutil.rmtree(tmp / "kafka" / "data", ignore_errors=True)
