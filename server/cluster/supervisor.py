"""The parent process of ``serve --processes N``: binds every node's ports, starts the nodes,
restarts one that dies, stops them all on SIGTERM/SIGINT.

The listening sockets are the parent's: it binds them all before any node starts (a taken port
is one line and nothing starts), hands node ``k`` its own by file descriptor, and keeps them
across a node's restart, so a node's port never changes and clients connecting while it restarts
wait in the accept backlog rather than being refused. Each node is a whole broker process
(``serve --cluster-node k``) in ``<data-dir>/node-<k>``; a node that exits while the cluster
runs is started again (its partitions recover as after a ``kill -9``), with a growing delay if
it keeps dying at start. The ready line lists every node, node 1 first.
"""

from __future__ import annotations

import argparse
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from socket import socket

from kafka_sidecar.storage.metadata_files import (
    META_PROPERTIES,
    kafka_uuid_str,
    load_meta_properties,
    new_kafka_uuid,
)

from ..listeners import ListenerSettings, advertised_host_for, bind_sockets, bracket
from .layout import ClusterLayout, lock_cluster_dir, node_dir, node_port

log = logging.getLogger("kafka_sidecar.cluster")

STOP_TIMEOUT_S = 60.0  # a node still running this long after SIGTERM is killed
RESTART_DELAY_S = (0.2, 30.0)  # first and longest delay before restarting a node that died
STABLE_S = 10.0  # a node up this long counts as healthy again (the delay starts over)
READY_TIMEOUT_S = 600.0  # a node's start (log recovery included) may take this long


class ClusterStartError(Exception):
    """The cluster cannot start (one line for the user)."""


@dataclass
class Node:
    node_id: int
    sockets: dict[str, list[socket]]
    proc: subprocess.Popen[str] | None = None
    started: float = 0.0
    ready: bool = False
    failures: int = 0
    restart_at: float | None = None
    endpoints: dict[str, tuple[str, int]] = field(default_factory=dict)
    internal: tuple[str, int] | None = None


def prepare(data_dir: Path, processes: int, settings: ListenerSettings) -> tuple[ClusterLayout, list[Node], int]:
    """Lock the cluster dir, check it, bind every node's sockets, write meta.properties of new
    nodes and the cluster file: (layout, nodes, lock fd). ClusterStartError on any problem."""
    try:
        lock_fd = lock_cluster_dir(data_dir)
    except OSError as e:
        raise ClusterStartError(f"data dir {data_dir} is in use by another process or unusable: {e.strerror or e}") from None
    if (data_dir / META_PROPERTIES).exists():
        raise ClusterStartError(f"data dir {data_dir} holds a one-process broker's data ({META_PROPERTIES}); "
                                f"--processes keeps each node's data in {data_dir}/node-<id>: use another data dir")
    try:
        old = ClusterLayout.load(data_dir)
    except ValueError as e:
        raise ClusterStartError(str(e)) from None
    if old is not None and old.processes != processes:
        raise ClusterStartError(f"data dir {data_dir} is a cluster of {old.processes} processes; its partitions are placed "
                                f"for that many nodes: start it with --processes {old.processes}")
    cluster_id = old.cluster_id if old is not None else kafka_uuid_str(new_kafka_uuid())
    nodes: list[Node] = []
    try:
        for k in range(1, processes + 1):
            node = Node(k, {})
            nodes.append(node)
            for ep in settings.listeners:
                port = node_port(ep.port, k)
                try:
                    socks = bind_sockets(ep.host, port)
                except OSError as e:
                    raise ClusterStartError(f"cannot listen on {ep.name}://{bracket(ep.host)}:{port} for node {k}: {e.strerror or e}") from None
                node.sockets[ep.name] = socks
                bound = socks[0].getsockname()[1]
                if node.internal is None and ep.security_protocol == "PLAINTEXT":
                    node.internal = (advertised_host_for(socks[0].getsockname()[0]), bound)
                adv = settings.advertised.get(ep.name)
                if adv is not None:
                    node.endpoints[ep.name] = (advertised_host_for(adv.host), node_port(adv.port, k) or bound)
                else:
                    node.endpoints[ep.name] = (advertised_host_for(ep.host), bound)
            node_dir(data_dir, k).mkdir(exist_ok=True)
            found, _ = load_meta_properties(node_dir(data_dir, k), k, cluster_id)
            if found != cluster_id:
                raise ClusterStartError(f"{node_dir(data_dir, k) / META_PROPERTIES} has cluster id {found}, the cluster's is {cluster_id}")
    except BaseException:
        for node in nodes:
            for socks in node.sockets.values():
                for s in socks:
                    s.close()
        os.close(lock_fd)
        raise
    layout = ClusterLayout(cluster_id, processes, {n.node_id: dict(n.endpoints) for n in nodes},
                           {n.node_id: n.internal for n in nodes if n.internal is not None})
    layout.save(data_dir)
    return layout, nodes, lock_fd


def node_command(args: argparse.Namespace, data_dir: Path, node: Node) -> tuple[list[str], list[int]]:
    """The command line of node ``node`` and the descriptors it inherits."""
    cmd = [sys.executable, "-m", "kafka_sidecar.server", "serve", "--data-dir", str(node_dir(data_dir, node.node_id)),
           "--cluster-node", str(node.node_id), "--log-level", args.log_level, "--log-format", args.log_format]
    if args.config is not None:
        cmd += ["--config", str(args.config)]
    for o in args.override:
        cmd += ["--override", o]
    if args.listen is not None:
        host, port = args.listen
        cmd += ["--listen", f"{bracket(host)}:{port}"]
    if args.metrics_port is not None:
        cmd += ["--metrics-port", str(node_port(args.metrics_port, node.node_id)), "--metrics-host", args.metrics_host]
    fds = [s.fileno() for socks in node.sockets.values() for s in socks]
    spec = ";".join(f"{name}={','.join(str(s.fileno()) for s in socks)}" for name, socks in node.sockets.items())
    cmd += ["--listen-fds", spec]
    return cmd, fds


