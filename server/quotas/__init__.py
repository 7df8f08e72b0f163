"""Client quotas (KIP-13, KIP-55, KIP-124, KIP-219, KIP-546): stored values, sampled rates, throttles.

``store.py`` keeps and validates the values (AlterClientQuotas, DescribeClientQuotas),
``manager.py`` resolves a request's quota and computes throttle times, ``sensor.py`` is Kafka's
sampled rate, ``connections.py`` the limits checked when a connection is accepted (per-IP
counts, per-IP and broker-wide creation rates). Handlers: server/apis/quotas.py; hooks in Produce and Fetch; the connection is
muted for the throttle time after the answer (server/connection.py).
"""

from __future__ import annotations

from pathlib import Path

from .manager import ClientQuotas
from .store import ClientQuotaStore

__all__ = ["ClientQuotas", "ClientQuotaStore", "load_client_quotas"]


def load_client_quotas(data_dir: Path, samples: int | None = None, window_s: int | None = None) -> ClientQuotas:
    """The quotas stored in ``data_dir`` (OSError naming the file if it is damaged)."""
    return ClientQuotas(ClientQuotaStore.load(data_dir), samples, window_s)
