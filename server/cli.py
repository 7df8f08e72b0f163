"""``kafka-sidecar`` command line: ``serve``, ``config --show`` and the tools.

Subcommands: ``serve`` (the broker), ``config --show`` (effective config and where each value
came from), ``produce``, ``consume``, ``topics``, ``groups``, ``delete-records`` (over the wire,
so they work against any Kafka broker) and ``dump-log`` (offline, Kafka's segment/index/snapshot
files). ``COMMANDS`` holds each one's summary and example.

Errors the user can fix (bad flags, bad config values, an unusable data dir or listener)
print one line and exit with status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
import time
from pathlib import Path

from kafka_sidecar.storage.log_config import ConfigError
from kafka_sidecar.storage.log_manager import DataDirError

from .config import BrokerConfig, load_config
from .listeners import (
    ListenerError,
    ListenerSettings,
    advertised_host_for,
    bracket,
    resolve_listeners,
)
from .logging_setup import LOG_FORMATS, setup_logging
from .preflight import data_dir_problem, listener_problem

log = logging.getLogger("kafka_sidecar")

_PROCESS_START = time.monotonic()


class _ArgumentParser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2
        sys.stderr.write(f"kafka-sidecar: error: {message}\n")
        sys.exit(2)


def version() -> str:
    """The installed distribution's version (the source tree's when run uninstalled)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("kafka-sidecar")
    except PackageNotFoundError:
        return "0+unknown"


# One line each (the command list) and an example (each command's --help).
COMMANDS: dict[str, tuple[str, str]] = {
    "serve": ("run the broker",
              "kafka-sidecar serve --data-dir ./data --listen 127.0.0.1:9092 --override num.partitions=3"),
    "produce": ("send records from stdin or arguments to a topic (like kcat -P)",
                "printf 'k1:hello\\nk2:world\\n' | kafka-sidecar produce -b 127.0.0.1:9092 -t events -K :"),
    "consume": ("print records of a topic (like kcat -C)",
                "kafka-sidecar consume -b 127.0.0.1:9092 -t events --from-beginning -c 10 --json"),
    "config": ("print the effective broker config and where each value came from",
               "kafka-sidecar config --show --override log.retention.hours=1 --only-set"),
    "topics": ("list, describe, create, delete topics and alter their configs (as kafka-topics.sh)",
               "kafka-sidecar topics --bootstrap-server 127.0.0.1:9092 --create --topic events --partitions 3"),
    "groups": ("list and describe consumer (classic, KIP-848) and share groups, reset offsets (as kafka-consumer-groups.sh, kafka-share-groups.sh)",
               "kafka-sidecar groups --bootstrap-server 127.0.0.1:9092 --describe --group billing"),
    "delete-records": ("delete records below offsets (as kafka-delete-records.sh)",
                       "kafka-sidecar delete-records --bootstrap-server 127.0.0.1:9092 --offset-json-file offsets.json"),
    "doctor": ("check a data dir, config and listeners before serving: one ok/problem line each",
               "kafka-sidecar doctor --data-dir ./data --listen localhost:9092 --config server.properties"),
    "dump-log": ("decode log segments, indexes and snapshots offline (as kafka-dump-log.sh), --verify them",
                 "kafka-sidecar dump-log --deep-iteration --print-data-log --files data/events-0/00000000000000000000.log"),
}


def _command(sub: argparse._SubParsersAction, name: str) -> argparse.ArgumentParser:
    summary, example = COMMANDS[name]
    return sub.add_parser(name, help=summary, description=summary[0].upper() + summary[1:] + ".",
                          epilog=f"example:\n  {example}", formatter_class=argparse.RawDescriptionHelpFormatter)


