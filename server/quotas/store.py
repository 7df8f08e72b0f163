"""Client quota entities and their values: Kafka's ClientQuotaControlManager and ClientQuotasImage.

An entity is a map of entity type (``user``, ``client-id``, ``ip``) to a name, None being the
type's default entity. Alterations are validated as the controller validates them (entity types,
the keys each combination accepts, integral values for LONG/INT keys) and the values kept in
``<data dir>/sidecar-client-quotas.json`` (tmp + fsync + rename, as the SCRAM credentials and
ACLs are kept: Kafka keeps them in its metadata log, a sidecar has none). Describing applies
Kafka's filter rules (exact, default, specified; ``strict``).
"""

from __future__ import annotations

import ipaddress
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafka_sidecar.storage import checkpoint

from .hashmap import entity_hash, hashmap_order, string_hash

QUOTAS_FILE = "sidecar-client-quotas.json"

USER, CLIENT_ID, IP = "user", "client-id", "ip"
PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"

# QuotaConfig.userAndClientQuotaConfigs() and ipConfigs(): key -> ConfigDef type.
USER_CLIENT_KEYS = {PRODUCER_BYTE_RATE: "LONG", CONSUMER_BYTE_RATE: "LONG",
                    REQUEST_PERCENTAGE: "DOUBLE", CONTROLLER_MUTATION_RATE: "DOUBLE"}
IP_KEYS = {CONNECTION_CREATION_RATE: "INT"}
_LIMITS = {"SHORT": (2**15 - 1, "a SHORT"), "INT": (2**31 - 1, "an INT"), "LONG": (float(2**63 - 1), "a LONG")}

# DescribeClientQuotas match types.
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2

# An entity: sorted (type, name or None) pairs.
Entity = tuple[tuple[str, str | None], ...]


class QuotaError(Exception):
    """Kafka's ApiError for one entity: an error code (INVALID_REQUEST unless said) and message."""

    def __init__(self, message: str, code: int = 42) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def java_order(keys: list[str]) -> list[str]:
    """The iteration order of a ``new HashMap<>()`` holding ``keys`` (entity components)."""
    return hashmap_order(keys, string_hash)


def _entity_key(entity: Entity) -> int:
    return entity_hash(entity)


def apply_changes(quotas: dict[Entity, dict[str, float]], changes: dict[Entity, dict[str, float | None]]) -> dict[Entity, dict[str, float]]:
    """ClientQuotasDelta.apply: the quotas after ``changes`` (entities in record order, keys
    to set or None to remove), the entities and each changed entity's values in the order
    Kafka's rebuilt HashMaps iterate (old entries first, then the delta's new ones)."""
    if not changes:
        return {e: dict(q) for e, q in quotas.items()}
    # ClientQuotasDelta.changes; Kafka 4.3.1 replays one request's entities last to first
    # (seen against it: two entities of one bucket come out in the reverse of the request's order).
    changed = hashmap_order(list(reversed(changes)), _entity_key)
    rebuilt: dict[Entity, dict[str, float]] = {}
    for entity in changed:
        old = quotas.get(entity, {})
        change = changes[entity]
        new_keys = hashmap_order(list(change), string_hash)  # ClientQuotaDelta.changes
        values: dict[str, float] = {}
        for k, v in old.items():
            if k not in change:
                values[k] = v
            elif change[k] is not None:
                values[k] = change[k]  # type: ignore[assignment]
        for k in new_keys:
            v = change[k]
            if k not in values and v is not None:
                values[k] = v
        order = hashmap_order(list(values), string_hash, initial=len(old))
        rebuilt[entity] = {k: values[k] for k in order}
    seq: list[Entity] = []
    for entity in quotas:
        if entity not in changes:
            seq.append(entity)
        elif rebuilt[entity]:
            seq.append(entity)
    seq += [e for e in changed if e not in quotas and rebuilt[e]]
    after: dict[Entity, dict[str, float]] = {}
    for entity in hashmap_order(seq, _entity_key, initial=len(quotas)):
        after[entity] = rebuilt[entity] if entity in rebuilt else dict(quotas[entity])
    return after


def entity_string(entity: Entity) -> str:
    """ClientQuotaEntity.toString: ``ClientQuotaEntity(entries={client-id=c, user=u})``."""
    d = dict(entity)
    body = ", ".join(f"{k}={'null' if d[k] is None else d[k]}" for k in java_order(list(d)))
    return f"ClientQuotaEntity(entries={{{body}}})"


