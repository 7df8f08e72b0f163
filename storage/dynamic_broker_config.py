"""DynamicBrokerConfig: broker configs changed at run time (AlterConfigs on BROKER resources).

Raw values by scope: "" the cluster-wide defaults, "<node id>" one broker's; Kafka keeps them in
its metadata log, a sidecar in ``sidecar-broker-configs.json``. The topic defaults they imply
(``log.retention.ms`` -> ``retention.ms`` ...) are handed to ``on_log_defaults`` (the
LogManager's reconfigure_default_log_config), as Kafka's DynamicBrokerConfig reconfigures the
LogManager.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import checkpoint
from .log_config import dynamic_log_defaults

log = logging.getLogger("kafka_sidecar.storage.log_manager")  # the logger operators know these lines by

BROKER_CONFIGS_FILE = "sidecar-broker-configs.json"


class DynamicBrokerConfig:
    def __init__(self, data_dir: Path, static_log_defaults: dict[str, Any] | None = None,
                 on_log_defaults: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.path = Path(data_dir) / BROKER_CONFIGS_FILE
        self.static_log_defaults = dict(static_log_defaults or {})
        self.on_log_defaults = on_log_defaults
        self.configs: dict[str, dict[str, str]] = {}
        self._lock = threading.Lock()

    def load(self) -> dict[str, Any]:
        """Read the file (an unreadable one is ignored with a warning); returns the log defaults."""
        try:
            scopes = json.loads(self.path.read_text())["scopes"]
            self.configs = {str(s): {str(k): str(v) for k, v in c.items()} for s, c in scopes.items() if c}
        except FileNotFoundError:
            pass
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            log.warning("ignoring unreadable %s: %s (dynamic broker configs fall back to static ones)", self.path, e)
        return self.log_defaults()

    def get(self, scope: str) -> dict[str, str]:
        """The dynamic broker configs of ``scope`` ("" = cluster-wide defaults, else a node id)."""
        return dict(self.configs.get(scope, {}))

    def set(self, scope: str, configs: dict[str, str]) -> None:
        """Replace the configs of ``scope``, persist them, and hand the log defaults they imply
        to ``on_log_defaults``. Blocking (a file write): on the storage thread."""
        with self._lock:
            if configs:
                self.configs[scope] = dict(configs)
            else:
                self.configs.pop(scope, None)
            data = {"version": 1, "scopes": self.configs}
            checkpoint.atomic_write(self.path, (json.dumps(data, indent=1, sort_keys=True) + "\n").encode())
            if self.on_log_defaults is not None:
                self.on_log_defaults(self.log_defaults())
            log.info("dynamic broker configs (%s) are now %s", scope or "cluster default", configs or "{}")

    def adopt(self, scope: str, configs: dict[str, str], schedule: Callable[..., None]) -> None:
        """Make ``configs`` those of ``scope`` without writing the file (``serve --processes N``:
        the cluster's metadata log keeps them); the logs' defaults are rebuilt through ``schedule``
        (the storage thread)."""
        with self._lock:
            if configs:
                self.configs[scope] = dict(configs)
            else:
                self.configs.pop(scope, None)
            defaults = self.log_defaults()
        if self.on_log_defaults is not None:
            schedule(self.on_log_defaults, defaults)
        log.info("dynamic broker configs (%s) are now %s", scope or "cluster default", configs or "{}")

    def log_defaults(self) -> dict[str, Any]:
        """The static log defaults overlaid by what the per-broker, then cluster-wide, dynamic
        configs imply."""
        per_broker = [c for s, c in sorted(self.configs.items()) if s != ""]
        layers = [*per_broker, self.configs.get("", {})]
        return {**self.static_log_defaults, **dynamic_log_defaults(layers)}
