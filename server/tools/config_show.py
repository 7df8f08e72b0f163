"""``kafka-sidecar config --show``: the effective broker config and where each value came from.

Takes the same ``--config``, ``--override``, ``--listen`` and ``--data-dir`` as ``serve`` and
reads the same ``KAFKA_*`` environment variables, so it shows exactly what ``serve`` would use::

    $ KAFKA_LOG_SEGMENT_BYTES=1048576 kafka-sidecar config --show --config server.properties
    NAME                          VALUE                      SOURCE
    auto.create.topics.enable     false                      server.properties
    log.segment.bytes             1048576                    env KAFKA_LOG_SEGMENT_BYTES
    num.partitions                3                          --override
    ...

Sources: ``default`` (Kafka's), the properties file, ``env KAFKA_...``, ``--override``,
``--listen``/``--data-dir``. ``--only-set`` hides defaults; ``--json`` prints a JSON list.
Unknown names are warned about once on stderr (as ``serve`` does) and listed in a closing
``# ignored`` line, not in the table.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

from kafka_sidecar.storage.log_config import format_config_value

from ..config import BrokerConfig, definition


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--only-set", action="store_true", help="only values that do not come from Kafka's defaults")
    p.add_argument("--json", action="store_true", help="print a JSON list of {name, value, source}")


def _type_of(name: str) -> str:
    cdef = definition(name)  # listener-prefixed keys too (listener.name.<l>.ssl.key.password is hidden)
    return cdef.type if cdef else "string"


def display_value(name: str, value: Any) -> str | None:
    if value is None:
        return None
    cdef = definition(name)
    if cdef is not None and cdef.sensitive:
        return "[hidden]"
    return format_config_value(_type_of(name), value)


def rows(config: BrokerConfig, only_set: bool = False) -> list[tuple[str, str | None, str]]:
    out = []
    for name, value, source in config.effective():
        if only_set and source == "default":
            continue
        out.append((name, display_value(name, value), source))
    return out


def show(config: BrokerConfig, args: argparse.Namespace, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    table = rows(config, getattr(args, "only_set", False))
    if getattr(args, "json", False):
        out.write(json.dumps([{"name": n, "value": v, "source": s} for n, v, s in table], indent=1) + "\n")
        return 0
    width_name = max([len("NAME"), *(len(n) for n, _, _ in table)])
    width_value = min(60, max([len("VALUE"), *(len(v or "null") for _, v, _ in table)]))
    out.write(f"{'NAME':<{width_name}}  {'VALUE':<{width_value}}  SOURCE\n")
    for name, value, source in table:
        out.write(f"{name:<{width_name}}  {value if value is not None else 'null':<{width_value}}  {source}\n")
    if config.unknown:
        out.write(f"# ignored (unknown to kafka-sidecar): {', '.join(config.unknown)}\n")
    return 0
