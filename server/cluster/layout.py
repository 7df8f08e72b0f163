"""The cluster's layout: its nodes, their data dirs and endpoints, kept in ``<data-dir>/cluster.json``.

``serve --processes N`` runs nodes 1..N. Node ``k`` keeps its partitions in
``<data-dir>/node-<k>`` (a whole Kafka data dir of its own: ``meta.properties`` with
``node.id=k`` and the cluster's one id). Ports: a listener configured on port ``P`` (``--listen``
or ``listeners``) is node 1's; node ``k`` listens on ``P + k - 1`` (port 0: the kernel picks one
per node). An advertised listener on port ``A`` advertises ``A + k - 1`` for node ``k``, same host
(publish the whole range from a container). The supervisor binds every port before any node
starts and writes the endpoints here; each node reads them to answer Metadata with all N brokers.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from kafka_sidecar.storage import checkpoint

CLUSTER_FILE = "cluster.json"


def node_dir(data_dir: Path, node_id: int) -> Path:
    """Node ``node_id``'s own data dir inside the cluster's."""
    return Path(data_dir) / f"node-{node_id}"


def node_port(port: int, node_id: int) -> int:
    """Node ``node_id``'s port for a listener configured on ``port`` (0 stays 0: kernel's choice)."""
    return port + node_id - 1 if port else 0


@dataclass
class ClusterLayout:
    """What every node agrees on: the cluster id, the number of nodes and where each is reached."""

    cluster_id: str
    processes: int
    # node id -> listener name -> (advertised host, port): what Metadata answers for that node
    endpoints: dict[int, dict[str, tuple[str, int]]] = field(default_factory=dict)
    # node id -> (bound host, port) of its first PLAINTEXT listener: where the other nodes send
    # inter-node requests (server/cluster/peers.py); absent when it has none
    internal: dict[int, tuple[str, int]] = field(default_factory=dict)

    @property
    def node_ids(self) -> list[int]:
        return list(range(1, self.processes + 1))

    def endpoint(self, node_id: int, listener: str) -> tuple[str, int]:
        eps = self.endpoints[node_id]
        return eps.get(listener) or next(iter(eps.values()))

    def save(self, data_dir: Path) -> None:
        body = {
            "cluster_id": self.cluster_id,
            "processes": self.processes,
            "nodes": {str(k): {name: [h, p] for name, (h, p) in eps.items()} for k, eps in self.endpoints.items()},
            "internal": {str(k): [h, p] for k, (h, p) in self.internal.items()},
        }
        checkpoint.atomic_write(Path(data_dir) / CLUSTER_FILE, (json.dumps(body, indent=1) + "\n").encode())

    @classmethod
    def load(cls, data_dir: Path) -> ClusterLayout | None:
        """The saved layout, or None when there is none yet (a ValueError if it is damaged)."""
        path = Path(data_dir) / CLUSTER_FILE
        try:
            body = json.loads(path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, json.JSONDecodeError) as e:
            raise ValueError(f"cannot read {path}: {e}") from None
        endpoints = {int(k): {name: (str(h), int(p)) for name, (h, p) in eps.items()} for k, eps in body.get("nodes", {}).items()}
        internal = {int(k): (str(h), int(p)) for k, (h, p) in body.get("internal", {}).items()}
        return cls(str(body["cluster_id"]), int(body["processes"]), endpoints, internal)


def lock_cluster_dir(data_dir: Path) -> int:
    """Create and lock ``<data-dir>/.lock`` for the supervisor (OSError when another one holds it)."""
    import fcntl

    Path(data_dir).mkdir(parents=True, exist_ok=True)
    fd = os.open(Path(data_dir) / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise
    return fd
