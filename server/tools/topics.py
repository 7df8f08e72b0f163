"""``kafka-sidecar topics``: kafka-topics.sh's list/describe/create/delete, plus config changes.

Same options and output as Kafka 4's tool for what they share::

    kafka-sidecar topics --bootstrap-server HOST:PORT --list [--exclude-internal]
    kafka-sidecar topics --bootstrap-server HOST:PORT --describe [--topic REGEX] [--topics-with-overrides]
    kafka-sidecar topics --bootstrap-server HOST:PORT --create --topic T [--partitions N]
                         [--replication-factor R] [--config k=v ...] [--if-not-exists]
    kafka-sidecar topics --bootstrap-server HOST:PORT --delete --topic REGEX [--if-exists]
    kafka-sidecar topics --bootstrap-server HOST:PORT --alter --topic T --partitions N
    kafka-sidecar topics --bootstrap-server HOST:PORT --alter --topic T --config k=v --delete-config k

``--alter --config/--delete-config`` is ours (Kafka 4 moved it to kafka-configs.sh): one
IncrementalAlterConfigs request, printing ``Completed updating config for topic T.``. Errors
print Kafka's ``Error while executing topic command : ...`` line and exit 1. Everything goes over
the wire (Metadata, CreateTopics, DeleteTopics, DescribeConfigs, IncrementalAlterConfigs,
CreatePartitions), so the tool works against any Kafka broker.
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any, TextIO

from kafka_sidecar.client import KafkaClient, KafkaClientError
from kafka_sidecar.protocol.topic import INTERNAL_TOPICS
from kafka_sidecar.server.tools.command_config import command_config

from .admin import (
    CREATE_PARTITIONS,
    CREATE_TOPICS,
    DEFAULT_CONFIG_SOURCE,
    DELETE_TOPICS,
    DESCRIBE_CONFIGS,
    INCREMENTAL_ALTER_CONFIGS,
    TOPIC_RESOURCE,
    error_message,
    kafka_uuid,
    request,
)

TIMEOUT_MS = 30000


class TopicCommandError(Exception):
    pass


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--list", action="store_true", help="list all topics")
    action.add_argument("--describe", action="store_true", help="describe topics (partitions, leaders, non-default configs)")
    action.add_argument("--create", action="store_true", help="create a topic")
    action.add_argument("--delete", action="store_true", help="delete topics")
    action.add_argument("--alter", action="store_true", help="add partitions (--partitions) or change configs (--config, --delete-config)")
    p.add_argument("--topic", help="topic name (a regular expression for --describe/--delete/--alter)")
    p.add_argument("--partitions", type=int, help="partitions of a new topic, or the new total for --alter")
    p.add_argument("--replication-factor", type=int, help="replication factor of a new topic")
    p.add_argument("--config", action="append", default=[], metavar="NAME=VALUE", help="topic config (--create, --alter)")
    p.add_argument("--delete-config", action="append", default=[], metavar="NAME", help="remove a topic config override (--alter)")
    p.add_argument("--if-exists", action="store_true")
    p.add_argument("--if-not-exists", action="store_true")
    p.add_argument("--exclude-internal", action="store_true", help="leave out internal topics (__consumer_offsets...)")
    p.add_argument("--topics-with-overrides", action="store_true", help="describe only topics with config overrides")
    p.add_argument("--command-config", default=None, metavar="FILE",
                   help="client properties (security.protocol, ssl.*, sasl.*), as Kafka's tools take them")


def _parse_configs(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise TopicCommandError(f"Invalid topic config: all configs to be added must be in the format \"key=val\": {item}")
        out[name.strip()] = value.strip()
    return out


def _matching(client: KafkaClient, pattern: str | None, exclude_internal: bool) -> list[Any]:
    meta = client.metadata(None)
    topics = sorted((t for t in meta.topics if not t.error_code.value), key=lambda t: t.name)
    if exclude_internal:
        topics = [t for t in topics if not (t.is_internal or t.name in INTERNAL_TOPICS)]
    if pattern is not None:
        try:
            rx = re.compile(pattern)
        except re.error:
            rx = re.compile(re.escape(pattern))
        topics = [t for t in topics if t.name == pattern or rx.fullmatch(t.name)]
    return topics


def _ensure_found(topics: list[Any], pattern: str | None, if_exists: bool) -> None:
    if pattern is not None and not topics and not if_exists:
        raise TopicCommandError(f"Topic '{pattern}' does not exist as expected")


def _non_default_configs(client: KafkaClient, names: list[str]) -> dict[str, list[tuple[str, str | None]]]:
    if not names:
        return {}
    body = request(client.bootstrap, DESCRIBE_CONFIGS, 4, {
        "resources": [{"resource_type": TOPIC_RESOURCE, "resource_name": n, "configuration_keys": None} for n in names],
        "include_synonyms": False, "include_documentation": False,
    })
    out: dict[str, list[tuple[str, str | None]]] = {}
    for r in body.results:
        if r.error_code.value:
            continue
        out[r.resource_name] = [(c.name, None if c.is_sensitive else c.value) for c in r.configs if c.config_source != DEFAULT_CONFIG_SOURCE]
    return out


def _describe(client: KafkaClient, args: argparse.Namespace, out: TextIO) -> int:
    topics = _matching(client, args.topic, args.exclude_internal)
    _ensure_found(topics, args.topic, args.if_exists)
    configs = _non_default_configs(client, [t.name for t in topics])
    for t in topics:
        entries = configs.get(t.name, [])
        if args.topics_with_overrides and not entries:
            continue
        parts = sorted(t.partitions, key=lambda p: p.partition_index)
        rf = len(parts[0].replica_nodes) if parts else 0
        shown = ",".join(f"{n}={v}" for n, v in entries)
        out.write(f"Topic: {t.name}\tTopicId: {kafka_uuid(t.topic_id)}\tPartitionCount: {len(parts)}\t"
                  f"ReplicationFactor: {rf}\tConfigs: {shown}\n")
        if args.topics_with_overrides:
            continue
        for p in parts:
            leader = str(p.leader_id) if p.leader_id >= 0 else "none"
            line = (f"\tTopic: {t.name}\tPartition: {p.partition_index}\tLeader: {leader}\t"
                    f"Replicas: {','.join(map(str, p.replica_nodes))}\tIsr: {','.join(map(str, p.isr_nodes))}\tElr: \tLastKnownElr: ")
            if p.offline_replicas:
                line += f"\tOffline: {','.join(map(str, p.offline_replicas))}"
            out.write(line + "\n")
    return 0


def _create(client: KafkaClient, args: argparse.Namespace, out: TextIO) -> int:
    if not args.topic:
        raise TopicCommandError("--topic is required with --create")
    configs = _parse_configs(args.config)
    body = request(client.bootstrap, CREATE_TOPICS, 5, {
        "topics": [{
            "name": args.topic,
            "num_partitions": args.partitions if args.partitions is not None else -1,
            "replication_factor": args.replication_factor if args.replication_factor is not None else -1,
            "assignments": [],
            "configs": [{"name": k, "value": v} for k, v in configs.items()],
        }],
        "timeout": TIMEOUT_MS, "validate_only": False,
    })
    (result,) = body.topics
    code = result.error_code.value
    if code == 36 and args.if_not_exists:
        return 0
    if code:
        raise TopicCommandError(error_message(code, result.error_message))
    out.write(f"Created topic {args.topic}.\n")
    return 0


def _delete(client: KafkaClient, args: argparse.Namespace, out: TextIO) -> int:
    if not args.topic:
        raise TopicCommandError("--topic is required with --delete")
    topics = _matching(client, args.topic, exclude_internal=False)
    _ensure_found(topics, args.topic, args.if_exists)
    internal = [t.name for t in topics if t.is_internal or t.name in INTERNAL_TOPICS]
    if internal:
        raise TopicCommandError(f"Topic {internal[0]} is a kafka internal topic and is not allowed to be marked for deletion.")
    if not topics:
        return 0
    body = request(client.bootstrap, DELETE_TOPICS, 4, {"topic_names": [t.name for t in topics], "timeout": TIMEOUT_MS})
    for r in body.responses:
        if r.error_code.value:
            raise TopicCommandError(error_message(r.error_code.value, getattr(r, "error_message", None)))
    return 0


def _alter(client: KafkaClient, args: argparse.Namespace, out: TextIO) -> int:
    if not args.topic:
        raise TopicCommandError("--topic is required with --alter")
    if args.partitions is None and not args.config and not args.delete_config:
        raise TopicCommandError("--alter needs --partitions, --config or --delete-config")
    topics = _matching(client, args.topic, exclude_internal=False)
    _ensure_found(topics, args.topic, args.if_exists)
    if args.partitions is not None:
        try:
            body = request(client.bootstrap, CREATE_PARTITIONS, 3, {
                "topics": [{"name": t.name, "count": args.partitions, "assignments": None} for t in topics],
                "timeout": TIMEOUT_MS, "validate_only": False,
            })
        except KafkaClientError as e:
            raise TopicCommandError(f"cannot add partitions: {e}") from None
        for r in body.results:
            if r.error_code.value:
                raise TopicCommandError(error_message(r.error_code.value, r.error_message))
    if args.config or args.delete_config:
        sets = _parse_configs(args.config)
        ops = [{"name": k, "config_operation": 0, "value": v} for k, v in sets.items()]
        ops += [{"name": k, "config_operation": 1, "value": None} for k in args.delete_config]
        body = request(client.bootstrap, INCREMENTAL_ALTER_CONFIGS, 1, {
            "resources": [{"resource_type": TOPIC_RESOURCE, "resource_name": t.name, "configs": ops} for t in topics],
            "validate_only": False,
        })
        for r in body.responses:
            if r.error_code.value:
                raise TopicCommandError(error_message(r.error_code.value, r.error_message))
        for t in topics:
            out.write(f"Completed updating config for topic {t.name}.\n")
    return 0


def main(args: argparse.Namespace, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    client = KafkaClient(args.bootstrap_server, client_id="kafka-sidecar-topics", command_config=command_config(args))
    try:
        if args.list:
            for t in _matching(client, args.topic, args.exclude_internal):
                out.write(t.name + "\n")
            return 0
        if args.describe:
            return _describe(client, args, out)
        if args.create:
            return _create(client, args, out)
        if args.delete:
            return _delete(client, args, out)
        return _alter(client, args, out)
    except TopicCommandError as e:
        out.write(f"Error while executing topic command : {e}\n")
        out.flush()
        return 1
    finally:
        client.close()