class Supervisor:
    """Runs the nodes until SIGTERM/SIGINT (see the module doc)."""

    def __init__(self, args: argparse.Namespace, data_dir: Path, layout: ClusterLayout, nodes: list[Node]) -> None:
        self.args = args
        self.data_dir = data_dir
        self.layout = layout
        self.nodes = {n.node_id: n for n in nodes}
        self.lines: queue.Queue[tuple[int, subprocess.Popen[str], str | None]] = queue.Queue()
        self.stopping = False
        self.started = time.monotonic()

    def _spawn(self, node: Node) -> None:
        cmd, fds = node_command(self.args, self.data_dir, node)
        node.proc = subprocess.Popen([*cmd, "--supervisor-pid", str(os.getpid())], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                     text=True, pass_fds=fds)
        node.started = time.monotonic()
        node.ready = False
        node.restart_at = None
        threading.Thread(target=self._read, args=(node.node_id, node.proc), daemon=True, name=f"node-{node.node_id}-stdout").start()

    def _read(self, node_id: int, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            self.lines.put((node_id, proc, line.rstrip("\n")))
        self.lines.put((node_id, proc, None))

    def _on_signal(self, signum: int, frame: object) -> None:
        self.stopping = True

    def run(self) -> int:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._on_signal)
        for node in self.nodes.values():
            self._spawn(node)
        announced = False
        while not self.stopping:
            try:
                node_id, proc, line = self.lines.get(timeout=0.2)
            except queue.Empty:
                node_id, proc, line = 0, None, None
            node = self.nodes.get(node_id)
            if node is not None and line is not None and node.proc is proc:
                if line.startswith("kafka-sidecar listening on ") and not node.ready:
                    node.ready = True
                    if announced:
                        print(f"kafka-sidecar node {node_id} restarted: {line[len('kafka-sidecar '):]}", flush=True)
                elif line.startswith("kafka-sidecar "):
                    print(f"kafka-sidecar node {node_id}: {line[len('kafka-sidecar '):]}", flush=True)
                else:
                    print(line, flush=True)
            if not announced and all(n.ready for n in self.nodes.values()):
                announced = True
                print(self.ready_line(), flush=True)
            code = self._check_nodes(announced)
            if code is not None:
                self.stop()
                return code
        return self.stop()

    def _check_nodes(self, announced: bool) -> int | None:
        """Restart nodes that died; an exit code when the cluster must stop (a node failed its first start)."""
        now = time.monotonic()
        for node in self.nodes.values():
            if node.restart_at is not None:
                if now >= node.restart_at:
                    self._spawn(node)
                continue
            assert node.proc is not None
            rc = node.proc.poll()
            if rc is None:
                if node.ready and now - node.started > STABLE_S:
                    node.failures = 0
                elif not node.ready and now - node.started > READY_TIMEOUT_S:
                    sys.stderr.write(f"kafka-sidecar: error: node {node.node_id} did not start in {READY_TIMEOUT_S:.0f} s\n")
                    return 1
                continue
            if not announced:
                sys.stderr.write(f"kafka-sidecar: error: node {node.node_id} exited with status {rc} while starting\n")
                return rc if rc > 0 else 1
            node.failures += 1
            delay = min(RESTART_DELAY_S[0] * 2 ** (node.failures - 1), RESTART_DELAY_S[1])
            log.warning("node %d exited with status %d; restarting it in %.1f s", node.node_id, rc, delay)
            node.ready = False
            node.restart_at = now + delay
        return None

    def ready_line(self) -> str:
        elapsed = (time.monotonic() - self.started) * 1000
        names = list(next(iter(self.nodes.values())).endpoints)
        parts = []
        for node in self.nodes.values():
            for name in names:
                sock = node.sockets[name][0]
                host = advertised_host_for(sock.getsockname()[0])
                where = f"{bracket(host)}:{sock.getsockname()[1]}"
                parts.append(f"{where} [node {node.node_id}]" if len(names) == 1 else f"{where} [node {node.node_id} {name}]")
        return (f"kafka-sidecar listening on {', '.join(parts)} (data dir {self.data_dir}, cluster id {self.layout.cluster_id}, "
                f"{len(self.nodes)} processes, ready in {elapsed:.0f} ms)")

    def stop(self) -> int:
        """SIGTERM every node, wait for them (killing one still running after STOP_TIMEOUT_S)."""
        self.stopping = True
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_IGN)
        running = [n.proc for n in self.nodes.values() if n.proc is not None and n.proc.poll() is None]
        for p in running:
            p.send_signal(signal.SIGTERM)
        code = 0
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for p in running:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            if p.returncode != 0:
                code = 1
        return code


def serve_cluster(args: argparse.Namespace, data_dir: Path, settings: ListenerSettings) -> int:
    """``serve --processes N``: the whole life of the cluster (exit status 2 if it cannot start)."""
    if args.console_port is not None:
        sys.stderr.write("kafka-sidecar: error: --console-port is not supported with --processes > 1 yet\n")
        return 2
    try:
        layout, nodes, _lock_fd = prepare(data_dir, args.processes, settings)
    except ClusterStartError as e:
        sys.stderr.write(f"kafka-sidecar: error: {e}\n")
        return 2
    return Supervisor(args, data_dir, layout, nodes).run()