def _valid_ip_entity(name: str | None, resolve: Callable[[str], bool]) -> bool:
    """isValidIpEntity: InetAddress.getByName accepts an IP literal or a resolvable host."""
    if name is None:
        return True
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        return resolve(name)


def config_keys(entity: Entity, resolve: Callable[[str], bool]) -> dict[str, str]:
    """configKeysForEntityType: the keys an entity combination accepts, or QuotaError."""
    d = dict(entity)
    if IP in d:
        if USER in d or CLIENT_ID in d:
            raise QuotaError("Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId")
        if not _valid_ip_entity(d[IP], resolve):
            raise QuotaError(f"{d[IP]} is not a valid IP or resolvable host.")
        return IP_KEYS
    if USER in d or CLIENT_ID in d:
        return USER_CLIENT_KEYS
    raise QuotaError("Invalid empty client quota entity")


def validate_entity(components: list[tuple[str, str | None]]) -> Entity:
    """validateEntity: known types, no empty names; the request's map keeps a type's last name."""
    if not components:
        raise QuotaError("Invalid empty client quota entity")
    d: dict[str, str | None] = {}
    for t, n in components:
        d[t] = n
    for t, n in d.items():
        if t not in (USER, CLIENT_ID, IP):
            raise QuotaError(f"Unhandled client quota entity type: {t}")
        if n is not None and n == "":
            raise QuotaError(f"Empty {t} not supported")
    return tuple(sorted(d.items()))


def validate_value(keys: dict[str, str], key: str, value: float) -> None:
    """validateQuotaKeyValue."""
    kind = keys.get(key)
    if kind is None:
        raise QuotaError(f"Invalid configuration key {key}")
    if value <= 0.0:
        raise QuotaError(f"Quota {key} must be greater than 0")
    if kind == "DOUBLE":
        return
    limit, name = _LIMITS[kind]
    if value > limit:
        raise QuotaError(f"Proposed value for {key} is too large for {name}.")
    if abs(math.fmod(value, 1.0)) > 1e-6:  # Java's value % 1.0
        raise QuotaError(f"{key} cannot be a fractional value.")


@dataclass
class Alteration:
    """One entry of AlterClientQuotas: the entity's components and its ops (None: remove)."""

    components: list[tuple[str, str | None]]
    ops: list[tuple[str, float | None]]


