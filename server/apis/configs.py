"""DescribeConfigs (API 32), AlterConfigs (API 33) and IncrementalAlterConfigs (API 44).

Topic configs and broker configs, answered as Kafka 4.0 answers them (its ConfigHelper,
ConfigAdminManager, ControllerConfigurationValidator and ConfigurationControlManager):

- A config's value comes from, highest precedence first: the topic's own override
  (DYNAMIC_TOPIC_CONFIG), this broker's dynamic config (DYNAMIC_BROKER_CONFIG), the cluster-wide
  dynamic default (DYNAMIC_DEFAULT_BROKER_CONFIG, resource name ""), the broker's properties
  (STATIC_BROKER_CONFIG: ``--config`` file and ``--override`` flags) and Kafka's default
  (DEFAULT_CONFIG). Synonyms list every level that sets the config or its broker-wide synonym, in
  that order, exactly as Kafka builds them (including its quirk that ``retention.ms`` shows no
  synonym when only ``log.retention.hours`` is set).
- Topic overrides live in ``sidecar-topics.json``, dynamic broker configs in
  ``sidecar-broker-configs.json`` (both via LogManager); a change replaces the LogConfig of every
  affected log at once, so later appends, rolls and retention checks use it.
- Validation and errors in Kafka's order and wording: per-request checks first (duplicate
  resources and keys, null values, broker ids), then APPEND/SUBTRACT on non-list configs, then
  names and values, then whether the topic exists.

Simplified: dynamic broker configs that have no topic-level meaning (thread counts, SASL
settings...) are validated, stored and described but change nothing here, except the connection
limits (``max.connections``, ``max.connections.per.ip[.overrides]``,
``max.connection.creation.rate``: server/quotas/connections.py reads them at each accept); listener configs cannot
be changed dynamically; BROKER_LOGGER and CLIENT_METRICS resources are refused. GROUP resources
are server/group_configs.py's.
"""

from __future__ import annotations

import asyncio
import logging
import re
import weakref
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafka_sidecar.protocol import errors
from kafka_sidecar.protocol.framing import RequestHeader
from kafka_sidecar.protocol.topic import InvalidTopicError, validate_topic_name
from kafka_sidecar.storage.log_config import (
    CONFIG_TYPE_IDS,
    DESCRIBE_ORDER,
    TOPIC_CONFIG_DOCS,
    TOPIC_CONFIG_SYNONYMS,
    TOPIC_CONFIGS,
    ConfigDef,
    ConfigError,
    LogConfig,
    format_config_value,
    validate_topic_config_set,
    validate_topic_configs,
)

from .. import group_configs
from ..broker_config_defs import BROKER_CONFIG_DEFS
from ..config import per_ip_config_error
from ..groups.javaorder import JavaHashMap
from ..security.acls import AclOperation, ResourceType
from ..security.authorizer import (
    CLUSTER_AUTHORIZATION_FAILED,
    ERROR_MESSAGES,
    GROUP_AUTHORIZATION_FAILED,
    TOPIC_AUTHORIZATION_FAILED,
)
from ..telemetry.manager import alter_client_metrics

if TYPE_CHECKING:
    from ..request_context import RequestContext
    from ..services import BrokerServices

log = logging.getLogger(__name__)

# ConfigResource.Type ids.
TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
_RESOURCE_TYPE_NAMES = {TOPIC: "TOPIC", BROKER: "BROKER", BROKER_LOGGER: "BROKER_LOGGER", CLIENT_METRICS: "CLIENT_METRICS", GROUP: "GROUP"}

# DescribeConfigsResponse.ConfigSource ids.
DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 2, 3, 4, 5

# AlterConfigOp.OpType ids.
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_OP_NAMES = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}


