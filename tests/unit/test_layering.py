"""The layering the README promises, checked on the source: protocol/ does no I/O and imports
neither storage/ nor server/; storage/ does not use asyncio; client/ and spark/ import nothing from
server/ and client/ does no asyncio; server/ has no import cycle, counting imports inside functions
(only ``if TYPE_CHECKING:`` imports are left out); the API handlers (server/apis/) see the broker
only through BrokerServices and a RequestContext, never the Broker or the Connection; and Kafka's
API names agree with the dispatch table."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from tests.support import REPO


def _imports(path: Path, package: str, *, type_only: bool = False) -> set[str]:
    """Every module ``path`` imports at run time (absolute names); with ``type_only`` also
    those under ``if TYPE_CHECKING:``."""
    tree = ast.parse(path.read_text())
    skipped = set() if type_only else {
        id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for n in ast.walk(node)}
    is_pkg = path.name == "__init__.py"
    here = package.split(".") if is_pkg else package.split(".")[:-1]
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = here[: len(here) - node.level + 1] if node.level else []
            name = ".".join([*base, node.module] if node.module else base)
            out |= {name} | {f"{name}.{a.name}" for a in node.names}
    return out


def _modules(root: str, package: str) -> dict[str, Path]:
    mods = {}
    for f in (REPO / root).rglob("*.py"):
        parts = list(f.relative_to(REPO / root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join([package, *parts])] = f
    return mods


def test_protocol_and_storage_layers() -> None:
    for name, path in _modules("protocol", "kafka_sidecar.protocol").items():
        bad = {i for i in _imports(path, name) if i.split(".")[0] in ("socket", "asyncio", "selectors")
               or i.startswith(("kafka_sidecar.server", "kafka_sidecar.storage"))}
        assert not bad, f"{path} imports {sorted(bad)}"
    for name, path in _modules("storage", "kafka_sidecar.storage").items():
        bad = {i for i in _imports(path, name) if i.split(".")[0] == "asyncio" or i.startswith("kafka_sidecar.server")}
        assert not bad, f"{path} imports {sorted(bad)}"


def test_client_and_spark_import_nothing_from_server() -> None:
    mods = {**_modules("client", "kafka_sidecar.client"), **_modules("spark", "kafka_sidecar.spark")}
    assert "kafka_sidecar.client.blocking" in mods and "kafka_sidecar.spark._wire" in mods
    for name, path in mods.items():
        imports = _imports(path, name)
        bad = {i for i in imports if i.startswith("kafka_sidecar.server") or i == "kafka_sidecar.testing"
               or i.startswith("kafka_sidecar.testing.")}
        if name.startswith("kafka_sidecar.client"):
            bad |= {i for i in imports if i.split(".")[0] == "asyncio" or i.startswith("kafka_sidecar.spark")}
        assert not bad, f"{path} imports {sorted(bad)}"


def test_the_client_loads_without_the_server() -> None:
    """What the static check promises, at run time: a fresh interpreter that imports the client
    (and spark/'s wire requests) and builds a ClientSecurity has loaded nothing of server/. (Not
    asyncio: kio, under protocol/, loads it.)"""
    code = ("import sys; import kafka_sidecar.client, kafka_sidecar.spark._wire; "
            "s = kafka_sidecar.client.client_security({'security.protocol': 'SASL_PLAINTEXT', 'sasl.mechanism': 'PLAIN', "
            "'sasl.jaas.config': 'org.apache.kafka.common.security.plain.PlainLoginModule required username=\"u\" password=\"p\";'}); "
            "print(s.username, s.password, sorted(m for m in sys.modules if m.startswith('kafka_sidecar.server')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "u p []\n"


def test_server_has_no_import_cycle() -> None:
    mods = _modules("server", "kafka_sidecar.server")
    graph = {m: {i for i in _imports(p, m) if i in mods and i != m} for m, p in mods.items()}
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                cycle = path[path.index(n):] + [n]
                raise AssertionError("import cycle: " + " -> ".join(x.removeprefix("kafka_sidecar.server.") for x in cycle))
            if n not in state:
                visit(n, [*path, n])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])


def test_api_handlers_import_neither_broker_nor_connection() -> None:
    """Handlers get (BrokerServices, RequestContext, request) and return their answer (with a
    throttle, if any): no module of server/apis/ imports server.broker, server.connection or
    server.dispatch, not even for type hints."""
    mods = _modules("server", "kafka_sidecar.server")
    apis = {m: p for m, p in mods.items() if m.startswith("kafka_sidecar.server.apis")}
    assert "kafka_sidecar.server.apis.produce" in apis
    banned = ("kafka_sidecar.server.broker", "kafka_sidecar.server.connection", "kafka_sidecar.server.dispatch")
    for name, path in apis.items():
        bad = {i for i in _imports(path, name, type_only=True) if i in banned or i.startswith(tuple(b + "." for b in banned))}
        assert not bad, f"{path} imports {sorted(bad)}"


def test_api_names_agree_with_the_dispatch_table() -> None:
    from kafka_sidecar.protocol.api_keys import API_NAMES
    from kafka_sidecar.server.dispatch import SUPPORTED_APIS

    assert {k: s.name for k, s in SUPPORTED_APIS.items()} == {k: API_NAMES[k] for k in SUPPORTED_APIS}


MAX_CLASS_LINES = 500


def test_no_class_over_500_lines() -> None:
    """The README's rule for the next engineer: no class in protocol/, storage/, server/,
    client/ or spark/ over 500 lines (Kafka's split of Log and the group coordinator is the model)."""
    big = []
    for root in ("protocol", "storage", "server", "client", "spark"):
        for path in sorted((REPO / root).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ClassDef) and node.end_lineno - node.lineno + 1 > MAX_CLASS_LINES:
                    big.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)")
    assert not big, "classes over 500 lines: " + ", ".join(big)


