"""Launch a reference Apache Kafka broker (single-node KRaft) for benchmarks and conformance.

Import-safe: importing this module starts nothing and touches no files. It uses only the
standard library (no client library, nothing from ``bench``), so tests can reuse it::

    from bench.reference import ReferenceKafka, ReferenceUnavailable

    with ReferenceKafka() as kafka:          # raises ReferenceUnavailable("reference unavailable: ...")
        kafka.bootstrap                      # "127.0.0.1:<port>"
        kafka.pid                            # the JVM's pid (for /proc/<pid>/status)

    kafka = start_reference()                # None (and a reason) instead of raising
    why = unavailable_reason()               # None when Java and a distribution are present

Where the distribution is found, in order: ``KAFKA_HOME``; the one ``make reference`` assembles
from Maven Central (``tests/reference/assemble.sh``) in ``<repo>/.cache/kafka-<version>``, the
version being ``REFERENCE_KAFKA_VERSION`` or ``tests/reference/kafka-version``. Java:
``$JAVA_HOME/bin/java``, else ``java`` on PATH.

Start-up: a config with ``process.roles=broker,controller``,
a static ``controller.quorum.voters`` on loopback, ``kafka-storage.sh format -t <id> -c <conf>``
(no ``--standalone``: with a static voter set Kafka formats a plain metadata directory),
then ``kafka-server-start.sh <conf>`` with ``LOG_DIR`` and ``KAFKA_HEAP_OPTS``. The broker is
ready when a Metadata request answers with broker 1. ``stop()`` sends SIGTERM and waits
(Kafka's controlled shutdown, ~1 s here); the JVM then exits with 143.
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time
import uuid
import weakref
from pathlib import Path

__all__ = [
    "ReferenceKafka",
    "ReferenceUnavailable",
    "find_java",
    "assembled_home",
    "find_kafka_home",
    "kafka_version",
    "free_port",
    "metadata_brokers",
    "port_open",
    "start_reference",
    "unavailable_reason",
]

REPO_ROOT = Path(__file__).resolve().parents[1]

# JVM exit status after SIGTERM once its shutdown hooks have run (128 + 15).
_SIGTERM_EXIT = 128 + signal.SIGTERM


class ReferenceUnavailable(RuntimeError):
    """No reference broker can run here; the message says why ("reference unavailable: ...")."""


# --------------------------------------------------------------------------- discovery


def kafka_version(repo_root: Path | None = None) -> str:
    """The reference version: ``REFERENCE_KAFKA_VERSION``, else ``tests/reference/kafka-version``."""
    env = os.environ.get("REFERENCE_KAFKA_VERSION", "").strip()
    if env:
        return env
    return (Path(repo_root or REPO_ROOT) / "tests" / "reference" / "kafka-version").read_text().strip()


def assembled_home(repo_root: Path | None = None) -> Path:
    """Where ``make reference`` puts the distribution it assembles (present or not)."""
    return Path(repo_root or REPO_ROOT) / ".cache" / f"kafka-{kafka_version(repo_root)}"


def _is_distribution(home: Path) -> bool:
    return (home / "bin" / "kafka-server-start.sh").is_file() and (home / "libs").is_dir()


def find_kafka_home(repo_root: Path | None = None) -> Path | None:
    """The Kafka distribution dir: ``KAFKA_HOME`` if set, else the one ``make reference`` assembled.

    A ``KAFKA_HOME`` that holds no distribution gives None (no silent fall-back to another one).
    """
    env = os.environ.get("KAFKA_HOME")
    if env:
        return Path(env).resolve() if _is_distribution(Path(env)) else None
    home = assembled_home(repo_root)
    if (home / ".complete").is_file() and _is_distribution(home):
        return home.resolve()
    return None


def find_java() -> str | None:
    """``$JAVA_HOME/bin/java`` if it exists, else ``java`` on PATH (what kafka-run-class.sh uses)."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        java = Path(java_home) / "bin" / "java"
        if os.access(java, os.X_OK):
            return str(java)
    return shutil.which("java")


def unavailable_reason(kafka_home: Path | None = None) -> str | None:
    """None if a reference broker can be started here, else a one-line reason."""
    if find_java() is None:
        return "reference unavailable: no Java (set JAVA_HOME or put java on PATH)"
    home = Path(kafka_home) if kafka_home else find_kafka_home()
    if home is None:
        if os.environ.get("KAFKA_HOME"):
            return f"reference unavailable: KAFKA_HOME={os.environ['KAFKA_HOME']} holds no Kafka distribution (bin/kafka-server-start.sh, libs/)"
        return f"reference unavailable: no Kafka distribution (run `make reference` or set KAFKA_HOME; nothing at {assembled_home()})"
    if not (home / "bin" / "kafka-server-start.sh").is_file():
        return f"reference unavailable: {home} has no bin/kafka-server-start.sh"
    return None


# --------------------------------------------------------------------------- small network helpers