class ApiError(Exception):
    """One resource's error: Kafka's error code and message."""

    def __init__(self, code: int, message: str | None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


# ---- Kafka's broker configs ------------------------------------------------------------------


@dataclass(frozen=True)
class BrokerConfigKey:
    name: str
    type: str
    default: str | None  # as Kafka prints it
    dynamic: bool  # in DynamicBrokerConfig.AllDynamicConfigs (read_only = not dynamic)
    cdef: ConfigDef  # parses and validates a value, with Kafka's messages
    doc: str | None

    @property
    def sensitive(self) -> bool:
        return self.type == "password"


_RANGE = re.compile(r"\[(-?[0-9.]+),\.\.\.(?:,(-?[0-9.]+))?\]( or (-?[0-9]+))?")
_ONE_OF = re.compile(r"\[([A-Za-z_][^\]]*)\]")


def _config_def(name: str, type_: str, validator: str | None) -> ConfigDef:
    """A ConfigDef from Kafka's validator description (``[0,...]``, ``[1,...,9] or -1``, ``[a, b]``)."""
    kw: dict[str, Any] = {}
    number = float if type_ == "double" else int
    if validator and (m := _RANGE.fullmatch(validator)):
        kw["at_least"] = number(m.group(1))
        if m.group(2) is not None:
            kw["at_most"] = number(m.group(2))
        if m.group(4) is not None:
            kw["or_equal"] = int(m.group(4))
    elif validator and (m := _ONE_OF.fullmatch(validator)):
        options = tuple(v.strip() for v in m.group(1).split(","))
        kw["list_of" if type_ == "list" else "one_of"] = options
    return ConfigDef(name, type_, None, **kw)


BROKER_CONFIG_KEYS: dict[str, BrokerConfigKey] = {
    name: BrokerConfigKey(name, type_, default, dynamic, _config_def(name, type_, validator), doc)
    for name, type_, default, dynamic, validator, doc in BROKER_CONFIG_DEFS
}
_DEFAULTS: dict[str, str] = {k.name: k.default for k in BROKER_CONFIG_KEYS.values() if k.default is not None}

# DynamicBrokerConfig: configs that need a listener prefix, and configs only a broker (not the
# cluster-wide default) may set.
_DYNAMIC_SECURITY_CONFIGS = (
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password", "ssl.truststore.type",
    "ssl.truststore.location", "ssl.truststore.password", "ssl.keystore.certificate.chain", "ssl.keystore.key",
    "ssl.truststore.certificates",
)
_LISTENER_CONFIGS = {"advertised.listeners", "listeners", "listener.security.protocol.map"}
_CLUSTER_LEVEL_LISTENER_CONFIGS = {"max.connections", "max.connection.creation.rate", "num.network.threads"}
_PER_BROKER_CONFIGS = _LISTENER_CONFIGS | {"principal.builder.class"} | {
    k.name for k in BROKER_CONFIG_KEYS.values() if k.dynamic and k.name.startswith(("ssl.", "sasl."))
}
_LISTENER_MECHANISM_CONFIGS = (
    "sasl.jaas.config", "sasl.login.callback.handler.class", "sasl.login.class", "sasl.server.callback.handler.class",
    "connections.max.reauth.ms",
)
_LISTENER_CONFIG = re.compile(r"listener\.name\.[^.]*\.(.*)")
# DynamicThreadPool: a thread count may change by at most a factor of two at a time.
_THREAD_POOL_CONFIGS = ("num.io.threads", "num.replica.fetchers", "num.recovery.threads.per.data.dir", "background.threads", "num.network.threads")

_SYNONYM_GROUPS = (
    ("log.roll.ms", "log.roll.hours"),
    ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
)


def broker_config_synonyms(name: str, match_listener_override: bool = True) -> list[str]:
    """Kafka's DynamicBrokerConfig.brokerConfigSynonyms: the names that set the same broker config."""
    for group in _SYNONYM_GROUPS:
        if name in group:
            return list(group)
    if name == "log.flush.interval.ms":
        return [name, "log.flush.scheduler.interval.ms"]
    m = _LISTENER_CONFIG.fullmatch(name)
    if m and match_listener_override:
        base = m.group(1)
        return [name, next((c for c in _LISTENER_MECHANISM_CONFIGS if base.endswith(c)), base)]
    return [name]


def _java_set(names: Iterable[str]) -> str:
    """How Kafka's (4.3, Java) DynamicBrokerConfig messages print a set of names: a java.util.HashSet."""
    order = JavaHashMap()
    for name in names:
        order[name] = None
    return f"[{', '.join(order.keys())}]"


def _java_split(value: str) -> list[str]:
    """Java's String.split(","): trailing empty strings dropped (but "" gives [""])."""
    parts = value.split(",")
    while len(parts) > 1 and parts[-1] == "":
        parts.pop()
    return parts


# ---- where each value comes from -----------------------------------------------------------


@dataclass
class Layers:
    """The broker-level config maps, highest precedence first, as Kafka's DynamicBrokerConfig keeps them."""

    dynamic_broker: dict[str, str]
    dynamic_default: dict[str, str]
    static: dict[str, str]
    default: Mapping[str, str]

    def synonyms(self, name: str, names: list[str], sensitive: bool) -> list[dict[str, Any]]:
        """ConfigHelper.configSynonyms: every level that sets one of ``names``, from the
        first entry for ``name`` itself on (Kafka drops what comes before it)."""
        found = []
        for layer, source in (
            (self.dynamic_broker, DYNAMIC_BROKER_CONFIG), (self.dynamic_default, DYNAMIC_DEFAULT_BROKER_CONFIG),
            (self.static, STATIC_BROKER_CONFIG), (self.default, DEFAULT_CONFIG),
        ):
            for n in names:
                if n in layer:
                    found.append({"name": n, "value": None if sensitive else layer[n], "source": source})
        first = next((i for i, s in enumerate(found) if s["name"] == name), len(found))
        return found[first:]

    def current_props(self) -> dict[str, str]:
        """The broker's properties in effect: static ones overridden by the dynamic default, then by
        this broker's dynamic configs, each override removing its synonyms (overrideProps)."""
        props = dict(self.static)
        for layer in (self.dynamic_default, self.dynamic_broker):
            for k, v in layer.items():
                for synonym in broker_config_synonyms(k, match_listener_override=False):
                    props.pop(synonym, None)
                props[k] = v
        return props


def _listener(services: BrokerServices) -> str:
    return services.listeners_value()  # every listener, with the ports bound (server/listeners.py)


def broker_layers(services: BrokerServices) -> Layers:
    """The config levels of this broker. Its static configs are its properties as given, plus
    what kafka-sidecar's flags imply (node id, ``--data-dir`` as ``log.dirs``, ``--listen`` as
    ``listeners``) when the properties do not set them."""
    static = dict(getattr(services.config, "originals", {}) or {})
    implied = {
        "node.id": str(services.node_id), "broker.id": str(services.node_id),
        "log.dirs": str(services.data_dir.resolve()), "listeners": _listener(services),
    }
    for k, v in implied.items():
        static.setdefault(k, v)
    return Layers(services.dynamic_config.get(str(services.node_id)), services.dynamic_config.get(""), static, _DEFAULTS)


# ---- DescribeConfigs -------------------------------------------------------------------------


def _topic_entry(name: str, config: LogConfig, overrides: Mapping[str, Any], layers: Layers,
                 include_synonyms: bool, include_documentation: bool) -> dict[str, Any]:
    """ConfigHelper.createTopicConfigEntry."""
    cdef = TOPIC_CONFIGS[name]
    value = format_config_value(cdef.type, config.values[name])
    broker_name = TOPIC_CONFIG_SYNONYMS.get(name)
    synonyms = layers.synonyms(broker_name, broker_config_synonyms(broker_name), False) if broker_name else []
    if name in overrides:
        synonyms.insert(0, {"name": name, "value": value, "source": DYNAMIC_TOPIC_CONFIG})
    return {
        "name": name, "value": value, "read_only": False,
        "config_source": synonyms[0]["source"] if synonyms else DEFAULT_CONFIG,
        "is_sensitive": False, "synonyms": synonyms if include_synonyms else [],
        "config_type": CONFIG_TYPE_IDS[cdef.type],
        "documentation": TOPIC_CONFIG_DOCS.get(name) if include_documentation else None,
    }


def _broker_value(name: str, raw: str | None, key: BrokerConfigKey | None) -> str | None:
    """The value KafkaConfig would hold for ``raw`` (parsed, then printed as Kafka prints it)."""
    if key is None:
        return raw
    if raw is None:
        return key.default
    try:
        return format_config_value(key.type, key.cdef.parse(raw))
    except ConfigError:
        return raw


def _broker_entry(name: str, value: str | None, layers: Layers, per_broker: bool,
                  include_synonyms: bool, include_documentation: bool) -> dict[str, Any]:
    """ConfigHelper.createBrokerConfigEntry. Names Kafka does not know are described as it
    describes custom properties: type UNKNOWN, sensitive, value hidden."""
    key = BROKER_CONFIG_KEYS.get(name)
    sensitive = key is None or key.sensitive
    synonyms = layers.synonyms(name, broker_config_synonyms(name), sensitive)
    if not per_broker:
        synonyms = [s for s in synonyms if s["source"] == DYNAMIC_DEFAULT_BROKER_CONFIG]
    return {
        "name": name, "value": None if sensitive else value,
        "read_only": not (key is not None and key.dynamic),
        "config_source": synonyms[0]["source"] if synonyms else DEFAULT_CONFIG,
        "is_sensitive": sensitive, "synonyms": synonyms if include_synonyms else [],
        "config_type": CONFIG_TYPE_IDS[key.type] if key is not None else 0,
        "documentation": key.doc if key is not None and include_documentation else None,
    }


def _wanted(keys: Any, names: Iterable[str]) -> list[str]:
    """Kafka filters its own list by the requested keys (unknown keys are left out)."""
    if not keys:
        return list(names)
    wanted = set(keys)
    return [n for n in names if n in wanted]


def _parse_broker_id(name: str) -> int | None:
    return int(name) if re.fullmatch(r"[+-]?[0-9]+", name) and -(2**31) <= int(name) < 2**31 else None


def _describe(services: BrokerServices, resource: Any, include_synonyms: bool, include_documentation: bool) -> list[dict[str, Any]]:
    rtype, name = resource.resource_type, resource.resource_name
    if rtype == TOPIC:
        try:
            validate_topic_name(name)
        except InvalidTopicError as e:
            raise ApiError(errors.INVALID_TOPIC_EXCEPTION, str(e)) from None
        lm = services.log_manager
        info = services.metadata.topics.get(name)
        if info is None:
            raise ApiError(errors.UNKNOWN_TOPIC_OR_PARTITION, "")
        config = lm.log_config(info)
        layers = broker_layers(services)
        return [
            _topic_entry(n, config, info.configs, layers, include_synonyms, include_documentation)
            for n in _wanted(resource.configuration_keys, DESCRIBE_ORDER)
        ]
    if rtype == BROKER:
        layers = broker_layers(services)
        if not name:
            configs = layers.dynamic_default
            return [
                _broker_entry(n, configs[n], layers, False, include_synonyms, include_documentation)
                for n in _wanted(resource.configuration_keys, configs)
            ]
        broker_id = _parse_broker_id(name)
        if broker_id is None:
            raise ApiError(errors.INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}")
        if broker_id != services.node_id:
            raise ApiError(errors.INVALID_REQUEST, f"Unexpected broker id, expected {services.node_id} or empty string, but received {name}")
        props = layers.current_props()
        names = [*BROKER_CONFIG_KEYS, *(n for n in props if n not in BROKER_CONFIG_KEYS)]
        return [
            _broker_entry(n, _broker_value(n, props.get(n), BROKER_CONFIG_KEYS.get(n)), layers, True, include_synonyms, include_documentation)
            for n in _wanted(resource.configuration_keys, names)
        ]
    if rtype == GROUP:
        try:
            return group_configs.describe_resource(services.group_configs, name, resource.configuration_keys, include_synonyms, include_documentation)
        except group_configs.GroupResourceError as e:
            raise ApiError(e.code, e.message) from None
    if rtype == CLIENT_METRICS:
        return services.client_metrics_subscriptions.describe(name, resource.configuration_keys, include_synonyms, include_documentation)
    raise ApiError(errors.INVALID_REQUEST, _unsupported_type(rtype))


def _unsupported_type(rtype: int) -> str:
    if rtype in _RESOURCE_TYPE_NAMES:
        return f"kafka-sidecar does not support {_RESOURCE_TYPE_NAMES[rtype]} configs"
    return f"Unknown resource type {rtype}"


def _config_authorization_error(services: BrokerServices, context: RequestContext, header: RequestHeader, rtype: int, name: str,
                                op: AclOperation) -> int | None:
    """ConfigHelper / ControllerApis.authorizeAlterResource: DESCRIBE_CONFIGS (or ALTER_CONFIGS) on
    the cluster for broker resources, on the topic or group for theirs; the error code if denied."""
    az = services.authorizer
    if rtype in (BROKER, BROKER_LOGGER, CLIENT_METRICS):
        return None if az.authorize_cluster(context, header, op) else CLUSTER_AUTHORIZATION_FAILED
    if rtype == TOPIC:
        return None if az.authorize(context, header, op, ResourceType.TOPIC, name) else TOPIC_AUTHORIZATION_FAILED
    if rtype == GROUP:
        return None if az.authorize(context, header, op, ResourceType.GROUP, name) else GROUP_AUTHORIZATION_FAILED
    return None


async def handle_describe_configs(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    header = context.header
    include_synonyms = bool(getattr(request, "include_synonyms", False))
    include_documentation = bool(getattr(request, "include_documentation", False))
    results = []
    denied = []
    for resource in request.resources:
        result: dict[str, Any] = {"error_code": errors.NONE, "error_message": "", "configs": []}
        code = _config_authorization_error(services, context, header, resource.resource_type, resource.resource_name, AclOperation.DESCRIBE_CONFIGS)
        if code is not None:
            # Answered after the authorized resources, with Errors.message() (ConfigHelper).
            result.update(error_code=code, error_message=ERROR_MESSAGES[code],
                          resource_type=resource.resource_type, resource_name=resource.resource_name)
            denied.append(result)
            continue
        try:
            result["configs"] = _describe(services, resource, include_synonyms, include_documentation)
        except ApiError as e:
            result.update(error_code=e.code, error_message=e.message)
        result.update(resource_type=resource.resource_type, resource_name=resource.resource_name)
        results.append(result)
    return {"throttle_time": 0, "results": results + denied}


# ---- topic changes -----------------------------------------------------------------------------


def _topic_config_strings(configs: Mapping[str, Any]) -> dict[str, str]:
    """A topic's stored (parsed) overrides as the strings Kafka keeps."""
    return {k: format_config_value(TOPIC_CONFIGS[k].type, v) or "" for k, v in configs.items() if k in TOPIC_CONFIGS}


def _check_topic(services: BrokerServices, name: str, new_configs: Mapping[str, str]) -> dict[str, Any]:
    """ControllerConfigurationValidator.validate for a topic, then the existence check:
    the parsed overrides the topic would have."""
    if not name:
        raise ApiError(errors.INVALID_REQUEST, "Default topic resources are not allowed.")
    try:
        validate_topic_name(name)
    except InvalidTopicError as e:
        raise ApiError(errors.INVALID_TOPIC_EXCEPTION, str(e)) from None
    lm = services.log_manager
    try:
        parsed = validate_topic_configs(new_configs)
        validate_topic_config_set(parsed, lm.broker_log_defaults)
    except ConfigError as e:
        raise ApiError(errors.INVALID_CONFIG, str(e)) from None
    if name not in services.metadata.topics:
        raise ApiError(errors.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
    return parsed


def _incremental_topic_configs(current: Mapping[str, str], ops: list[tuple[str, int, str | None]]) -> dict[str, str]:
    """ConfigurationControlManager.incrementalAlterConfigResource: the overrides after ``ops``."""
    configs = dict(current)
    for key, op, value in ops:
        if op == SET:
            configs[key] = value or ""
        elif op == DELETE:
            configs.pop(key, None)
        elif op in (APPEND, SUBTRACT):
            cdef = TOPIC_CONFIGS.get(key)
            if cdef is None or cdef.type != "list":
                raise ApiError(errors.INVALID_CONFIG, f"Can't {_OP_NAMES[op]} to key {key} because its type is not LIST.")
            old = configs.get(key)
            if old is None:
                old = format_config_value("list", cdef.default) or ""
            parts = [p for p in old.split(",") if p]
            for v in (value or "").split(","):
                if op == APPEND and v not in parts:
                    parts.append(v)
                elif op == SUBTRACT and v in parts:
                    parts.remove(v)
            configs[key] = ",".join(parts)
        else:
            # Kafka fails on an operation id it has no OpType for: UNKNOWN_SERVER_ERROR, which it
            # answers without a message.
            log.warning("IncrementalAlterConfigs: unknown operation type %d for %s", op, key)
            raise ApiError(errors.UNKNOWN_SERVER_ERROR, None)
    return configs


# ---- broker changes ----------------------------------------------------------------------------


def _check_node_id(services: BrokerServices, name: str) -> None:
    """ConfigAdminManager.validateResourceNameIsCurrentNodeId."""
    node_id = _parse_broker_id(name)
    if node_id is None:
        raise ApiError(errors.INVALID_REQUEST, f"Node id must be an integer, but it is: {name}")
    if node_id != services.node_id:
        raise ApiError(errors.INVALID_REQUEST, f"Unexpected broker id, expected {services.node_id}, but received {name}")


def _incremental_broker_configs(current: Mapping[str, str], ops: list[tuple[str, int, str | None]]) -> dict[str, str]:
    """ConfigAdminManager.prepareIncrementalConfigs over the scope's dynamic configs."""
    props = dict(current)
    for key, op, value in ops:
        if op == SET:
            props[key] = value or ""
        elif op == DELETE:
            props.pop(key, None)
        elif op in (APPEND, SUBTRACT):
            ckey = BROKER_CONFIG_KEYS.get(key)
            if ckey is None:
                raise ApiError(errors.INVALID_CONFIG, f"Unknown config name: {key}")
            if ckey.type != "list":
                raise ApiError(errors.INVALID_CONFIG, f"Config value {_OP_NAMES[op].lower()} is not allowed for config key: {key}")
            old = props.get(key, ckey.default)
            if op == APPEND:
                parts = _java_split(old) if old else []
                parts += [v for v in _java_split(value or "") if v not in parts]
            else:
                removed = _java_split(value or "")
                parts = _java_split(old or "")
                for v in removed:
                    if v in parts:
                        parts.remove(v)
            props[key] = ",".join(parts)
        else:
            # Kafka fails on an operation id it has no OpType for: UNKNOWN_SERVER_ERROR, which it
            # answers without a message.
            log.warning("IncrementalAlterConfigs: unknown operation type %d for %s", op, key)
            raise ApiError(errors.UNKNOWN_SERVER_ERROR, None)
    return props


_PER_IP_KEYS = frozenset({"max.connections.per.ip", "max.connections.per.ip.overrides"})


def _validate_broker_configs(services: BrokerServices, props: Mapping[str, str], per_broker: bool, layers: Layers) -> None:
    """DynamicBrokerConfig.validate: what may change dynamically, at which level, with valid values."""
    non_dynamic = [k for k in props if k in BROKER_CONFIG_KEYS and not BROKER_CONFIG_KEYS[k].dynamic]
    if non_dynamic:
        raise ApiError(errors.INVALID_REQUEST, f"Cannot update these configs dynamically: {_java_set(non_dynamic)}")
    security = [k for k in props if k in _DYNAMIC_SECURITY_CONFIGS]
    if security:
        raise ApiError(errors.INVALID_REQUEST, "These security configs can be dynamically updated only per-listener using the listener prefix: " + _java_set(security))
    for k, v in props.items():
        m = _LISTENER_CONFIG.fullmatch(k)
        key = BROKER_CONFIG_KEYS.get(m.group(1) if m else k)
        if key is not None:
            try:
                key.cdef.parse(v)
            except ConfigError as e:
                raise ApiError(errors.INVALID_REQUEST, str(e)) from None
    if not per_broker:
        only_per_broker = [
            k for k in props
            if k in _PER_BROKER_CONFIGS or ((m := _LISTENER_CONFIG.fullmatch(k)) and m.group(1) not in _CLUSTER_LEVEL_LISTENER_CONFIGS)
        ]
        if only_per_broker:
            raise ApiError(errors.INVALID_REQUEST, f"Cannot update these configs at default cluster level, broker id must be specified: {_java_set(only_per_broker)}")
    # What kafka-sidecar cannot do while running: its listener is fixed by --listen.
    listener = [k for k in props if k in _LISTENER_CONFIGS or k.startswith("listener.name.")]
    if listener:
        raise ApiError(errors.INVALID_REQUEST, f"kafka-sidecar cannot change these configs dynamically: {_java_set(listener)}")
    # KafkaConfig.validateValues on what would be in effect: the per-IP connection limits.
    if _PER_IP_KEYS & props.keys():
        effective = Layers(props if per_broker else layers.dynamic_broker, layers.dynamic_default if per_broker else props,
                           layers.static, layers.default).current_props()
        problem = per_ip_config_error(effective.get("max.connections.per.ip"), effective.get("max.connections.per.ip.overrides"))
        if problem is not None:
            raise ApiError(errors.INVALID_REQUEST, problem)
    # DynamicThreadPool.validateReconfiguration (reported by Kafka as an invalid dynamic configuration).
    current = layers.current_props()
    for k in _THREAD_POOL_CONFIGS:
        if k in props:
            new = BROKER_CONFIG_KEYS[k].cdef.parse(props[k])
            old = int(_broker_value(k, current.get(k), BROKER_CONFIG_KEYS[k]) or 0)
            if new != old and (new < 1 or new < old / 2 or new > old * 2):
                raise ApiError(errors.INVALID_REQUEST, "Invalid dynamic configuration")


# ---- AlterConfigs / IncrementalAlterConfigs ----------------------------------------------------


def _preflight(resources: list[Any], incremental: bool) -> dict[int, ApiError]:
    """ConfigAdminManager.preprocess: errors found before any resource is looked at, by index."""
    found: dict[int, ApiError] = {}
    counts = Counter((r.resource_type, r.resource_name) for r in resources)
    for i, r in enumerate(resources):
        if counts[(r.resource_type, r.resource_name)] > 1:
            found[i] = ApiError(errors.INVALID_REQUEST, "Each resource must appear at most once.")
            continue
        names = [c.name for c in r.configs]
        if len(set(names)) != len(names):
            found[i] = ApiError(errors.INVALID_REQUEST, "Error due to duplicate config keys")
            continue
        nulls = [c.name for c in r.configs if c.value is None and not (incremental and c.config_operation == DELETE)]
        if nulls:
            found[i] = ApiError(errors.INVALID_REQUEST, "Null value not supported for : " + ", ".join(nulls))
            continue
        if r.resource_type not in (TOPIC, BROKER, CLIENT_METRICS, GROUP):
            found[i] = ApiError(errors.INVALID_REQUEST, _unsupported_type(r.resource_type))
    return found


def _broker_props(services: BrokerServices, r: Any, incremental: bool) -> dict[str, str]:
    """The dynamic configs of a BROKER resource's scope after the change, checked (ApiError if not)."""
    layers = broker_layers(services)
    current = layers.dynamic_broker if r.resource_name else layers.dynamic_default
    if incremental:
        props = _incremental_broker_configs(current, [(c.name, c.config_operation, c.value) for c in r.configs])
    else:
        props = {c.name: c.value for c in r.configs}
    _validate_broker_configs(services, props, bool(r.resource_name), layers)
    return props


# One config change at a time per broker (Kafka's controller serializes them too), so that an
# incremental change is computed from the configs the previous one left.
_ALTER_LOCKS: weakref.WeakKeyDictionary[Any, asyncio.Lock] = weakref.WeakKeyDictionary()


async def _alter(services: BrokerServices, context: RequestContext, header: RequestHeader, request: Any, incremental: bool) -> dict[str, Any]:
    lock = _ALTER_LOCKS.setdefault(services, asyncio.Lock())
    async with lock:
        return await _alter_locked(services, context, header, request, incremental)


async def _alter_locked(services: BrokerServices, context: RequestContext, header: RequestHeader, request: Any, incremental: bool) -> dict[str, Any]:
    lm = services.log_manager
    validate_only = bool(request.validate_only)
    failed = _preflight(list(request.resources), incremental)
    responses = []
    for i, r in enumerate(request.resources):
        rtype, name = r.resource_type, r.resource_name
        try:
            if i in failed:
                raise failed[i]
            # ALTER_CONFIGS on the cluster (broker configs) or the topic (ControllerApis.authorizeAlterResource).
            code = _config_authorization_error(services, context, header, rtype, name, AclOperation.ALTER_CONFIGS)
            if code is not None:
                raise ApiError(code, ERROR_MESSAGES[code])
            if rtype == BROKER:
                if name:
                    _check_node_id(services, name)
                scope = str(services.node_id) if name else ""
                if services.cluster is not None and not validate_only:  # serve --processes N: in the cluster log's turn
                    from ..cluster import config_records

                    def build(r: Any = r, scope: str = scope) -> tuple[list[dict[str, Any]], None]:
                        props = _broker_props(services, r, incremental)
                        return [config_records.scope_set(scope, props)], None

                    await services.cluster.admin.change(services, build)
                    responses.append({"error_code": errors.NONE, "error_message": None, "resource_type": rtype, "resource_name": name})
                    continue
                props = _broker_props(services, r, incremental)
                if not validate_only:
                    await services.run_blocking(services.dynamic_config.set, scope, props)
            elif rtype == CLIENT_METRICS:  # server/telemetry/
                await alter_client_metrics(services.client_metrics_subscriptions, services.run_blocking, name, r.configs, incremental, validate_only, ApiError)
            elif rtype == GROUP:  # server/group_configs.py
                try:
                    if services.cluster is not None and not validate_only:  # serve --processes N: in the cluster log's turn
                        from ..cluster import group_config_records

                        def build_group(r: Any = r, name: str = name) -> tuple[list[dict[str, Any]], None]:
                            props = group_configs.checked_props(services.group_configs, name, r.configs, incremental)
                            return [group_config_records.group_set(name, props)], None

                        await services.cluster.admin.change(services, build_group)
                    else:
                        await group_configs.alter_resource(services.group_configs, services.run_blocking, name, r.configs, incremental, validate_only)
                except group_configs.GroupResourceError as e:
                    raise ApiError(e.code, e.message) from None
            else:
                info = services.metadata.topics.get(name)
                current = _topic_config_strings(info.configs) if info is not None else {}
                if incremental:
                    configs = _incremental_topic_configs(current, [(c.name, c.config_operation, c.value) for c in r.configs])
                else:
                    configs = {c.name: c.value for c in r.configs}
                parsed = _check_topic(services, name, configs)
                if not validate_only and parsed != services.metadata.topics[name].configs:
                    await services.run_blocking(lm.alter_topic_configs, name, parsed)
        except ApiError as e:
            log.info("%s %s %r refused: error %d %s", "IncrementalAlterConfigs" if incremental else "AlterConfigs",
                     _RESOURCE_TYPE_NAMES.get(rtype, rtype), name, e.code, e.message)
            responses.append({"error_code": e.code, "error_message": e.message, "resource_type": rtype, "resource_name": name})
            continue
        responses.append({"error_code": errors.NONE, "error_message": None, "resource_type": rtype, "resource_name": name})
    return {"throttle_time": 0, "responses": responses}


async def handle_alter_configs(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    header = context.header
    return await _alter(services, context, header, request, incremental=False)


async def handle_incremental_alter_configs(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    header = context.header
    return await _alter(services, context, header, request, incremental=True)