def _source_files() -> list[Path]:
    return [p for root in ("protocol", "storage", "server", "client", "spark") for p in sorted((REPO / root).rglob("*.py"))]


def _assigned_names(path: Path) -> set[str]:
    """Names bound at module level by an assignment (not by an import)."""
    out: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        out |= {t.id for t in targets if isinstance(t, ast.Name)}
    return out


def test_one_definition_of_the_shared_names() -> None:
    """Kafka's Topic.isInternal set, the internal topics' names and the coordinators' now_ms are
    defined once (protocol/topic.py, server/coordinator/clock.py); everything else imports them."""
    where: dict[str, list[str]] = {}
    for path in _source_files():
        names = _assigned_names(path)
        names |= {n.name for n in ast.parse(path.read_text()).body if isinstance(n, ast.FunctionDef) and n.name == "now_ms"}
        for name in names & {"INTERNAL_TOPICS", "OFFSETS_TOPIC", "TRANSACTION_STATE_TOPIC", "SHARE_GROUP_STATE_TOPIC", "now_ms"}:
            where.setdefault(name, []).append(str(path.relative_to(REPO)))
    assert where == {
        "INTERNAL_TOPICS": ["protocol/topic.py"], "OFFSETS_TOPIC": ["protocol/topic.py"],
        "TRANSACTION_STATE_TOPIC": ["protocol/topic.py"], "SHARE_GROUP_STATE_TOPIC": ["protocol/topic.py"],
        "now_ms": ["server/coordinator/clock.py"],
    }
    from kafka_sidecar.protocol.topic import INTERNAL_TOPICS

    assert INTERNAL_TOPICS == {"__consumer_offsets", "__transaction_state", "__share_group_state"}


def test_the_log_manager_holds_logs_only() -> None:
    """The topics file, producer ids and dynamic broker configs live in their own modules
    (topic_registry.py, producer_id_manager.py, dynamic_broker_config.py): log_manager.py
    neither names their files nor reads or writes them."""
    path = REPO / "storage" / "log_manager.py"
    tree = ast.parse(path.read_text())
    docstrings = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
    # The code's names and strings (docstrings and comments may point to the other modules).
    words = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    words |= {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
    words |= {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.ClassDef)}
    strings = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings]
    for name in ("TOPICS_FILE", "read_topics_file", "write_topics_file", "allocate_producer_id", "PRODUCER_ID_FILE",
                 "BROKER_CONFIGS_FILE", "dynamic_log_defaults", "DynamicBrokerConfig", "ProducerIdManager"):
        assert name not in words, f"storage/log_manager.py uses {name}"
    for needle in ("sidecar-topics", "sidecar-producer-id", "sidecar-broker-configs"):
        assert not [s for s in strings if needle in s], f"storage/log_manager.py names {needle}"
    imports = _imports(path, "kafka_sidecar.storage.log_manager")
    assert not {i for i in imports if i.endswith((".producer_id_manager", ".dynamic_broker_config"))}