def free_port(host: str = "127.0.0.1") -> int:
    """A port that was free a moment ago on ``host``."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def port_open(host: str, port: int, timeout: float = 0.2) -> bool:
    """True if a TCP connection to host:port is accepted."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    chunks = []
    while n > 0:
        chunk = sock.recv(n)
        if not chunk:
            raise ConnectionError("connection closed")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def metadata_brokers(host: str, port: int, timeout: float = 2.0) -> list[tuple[int, str, int]]:
    """Send one Metadata v0 request (all topics); return the brokers as (node_id, host, port).

    Hand-encoded with ``struct`` so this module needs no client library. Raises OSError or
    ValueError when the peer does not answer a well-formed response.
    """
    client_id = b"reference-probe"
    correlation_id = 7
    body = struct.pack(">hhih", 3, 0, correlation_id, len(client_id)) + client_id
    body += struct.pack(">i", 0)  # v0: an empty topic array means every topic
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall(struct.pack(">i", len(body)) + body)
        (size,) = struct.unpack(">i", _recv_exact(sock, 4))
        if not 4 <= size <= 64 * 1024 * 1024:
            raise ValueError(f"implausible Metadata response size {size}")
        data = _recv_exact(sock, size)
    (corr, count) = struct.unpack_from(">ii", data, 0)
    if corr != correlation_id:
        raise ValueError(f"correlation id {corr} != {correlation_id}")
    if not 0 <= count <= 10_000:
        raise ValueError(f"implausible broker count {count}")
    pos = 8
    brokers = []
    for _ in range(count):
        node_id, hlen = struct.unpack_from(">ih", data, pos)
        pos += 6
        bhost = data[pos : pos + hlen].decode()
        pos += hlen
        (bport,) = struct.unpack_from(">i", data, pos)
        pos += 4
        brokers.append((node_id, bhost, bport))
    return brokers


def _cluster_id() -> str:
    """22-char base64url id (what ``kafka-storage.sh random-uuid`` prints), not starting with '-'."""
    for _ in range(100):
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid
    raise RuntimeError("could not make a cluster id")  # 100 draws all starting with '-': never


# --------------------------------------------------------------------------- the broker


