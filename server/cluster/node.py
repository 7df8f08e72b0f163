"""ClusterNode: what one broker process of a ``--processes N`` cluster knows of the cluster.

Its node id, the layout (every node's endpoints, ``layout.py``), the static placement
(``placement.py``), the listening sockets the supervisor handed it, and the shared topic log
(``metadata_log.py``). The Broker holds one (``Broker.cluster``) only in cluster mode; a
one-process broker has None and never imports this package.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from .admin import ClusterAdmin
from .layout import ClusterLayout
from .peers import Peers
from .placement import Placement
from .topics import ClusterTopics
from .txn_markers import TxnMarkerSender

if TYPE_CHECKING:
    from kafka_sidecar.storage.log_manager import LogManager

log = logging.getLogger(__name__)


class ClusterNode:
    def __init__(self, node_id: int, data_dir: Path, listen_fds: str = "") -> None:
        self.node_id = node_id
        self.data_dir = Path(data_dir)
        self.cluster_dir = self.data_dir.parent  # node-<id> inside the cluster's data dir
        layout = ClusterLayout.load(self.cluster_dir)
        if layout is None or node_id not in layout.endpoints:
            raise ValueError(f"{self.cluster_dir} has no cluster layout for node {node_id} (start the cluster with serve --processes N)")
        self.layout = layout
        self.placement = Placement(node_id, layout.processes)
        self.sockets = parse_listen_fds(listen_fds)
        self.topics: ClusterTopics | None = None
        self.admin: ClusterAdmin  # with the topics, by ``attach``
        # Inter-node requests (WriteTxnMarkers, KIP-890 verification) to the other nodes.
        self.peers = Peers(node_id, {k: ep for k, ep in layout.internal.items() if k != node_id})
        self.markers = TxnMarkerSender(self)

    def attach(self, log_manager: LogManager) -> ClusterTopics:
        """Make ``log_manager`` a node's: logs only for the partitions it leads, topic changes
        through the cluster's topic log."""
        self.topics = ClusterTopics(self.cluster_dir, log_manager)
        self.admin = ClusterAdmin(self.topics)
        log_manager.is_local = self.placement.is_local
        log_manager.journal = self.topics
        return self.topics

    @property
    def controller_id(self) -> int:
        """The node Metadata names as the controller (node 1; the topic log has no single writer)."""
        return 1

    def brokers(self, listener: str | None) -> list[dict[str, object]]:
        """Every node as Metadata lists it, with the endpoint of the client's listener."""
        out = []
        for k in self.layout.node_ids:
            host, port = self.layout.endpoint(k, listener or "")
            out.append({"node_id": k, "host": host, "port": port, "rack": None})
        return out

    async def close(self) -> None:
        """Stop sending markers and close the connections to the other nodes (the broker is stopping)."""
        await self.markers.close()
        self.peers.close()

    def node_endpoint(self, node_id: int, listener: str | None) -> dict[str, object]:
        """``{node_id, host, port}`` of a node as a client of ``listener`` reaches it (FindCoordinator)."""
        host, port = self.layout.endpoint(node_id, listener or "")
        return {"node_id": node_id, "host": host, "port": port}

    def sockets_for(self, listener: str) -> list[socket.socket] | None:
        return self.sockets.get(listener)


def parse_listen_fds(spec: str) -> dict[str, list[socket.socket]]:
    """``NAME=fd,fd;NAME=fd``: the listening sockets inherited from the supervisor, by listener."""
    out: dict[str, list[socket.socket]] = {}
    for item in filter(None, spec.split(";")):
        name, _, fds = item.partition("=")
        socks = []
        for fd in filter(None, fds.split(",")):
            s = socket.socket(fileno=int(fd))
            s.setblocking(False)
            socks.append(s)
        out[name] = socks
    return out


def die_with_supervisor(parent: int | None) -> None:
    """Ask the kernel to SIGTERM this node when the supervisor ``parent`` goes (Linux), so a
    killed supervisor leaves no node behind; stop now if it is already gone."""
    if not parent or not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGTERM)