def parse_listen(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {value!r}")
    host = host.strip("[]") or "127.0.0.1"
    return host, int(port)


def parse_port(value: str) -> int:
    if not value.isdigit() or not 0 <= int(value) <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port 0..65535, got {value!r}")
    return int(value)


def parse_processes(value: str) -> int:
    if not value.isdigit() or not 1 <= int(value) <= 64:
        raise argparse.ArgumentTypeError(f"expected a number of processes 1..64, got {value!r}")
    return int(value)


def _add_config_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data-dir", type=Path, default=None, help="log directory (default: log.dirs/log.dir from the config, else ./data)")
    p.add_argument("--listen", type=parse_listen, default=None, metavar="HOST:PORT",
                   help="shortcut for listeners=PLAINTEXT://HOST:PORT (port 0 picks a free port); default: the listeners config (PLAINTEXT://localhost:9092)")
    p.add_argument("--config", type=Path, default=None, help="a Kafka server.properties file")
    p.add_argument("--override", action="append", default=[], metavar="KEY=VALUE", help="set a Kafka config, e.g. log.segment.bytes=1048576 (repeatable)")


def build_parser() -> argparse.ArgumentParser:
    from .tools import config_show, console, dump_log, groups, topics

    parser = _ArgumentParser(
        prog="kafka-sidecar", description="A Kafka-protocol-compatible storage sidecar.",
        epilog="Run 'kafka-sidecar COMMAND --help' for a command's options and an example.",
    )
    parser.add_argument("--version", action="version", version=f"kafka-sidecar {version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_ArgumentParser)
    serve = _command(sub, "serve")
    _add_config_args(serve)
    serve.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    serve.add_argument("--log-format", default="plain", choices=LOG_FORMATS, help="plain lines (default) or JSON lines")
    serve.add_argument("--metrics-port", type=parse_port, default=None, metavar="PORT",
                       help="serve Prometheus /metrics, /healthz and /readyz on this port (0 picks a free one; printed)")
    serve.add_argument("--metrics-host", default="127.0.0.1", metavar="HOST", help="address of the metrics endpoint (default 127.0.0.1)")
    serve.add_argument("--console-port", type=parse_port, default=None, metavar="PORT",
                       help="serve the web console on this port (0 picks a free one; the URL is on the ready line); off by default")
    serve.add_argument("--console-host", default="127.0.0.1", metavar="HOST", help="address of the web console (default 127.0.0.1)")
    serve.add_argument("--console-allow-writes", action="store_true",
                       help="let the console produce records and delete records (as the logged-in principal, within its ACLs)")
    serve.add_argument("--processes", type=parse_processes, default=1, metavar="N",
                       help="run N broker processes as one cluster (node ids 1..N, node k on the listener's port + k - 1, "
                            "data in DATA_DIR/node-<k>; default 1: one process)")
    # Set by the --processes supervisor for its nodes, not by users.
    serve.add_argument("--cluster-node", type=int, default=None, help=argparse.SUPPRESS)
    serve.add_argument("--listen-fds", default="", help=argparse.SUPPRESS)
    serve.add_argument("--supervisor-pid", type=int, default=None, help=argparse.SUPPRESS)

    console.add_produce_arguments(_command(sub, "produce"))
    console.add_consume_arguments(_command(sub, "consume"))

    cfg = _command(sub, "config")
    cfg.add_argument("--show", action="store_true", required=True, help="print the effective config")
    _add_config_args(cfg)
    config_show.add_arguments(cfg)

    dr = _command(sub, "delete-records")
    dr.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    dr.add_argument("--offset-json-file", required=True, type=Path, metavar="FILE",
                    help='{"partitions":[{"topic":"test","partition":0,"offset":40000}],"version":1}')
    dr.add_argument("--command-config", type=Path, default=None, metavar="FILE",
                    help="client properties (security.protocol, ssl.*, sasl.*), as Kafka's tools take them")

    _add_config_args(_command(sub, "doctor"))
    topics.add_arguments(_command(sub, "topics"))
    groups.add_arguments(_command(sub, "groups"))
    dump_log.add_arguments(_command(sub, "dump-log"))
    return parser


# ---- effective settings --------------------------------------------------------------------


def apply_cli_settings(config: BrokerConfig, args: argparse.Namespace) -> tuple[Path, ListenerSettings]:
    """The data dir and listeners in effect: flags first, then the config (recorded in its sources)."""
    if args.data_dir is not None:
        data_dir = Path(args.data_dir)
        config.values["log.dirs"], config.sources["log.dirs"] = str(data_dir), "--data-dir"
    elif config.is_set("log.dirs") and config.get("log.dirs"):
        dirs = [d.strip() for d in str(config.get("log.dirs")).split(",") if d.strip()]
        if len(dirs) > 1:
            raise ConfigError(f"log.dirs lists {len(dirs)} directories; kafka-sidecar serves one (from {config.sources['log.dirs']})")
        data_dir = Path(dirs[0])
    elif config.is_set("log.dir"):
        data_dir = Path(str(config.get("log.dir")))
    else:
        data_dir = Path("data")
        config.values["log.dirs"], config.sources["log.dirs"] = "data", "kafka-sidecar default"
    if args.listen is not None:
        host, port = args.listen
        config.values["listeners"], config.sources["listeners"] = f"PLAINTEXT://{bracket(host)}:{port}", "--listen"
    settings = resolve_listeners(
        str(config.get("listeners")), config.get("advertised.listeners"), config.get("listener.security.protocol.map"),
        source=config.sources.get("listeners", "default"),
    )
    return data_dir, settings


def _ready_line(broker, data_dir: Path, console=None) -> str:
    """``kafka-sidecar listening on HOST:PORT (...)``: where each listener accepts (a wildcard
    shown as loopback); with several listeners each is followed by ``[NAME]``."""
    elapsed = (time.monotonic() - _PROCESS_START) * 1000
    parts = []
    for ep in broker.listeners:
        where = f"{bracket(advertised_host_for(ep.host))}:{broker.bound_ports.get(ep.name, ep.port)}"
        parts.append(where if len(broker.listeners) == 1 else f"{where} [{ep.name}]")
    line = f"kafka-sidecar listening on {', '.join(parts)} (data dir {data_dir}, cluster id {broker.cluster_id}, ready in {elapsed:.0f} ms)"
    return f"{line}; console on {console.url}" if console is not None else line


async def _serve(args: argparse.Namespace) -> int:
    from .broker import Broker
    from .metrics import MetricsServer

    config = load_config(args.config, args.override)
    data_dir, listeners = apply_cli_settings(config, args)
    # Before anything is created: a taken port or an unusable data dir is one line, and leaves
    # no half-initialised data dir behind.
    cluster = None
    if args.cluster_node is not None:  # a node of `serve --processes N`: its ports are the supervisor's
        from .cluster.node import ClusterNode, die_with_supervisor

        die_with_supervisor(args.supervisor_pid)
        try:
            cluster = ClusterNode(args.cluster_node, data_dir, args.listen_fds)
        except ValueError as e:
            sys.stderr.write(f"kafka-sidecar: error: {e}\n")
            return 2
    problem = data_dir_problem(data_dir) or (None if cluster else next(filter(None, map(listener_problem, listeners.listeners)), None))
    if cluster is None and (data_dir / "cluster.json").exists():  # its node-<k> dirs are no partitions
        problem = f"data dir {data_dir} holds a cluster of several processes (cluster.json): serve it with --processes N"
    if problem:
        sys.stderr.write(f"kafka-sidecar: error: {problem}\n")
        return 2
    broker = Broker(config, data_dir, listeners=listeners.listeners, advertised=listeners.advertised, cluster=cluster)
    metrics_server = None
    if args.metrics_port is not None:
        # Up before the logs load, so /readyz can say "not ready" during a long recovery.
        metrics_server = MetricsServer(broker, args.metrics_host, args.metrics_port)
        try:
            await metrics_server.start()
        except OSError as e:
            sys.stderr.write(f"kafka-sidecar: error: cannot serve metrics on {bracket(args.metrics_host)}:{args.metrics_port}: {e.strerror or e}\n")
            return 2
        print(f"kafka-sidecar metrics on http://{bracket(args.metrics_host)}:{metrics_server.port}/metrics", flush=True)
    console = None
    if args.console_port is not None:
        # Loaded only when asked for (with the console off nothing of it is imported), and up
        # before the logs load: a taken port or a broker it cannot log users in to stops the start
        # here; meanwhile its pages say the broker is starting.
        from .console.server import ConsoleError, ConsoleServer

        console = ConsoleServer(broker, args.console_host, args.console_port, allow_writes=args.console_allow_writes)
        try:
            await console.start()
        except ConsoleError as e:
            sys.stderr.write(f"kafka-sidecar: error: --console-port: {e}\n")
            if metrics_server is not None:
                await metrics_server.stop()
            return 2
    try:
        try:
            await broker.start()
        except DataDirError as e:
            sys.stderr.write(f"kafka-sidecar: error: {e}\n")
            return 2
        except OSError as e:
            message = str(e) if isinstance(e, ListenerError) else f"cannot listen: {e.strerror or e}"
            sys.stderr.write(f"kafka-sidecar: error: {message}\n")
            await broker.stop()
            return 2
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        print(_ready_line(broker, data_dir, console), flush=True)
        await stop.wait()
        log.info("shutting down")
        await broker.stop()
        log.info("stopped cleanly")
        return 0
    finally:
        if console is not None:
            await console.stop()
        if metrics_server is not None:
            await metrics_server.stop()


def _serve_cluster(args: argparse.Namespace) -> int:
    """``serve --processes N``: the supervisor of N node processes (server/cluster/supervisor.py)."""
    from .cluster.supervisor import serve_cluster

    config = load_config(args.config, args.override)
    data_dir, listeners = apply_cli_settings(config, args)
    problem = data_dir_problem(data_dir)
    if problem:
        sys.stderr.write(f"kafka-sidecar: error: {problem}\n")
        return 2
    return serve_cluster(args, data_dir, listeners)


def _delete_records(args: argparse.Namespace) -> int:
    from kafka_sidecar.client import KafkaClientError

    from .tools.command_config import command_config
    from .tools.delete_records import OffsetFileError, delete_records, read_offset_json

    try:
        entries = read_offset_json(args.offset_json_file)
    except OffsetFileError as e:
        sys.stderr.write(f"kafka-sidecar: error: {e}\n")
        return 2
    try:
        return delete_records(args.bootstrap_server, entries, command_config=command_config(args))
    except (OSError, KafkaClientError) as e:
        sys.stderr.write(f"kafka-sidecar: error: cannot talk to {args.bootstrap_server}: {e}\n")
        return 1


def _check_bootstrap(value: str) -> None:
    from kafka_sidecar.client import parse_bootstrap

    try:
        parse_bootstrap(value)
    except ValueError:
        raise ConfigError(f"--bootstrap-server expects HOST:PORT[,HOST:PORT...], got {value!r}") from None


def main(argv: list[str] | None = None) -> int:
    if (sys.argv[1:] if argv is None else argv)[:1] == ["serve"]:
        # kio registers hypothesis strategies whenever hypothesis is importable (a dev
        # dependency): ~100 modules and ~0.15 s of start-up the broker never uses. Before the
        # parser: the tools it names import kio. (No effect where hypothesis is loaded already.)
        sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:  # bare `kafka-sidecar`: what it can do
        parser.print_help()
        return 0
    setup_logging(getattr(args, "log_level", "WARNING"), getattr(args, "log_format", "plain"))
    try:
        if getattr(args, "bootstrap_server", None) is not None:
            _check_bootstrap(args.bootstrap_server)
        if args.command == "serve":
            if args.processes > 1 and args.cluster_node is None:
                return _serve_cluster(args)
            from .malloc_tuning import tune_malloc

            tune_malloc()  # large request buffers reused, not faulted in again per request
            return asyncio.run(_serve(args))
        if args.command == "config":
            from .tools import config_show

            config = load_config(args.config, args.override)
            apply_cli_settings(config, args)
            return config_show.show(config, args)
        if args.command == "delete-records":
            return _delete_records(args)
        if args.command == "doctor":
            from .tools import doctor

            return doctor.run(args, apply_cli_settings, sys.stdout)
        if args.command in ("produce", "consume"):
            from kafka_sidecar.client import KafkaClientError

            from .tools import console

            try:
                return console.produce(args) if args.command == "produce" else console.consume(args)
            except (OSError, KafkaClientError) as e:
                sys.stderr.write(f"kafka-sidecar: error: cannot talk to {args.bootstrap_server}: {e}\n")
                return 1
        if args.command in ("topics", "groups"):
            from kafka_sidecar.client import KafkaClientError

            from .tools import groups, topics

            tool = topics if args.command == "topics" else groups
            try:
                return tool.main(args)
            except (OSError, KafkaClientError) as e:
                sys.stderr.write(f"kafka-sidecar: error: cannot talk to {args.bootstrap_server}: {e}\n")
                return 1
        if args.command == "dump-log":
            from .tools import dump_log

            return dump_log.main(args)
    except ConfigError as e:
        sys.stderr.write(f"kafka-sidecar: error: {e}\n")
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # e.g. `kafka-sidecar dump-log ... | head`
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