class ReferenceKafka:
    """One Apache Kafka broker+controller on loopback, data in a fresh temp dir.

    ``overrides`` are extra ``server.properties`` entries (they win over the defaults below).
    ``start_seconds`` is exec -> client port accepting; ``ready_seconds`` is exec -> Metadata
    lists broker 1 (both exclude ``kafka-storage.sh format``).
    """

    NODE_ID = 1

    def __init__(
        self,
        overrides: dict[str, object] | None = None,
        *,
        kafka_home: Path | str | None = None,
        heap_opts: str = "-Xmx512m",
        host: str = "127.0.0.1",
        work_dir: Path | str | None = None,
        keep_work_dir: bool = False,
        start_timeout: float = 120.0,
    ) -> None:
        self.overrides = {k: str(v) for k, v in (overrides or {}).items()}
        self.kafka_home = Path(kafka_home) if kafka_home else None
        self.heap_opts = heap_opts
        self.host = host
        self._given_work_dir = Path(work_dir) if work_dir else None
        self.keep_work_dir = keep_work_dir
        self.start_timeout = start_timeout
        self.work_dir: Path | None = None
        self.port: int | None = None
        self.controller_port: int | None = None
        self.cluster_id: str | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.start_seconds: float | None = None
        self.ready_seconds: float | None = None
        self._console = None
        self._finalizer: weakref.finalize | None = None

    # paths -----------------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        if self.port is None:
            raise RuntimeError("reference Kafka not started")
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        """The JVM's pid (kafka-server-start.sh execs into java), or None if not running."""
        return self.proc.pid if self.proc is not None and self.proc.poll() is None else None

    @property
    def config_path(self) -> Path:
        return self._require_work_dir() / "server.properties"

    @property
    def data_dir(self) -> Path:
        return self._require_work_dir() / "data"

    @property
    def log_dir(self) -> Path:
        """Kafka's own log4j files (server.log, controller.log, ...)."""
        return self._require_work_dir() / "logs"

    @property
    def console_path(self) -> Path:
        return self._require_work_dir() / "console.out"

    def _require_work_dir(self) -> Path:
        if self.work_dir is None:
            raise RuntimeError("reference Kafka not started")
        return self.work_dir

    # config ----------------------------------------------------------------
    def server_properties(self) -> dict[str, str]:
        h, port, cport = self.host, self.port, self.controller_port
        props = {
            "process.roles": "broker,controller",
            "node.id": str(self.NODE_ID),
            "controller.quorum.voters": f"{self.NODE_ID}@{h}:{cport}",
            "listeners": f"PLAINTEXT://{h}:{port},CONTROLLER://{h}:{cport}",
            "advertised.listeners": f"PLAINTEXT://{h}:{port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.data_dir),
            "num.partitions": "1",
            "default.replication.factor": "1",
            "min.insync.replicas": "1",
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
        }
        props.update(self.overrides)
        return props

    # lifecycle -------------------------------------------------------------
    def start(self) -> ReferenceKafka:
        if self.proc is not None:
            raise RuntimeError("reference Kafka already started")
        reason = unavailable_reason(self.kafka_home)
        if reason:
            raise ReferenceUnavailable(reason)
        home = self.kafka_home or find_kafka_home()
        assert home is not None
        self.kafka_home = home
        if self._given_work_dir is not None:
            self.work_dir = self._given_work_dir
            self.work_dir.mkdir(parents=True, exist_ok=True)
        else:
            self.work_dir = Path(tempfile.mkdtemp(prefix="kafka-reference-"))
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port(self.host)
        self.controller_port = free_port(self.host)
        while self.controller_port == self.port:  # bounded in practice: the kernel hands out distinct ports
            self.controller_port = free_port(self.host)
        self.cluster_id = _cluster_id()
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in self.server_properties().items()))
        env = dict(os.environ, LOG_DIR=str(self.log_dir), KAFKA_HEAP_OPTS=self.heap_opts)
        try:
            self._format(home, env)
            self._launch(home, env)
        except BaseException:
            self.stop()
            raise
        return self

    def _format(self, home: Path, env: dict[str, str]) -> None:
        cmd = [str(home / "bin" / "kafka-storage.sh"), "format", "-t", self.cluster_id, "-c", str(self.config_path)]
        try:
            done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
        except subprocess.TimeoutExpired as e:
            raise ReferenceUnavailable("reference unavailable: kafka-storage.sh format timed out") from e
        if done.returncode != 0:
            tail = (done.stdout + done.stderr).strip()[-1500:]
            raise ReferenceUnavailable(f"reference unavailable: kafka-storage.sh format failed ({done.returncode}): {tail}")

    def _launch(self, home: Path, env: dict[str, str]) -> None:
        self._console = open(self.console_path, "ab")
        cmd = [str(home / "bin" / "kafka-server-start.sh"), str(self.config_path)]
        t0 = time.monotonic()
        # Own session: a Ctrl-C meant for the caller does not reach the JVM; stop() does.
        self.proc = subprocess.Popen(
            cmd, env=env, stdin=subprocess.DEVNULL, stdout=self._console, stderr=subprocess.STDOUT, start_new_session=True
        )
        # Safety net: a broker left running when its owner is collected or the interpreter exits
        # (a caller that forgot stop(), an exception outside the with-block) gets SIGTERM.
        owned_dir = self.work_dir if self._given_work_dir is None and not self.keep_work_dir else None
        self._finalizer = weakref.finalize(self, _terminate, self.proc, owned_dir)
        deadline = t0 + self.start_timeout
        while self.start_seconds is None or self.ready_seconds is None:
            if self.proc.poll() is not None:
                raise ReferenceUnavailable(
                    f"reference unavailable: Kafka exited with {self.proc.returncode} during start-up: {self._console_tail()}"
                )
            now = time.monotonic()
            if now > deadline:
                raise ReferenceUnavailable(
                    f"reference unavailable: Kafka not ready after {self.start_timeout:.0f}s: {self._console_tail()}"
                )
            if self.start_seconds is None:
                if port_open(self.host, self.port, timeout=0.2):
                    self.start_seconds = time.monotonic() - t0
                else:
                    time.sleep(0.01)
                    continue
            try:
                if any(node == self.NODE_ID for node, _, _ in metadata_brokers(self.host, self.port, timeout=2.0)):
                    self.ready_seconds = time.monotonic() - t0
                    break
            except (OSError, ValueError, struct.error):
                pass
            time.sleep(0.05)

    def _console_tail(self, chars: int = 1500) -> str:
        try:
            return self.console_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def stop(self, timeout: float = 60.0) -> int | None:
        """SIGTERM and wait (SIGKILL after ``timeout``); remove the temp dir. Returns the exit status."""
        code = None
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(30)
            code = self.proc.returncode
        if self._console is not None:
            self._console.close()
            self._console = None
        if self.work_dir is not None and self._given_work_dir is None and not self.keep_work_dir:
            shutil.rmtree(self.work_dir, ignore_errors=True)
        self.proc = None
        return code

    @staticmethod
    def clean_exit(code: int | None) -> bool:
        """True for the exit statuses of a clean SIGTERM shutdown (0, or 143 from the JVM)."""
        return code in (0, _SIGTERM_EXIT, -signal.SIGTERM)

    def __enter__(self) -> ReferenceKafka:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = f"pid {self.pid} on {self.bootstrap}" if self.pid else "stopped"
        return f"<ReferenceKafka {state}>"


def _terminate(proc: subprocess.Popen[bytes], work_dir: Path | None) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(30)
    if work_dir is not None:
        shutil.rmtree(work_dir, ignore_errors=True)


def start_reference(**kwargs: object) -> ReferenceKafka | None:
    """Start a reference broker, or return None when none can run here (see ``unavailable_reason``).

    Failures of a present installation (format error, start-up timeout) still raise
    ReferenceUnavailable: those are not "absent", they are broken.
    """
    if unavailable_reason(kwargs.get("kafka_home")) is not None:  # type: ignore[arg-type]
        return None
    return ReferenceKafka(**kwargs).start()  # type: ignore[arg-type]
