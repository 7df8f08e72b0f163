"""``kafka-sidecar doctor``: what would stop ``serve`` (same flags), one line per check.

It reads the same ``--config`` / ``KAFKA_*`` / ``--override`` layers as ``serve``, then looks at
the data dir and each listener without creating or changing anything (``server/preflight.py``),
so it is safe to run beside a running server. Lines start ``ok:`` or ``problem:``; the exit
status is 1 when any check found a problem.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import TextIO

from kafka_sidecar.storage.log_config import ConfigError
from kafka_sidecar.storage.log_manager import CLEAN_SHUTDOWN_FILE, scan_partition_dirs

from ..config import BrokerConfig, did_you_mean, load_config
from ..listeners import ListenerError
from ..preflight import data_dir_problem, listener_problem


def _config_lines(args: argparse.Namespace) -> tuple[list[tuple[bool, str]], BrokerConfig | None]:
    where = f"config file {args.config}" if args.config else "config"
    quiet = logging.getLogger("kafka_sidecar.server.config")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # unknown keys are reported below, once, as doctor lines
    try:
        config = load_config(args.config, args.override)
    except ConfigError as e:
        return [(False, f"{where}: {e}")], None
    finally:
        quiet.setLevel(level)
    lines: list[tuple[bool, str]] = []
    for name in config.unknown:
        near = did_you_mean(name)
        hint = f"; did you mean {near}?" if near else ""
        lines.append((False, f"{where}: unknown config {name}, ignored{hint}"))
    if not lines:
        lines.append((True, f"{where}: every value valid, every name known"))
    return lines, config


def _data_dir_line(data_dir: Path) -> tuple[bool, str]:
    problem = data_dir_problem(data_dir)
    if problem:
        return False, problem
    if not data_dir.exists():
        return True, f"data dir {data_dir}: does not exist yet, will be created"
    partitions = len(scan_partition_dirs(data_dir))
    if not (data_dir / "meta.properties").exists():
        state = "empty, will be initialised" if partitions == 0 else "no meta.properties (a new cluster id will be written)"
    elif (data_dir / CLEAN_SHUTDOWN_FILE).exists():
        state = "last stop was clean"
    else:
        state = "last stop was not clean (or the server runs): logs are recovered at start"
    return True, f"data dir {data_dir}: writable, {partitions} partition(s), {state}"


def run(args: argparse.Namespace, apply_cli_settings, out: TextIO) -> int:
    """Print one ``ok:``/``problem:`` line per check; 1 if any problem."""
    checks, config = _config_lines(args)
    if config is not None:
        try:
            data_dir, listeners = apply_cli_settings(config, args)
        except (ConfigError, ListenerError) as e:
            checks.append((False, f"listeners: {e}"))
        else:
            checks.append(_data_dir_line(data_dir))
            for ep in listeners.listeners:
                problem = listener_problem(ep)
                free = "a free port is picked at start" if ep.port == 0 else "the port is free"
                checks.append((problem is None, problem or f"listener {ep.uri()}: {free}"))
    for ok, line in checks:
        out.write(f"{'ok' if ok else 'problem'}: {line}\n")
    return 0 if all(ok for ok, _ in checks) else 1