class ClientQuotaStore:
    """The quota values by entity, kept in ``<data dir>/sidecar-client-quotas.json``."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.quotas: dict[Entity, dict[str, float]] = {}

    @classmethod
    def empty(cls, data_dir: Path) -> ClientQuotaStore:
        return cls(Path(data_dir) / QUOTAS_FILE)

    @classmethod
    def load(cls, data_dir: Path) -> ClientQuotaStore:
        """The stored quotas; OSError naming the file if it cannot be read."""
        store = cls.empty(data_dir)
        try:
            raw = json.loads(store.path.read_text())
        except (FileNotFoundError, NotADirectoryError):
            return store
        except (OSError, ValueError) as e:
            raise OSError(f"cannot read client quotas {store.path}: {e}") from None
        try:
            for item in raw["entities"]:
                entity = tuple(sorted((str(t), None if n is None else str(n)) for t, n in item["entity"].items()))
                store.quotas[entity] = {str(k): float(v) for k, v in item["quotas"].items()}
        except (AttributeError, KeyError, TypeError, ValueError) as e:
            raise OSError(f"cannot read client quotas {store.path}: malformed entry ({e})") from None
        return store

    def alter(self, alterations: list[Alteration], validate_only: bool,
              resolve: Callable[[str], bool]) -> tuple[list[tuple[Entity, QuotaError | None]], dict[Entity, dict[str, float]]]:
        """ClientQuotaControlManager.alterClientQuotas: (per entity result in Kafka's order,
        the quotas after the change). Nothing is changed here; ``replace`` applies the result."""
        results: dict[Entity, QuotaError | None] = {}
        order: list[Entity] = []
        changes: dict[Entity, dict[str, float | None]] = {}
        for alt in alterations:
            key_of: Entity = tuple(sorted({t: n for t, n in alt.components}.items()))
            ops: dict[str, float | None] = {}
            for k, v in alt.ops:
                if k in ops:
                    results[key_of] = QuotaError(f"Duplicate quota key {k} not updating quota for this entity {entity_string(key_of)}")
                else:
                    ops[k] = v
            if key_of not in order:
                order.append(key_of)
            if key_of in results:
                # Kafka's quirk kept: a duplicate key (or entity) reports "Ignoring duplicate
                # entity", and an earlier alteration of the same entity stays applied.
                results[key_of] = QuotaError(f"Ignoring duplicate entity {entity_string(key_of)}")
                continue
            try:
                entity = validate_entity(alt.components)
                keys = config_keys(entity, resolve)
                current = self.quotas.get(entity, {})
                change: dict[str, float | None] = {}
                for k in java_order(list(ops)):
                    v = ops[k]
                    if v is None:
                        if k in current:
                            change[k] = None
                        continue
                    validate_value(keys, k, v)
                    if current.get(k) != v:
                        change[k] = v
            except QuotaError as e:
                results[key_of] = e
                continue
            results[key_of] = None
            if change:
                changes.setdefault(entity, {}).update(change)
        after = apply_changes(self.quotas, {} if validate_only else changes)
        # The controller's results are a HashMap<ClientQuotaEntity, ApiError>.
        # The controller's results are a HashMap<ClientQuotaEntity, ApiError>; each entity's
        # components in the order of the request's map (new HashMap<>(components)).
        shown: dict[Entity, Entity] = {}
        for alt in alterations:
            d = dict(alt.components)
            key_of = tuple(sorted(d.items()))
            if key_of not in shown:
                shown[key_of] = tuple((t, d[t]) for t in hashmap_order(list(d), string_hash, initial=len(alt.components)))
        return [(shown[e], results[e]) for e in hashmap_order(order, _entity_key)], after

    def describe(self, components: list[tuple[str, int, str | None]], strict: bool) -> list[tuple[Entity, dict[str, float]]]:
        """ClientQuotasImage.describe: the matching entities, or QuotaError (the whole answer)."""
        exact: dict[str, str | None] = {}
        specified: set[str] = set()
        for entity_type, match_type, match in components:
            if entity_type == "":
                raise QuotaError("Invalid empty entity type.")
            if entity_type in exact or entity_type in specified:
                raise QuotaError(f"Entity type {entity_type} cannot appear more than once in the filter.")
            if entity_type not in (IP, USER, CLIENT_ID):
                raise QuotaError(f"Unsupported entity type {entity_type}", code=35)
            if match_type == MATCH_EXACT:
                if match is None:
                    raise QuotaError("Request specified MATCH_TYPE_EXACT, but set match string to null.")
                exact[entity_type] = match
            elif match_type == MATCH_DEFAULT:
                if match is not None:
                    raise QuotaError("Request specified MATCH_TYPE_DEFAULT, but also specified a match string.")
                exact[entity_type] = None
            elif match_type == MATCH_SPECIFIED:
                if match is not None:
                    raise QuotaError("Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.")
                specified.add(entity_type)
            else:
                raise QuotaError(f"Unknown match type {match_type}")
        if (IP in exact or IP in specified) and ({USER, CLIENT_ID} & (exact.keys() | specified)):
            raise QuotaError("Invalid entity filter component combination. IP filter component should not "
                             "be used with user or clientId filter component.")
        out = []
        for entity, values in self.quotas.items():
            d = dict(entity)
            if strict and len(d) != len(exact) + len(specified):
                continue
            if any(t not in d or d[t] != n for t, n in exact.items()):
                continue
            if any(t not in d for t in specified):
                continue
            out.append((entity, values))
        return out

    def snapshot(self, quotas: dict[Entity, dict[str, float]]) -> bytes:
        """The file's content for ``quotas`` (taken on the loop, written in the storage thread)."""
        doc: dict[str, Any] = {"version": 1, "entities": [
            {"entity": dict(entity), "quotas": values}
            for entity, values in quotas.items()  # Kafka's order, kept across a restart
        ]}
        return (json.dumps(doc, indent=1) + "\n").encode()

    def write(self, content: bytes) -> None:
        """tmp + fsync + rename + fsync of the directory (the checkpoints' one way of writing)."""
        checkpoint.atomic_write(self.path, content)
