"""The authorizer: Kafka's StandardAuthorizer on ``sidecar-acls.json``, and the helper the
request handlers call.

``authorizer.class.name`` chooses it, as in Kafka: empty (the default) means no authorizer
(every request is allowed; DescribeAcls/CreateAcls/DeleteAcls answer SECURITY_DISABLED);
``org.apache.kafka.metadata.authorizer.StandardAuthorizer`` (or the ZooKeeper-era name
``kafka.security.authorizer.AclAuthorizer``, same rules) turns it on, with ``super.users``
(``User:a;User:b``) and ``allow.everyone.if.no.acl.found``. Any other class is a start-up error.

Handlers ask ``broker.authorizer`` (always present; without an authorizer every answer is
"allowed" and nothing is looked at)::

    az = broker.authorizer
    if not az.authorize(conn, header, AclOperation.READ, ResourceType.GROUP, group_id):
        ...GROUP_AUTHORIZATION_FAILED...
    allowed = az.filter(conn, header, AclOperation.WRITE, ResourceType.TOPIC, names)  # a set of names

The principal is ``conn.principal`` ("User:ANONYMOUS" unless the listener authenticated the
client) and the host ``conn.client_host`` (``conn``: the request's RequestContext), compared with ACL hosts as Java prints addresses.
Denials are logged like Kafka's authorizer log ("Principal = User:x is Denied operation = READ
from host = 127.0.0.1 on resource = Topic:LITERAL:t for request = Fetch ..."), one line per
request and operation, the same line at most once every ``DENIED_LOG_INTERVAL_S`` seconds (a
client retrying a denied request does not flood the log; the repeats are counted).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafka_sidecar.protocol.api_keys import api_name
from kafka_sidecar.protocol.errors import (  # noqa: F401 (some re-exported)
    CLUSTER_AUTHORIZATION_FAILED,
    GROUP_AUTHORIZATION_FAILED,
    SECURITY_DISABLED,
    TOPIC_AUTHORIZATION_FAILED,
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
)
from kafka_sidecar.storage.log_config import ConfigError
from kafka_sidecar.storage.log_manager import DataDirError

from .acls import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    AclBinding,
    AclBindingFilter,
    AclCache,
    AclFile,
    AclFileError,
    AclOperation,
    ResourceType,
    authorize,
    java_host_address,
    operations_bit_field,
    pascal_case,
)

if TYPE_CHECKING:
    from kafka_sidecar.protocol.framing import RequestHeader

    from ..config import BrokerConfig
    from ..request_context import RequestContext

log = logging.getLogger(__name__)

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ACL_AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"  # ZooKeeper-era name: the same ACL rules
AUTHORIZER_CLASSES = (STANDARD_AUTHORIZER, ACL_AUTHORIZER)

# Kafka's error codes of authorization (protocol/errors.py has the others).
# Errors.message() of those errors (Kafka's default exception messages).
ERROR_MESSAGES = {
    TOPIC_AUTHORIZATION_FAILED: "Topic authorization failed.",
    GROUP_AUTHORIZATION_FAILED: "Group authorization failed.",
    CLUSTER_AUTHORIZATION_FAILED: "Cluster authorization failed.",
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "Transactional Id authorization failed.",
    SECURITY_DISABLED: "Security features are disabled.",
}

DENIED_LOG_INTERVAL_S = 10.0
_DENIED_LOG_MAX_KEYS = 10_000


class AclFileUnreadable(AclFileError, DataDirError):
    """The ACL file is damaged: the broker does not start (reported like a data dir problem)."""


def parse_super_users(value: str | None) -> frozenset[str]:
    """StandardAuthorizer.getConfiguredSuperUsers: ``;``-separated principals, each ``Type:name``."""
    users = set()
    for item in (value or "").split(";"):
        v = item.strip()
        if not v:
            continue
        if ":" not in v:
            raise ConfigError(f"Invalid value {v!r} in super.users: expected a string in format principalType:principalName but got {v}")
        users.add(v)
    return frozenset(users)


def _api_name(header: RequestHeader | None) -> str:
    if header is None:
        return "?"
    return api_name(header.api_key)


def _resource_str(rtype: ResourceType, name: str) -> str:
    return f"{pascal_case(rtype.name)}:LITERAL:{name}"


class _DeniedLog:
    """Kafka's authorizer log line for denials, each distinct line at most once per interval."""

    def __init__(self, interval: float = DENIED_LOG_INTERVAL_S) -> None:
        self.interval = interval
        self._last: dict[tuple[Any, ...], tuple[float, int]] = {}  # key -> (logged at, repeats since)

    def denied(self, principal: str, host: str, op: AclOperation, rtype: ResourceType, names: list[str], api: str, rule: str) -> None:
        key = (principal, host, op, rtype, tuple(names), api)
        now = time.monotonic()
        last = self._last.get(key)
        if last is not None and now - last[0] < self.interval:
            self._last[key] = (last[0], last[1] + 1)
            return
        if len(self._last) >= _DENIED_LOG_MAX_KEYS:
            self._last.clear()
        self._last[key] = (now, 0)
        repeats = f" ({last[1]} more times since the last report)" if last is not None and last[1] else ""
        resources = ", ".join(_resource_str(rtype, n) for n in names)
        log.info("Principal = %s is Denied operation = %s from host = %s on resource = %s for request = %s based on rule %s%s",
                 principal, op.name, host, resources, api, rule, repeats)


class NoAuthorizer:
    """``authorizer.class.name`` empty: every request is allowed, the ACL APIs answer SECURITY_DISABLED."""

    enabled = False

    def load(self) -> None:
        pass

    def authorize(self, conn: RequestContext, header: RequestHeader | None, op: AclOperation, rtype: ResourceType, name: str,
                  *, log_denied: bool = True) -> bool:
        return True

    def authorize_cluster(self, conn: RequestContext, header: RequestHeader | None, op: AclOperation, *, log_denied: bool = True) -> bool:
        return True

    def filter(self, conn: RequestContext, header: RequestHeader | None, op: AclOperation, rtype: ResourceType, names: Iterable[str],
               *, log_denied: bool = True) -> set[str]:
        return set(names)

    def authorize_by_resource_type(self, conn: RequestContext, header: RequestHeader | None, op: AclOperation, rtype: ResourceType) -> bool:
        return True

    def authorized_operations(self, conn: RequestContext, rtype: ResourceType, name: str) -> int:
        return operations_bit_field(SUPPORTED_OPERATIONS[rtype])

    def log_denial(self, conn: RequestContext, header: RequestHeader | None, op: AclOperation, rtype: ResourceType, name: str,
                   rule: str) -> None:
        """Log a denial decided by the caller (a rule Kafka does not audit itself)."""


class StandardAuthorizer(NoAuthorizer):
    """Kafka's StandardAuthorizer rules on the ACLs of ``sidecar-acls.json``."""

    enabled = True

    def __init__(self, class_name: str, data_dir: Path, super_users: frozenset[str], allow_if_no_acl: bool) -> None:
        self.class_name = class_name
        self.super_users = super_users
        self.allow_if_no_acl = allow_if_no_acl
        self.file = AclFile(data_dir)
        self.cache = AclCache()
        self.lock = asyncio.Lock()  # one ACL change at a time (in memory, then on disk)
        self._denied = _DeniedLog()

    def load(self) -> None:
        """Read the ACL file (start-up; blocking). AclFileUnreadable if it is damaged."""
        try:
            acls = self.file.load()
        except AclFileError as e:
            raise AclFileUnreadable(str(e)) from None
        self.cache = AclCache(acls)
        log.info("%s: %d ACL(s) from %s, super.users=%s, allow.everyone.if.no.acl.found=%s", self.class_name.rpartition(".")[2],
                 len(self.cache), self.file.path.name, ",".join(sorted(self.super_users)) or "(none)", str(self.allow_if_no_acl).lower())

    # ---- decisions ----------------------------------------------------------------------------

    @staticmethod
    def _who(conn: RequestContext) -> tuple[str, str]:
        principal = getattr(conn, "principal", None) or "User:ANONYMOUS"
        return principal, java_host_address(getattr(conn, "client_host", "") or "")

    def authorize(self, conn: RequestContext, header: RequestHeader | None, op: AclOperation, rtype: ResourceType, name: str,
                  *, log_denied: bool = True) -> bool:
        """Whether the connection's principal may do ``op`` on the resource (a LITERAL name)."""
        principal, host = self._who(conn)
        decision = authorize(self.cache, self.super_users, self.allow_if_no_acl, principal, host, op, rtype, name)
        if not decision.allowed and log_denied:
            self._denied.denied(principal, host, op, rtype, [name], _api_name(header), decision.rule)
        return decision.allowed

    def authorize_cluster(self, conn: RequestContext, header: RequestHeader | None, op: AclOperation, *, log_denied: bool = True) -> bool:
        return self.authorize(conn, header, op, ResourceType.CLUSTER, CLUSTER_NAME, log_denied=log_denied)

    def filter(self, conn: RequestContext, header: RequestHeader | None, op: AclOperation, rtype: ResourceType, names: Iterable[str],
               *, log_denied: bool = True) -> set[str]:
        """The names (each checked once) the principal may do ``op`` on; one log line for the denied ones."""
        principal, host = self._who(conn)
        allowed: set[str] = set()
        denied: list[str] = []
        rules: dict[str, None] = {}
        for name in dict.fromkeys(names):
            decision = authorize(self.cache, self.super_users, self.allow_if_no_acl, principal, host, op, rtype, name)
            if decision.allowed:
                allowed.add(name)
            else:
                denied.append(name)
                rules[decision.rule] = None
        if denied and log_denied:
            self._denied.denied(principal, host, op, rtype, denied, _api_name(header), " / ".join(rules))
        return allowed

    def log_denial(self, conn: RequestContext, header: RequestHeader | None, op: AclOperation, rtype: ResourceType, name: str,
                   rule: str) -> None:
        principal, host = self._who(conn)
        self._denied.denied(principal, host, op, rtype, [name], _api_name(header), rule)

    def authorize_by_resource_type(self, conn: RequestContext, header: RequestHeader | None, op: AclOperation, rtype: ResourceType) -> bool:
        """Authorizer.authorizeByResourceType: may the principal do ``op`` on some resource of the
        type? (Kafka first authorizes a resource named "hardcode", without logging a denial.)"""
        principal, host = self._who(conn)
        if authorize(self.cache, self.super_users, self.allow_if_no_acl, principal, host, op, rtype, "hardcode").allowed:
            return True
        return self.cache.authorize_by_resource_type(principal, host, op, rtype)

    def authorized_operations(self, conn: RequestContext, rtype: ResourceType, name: str) -> int:
        """AuthHelper.authorizedOperations: the bit field of the supported operations allowed."""
        principal, host = self._who(conn)
        return operations_bit_field(
            op for op in SUPPORTED_OPERATIONS[rtype]
            if authorize(self.cache, self.super_users, self.allow_if_no_acl, principal, host, op, rtype, name).allowed
        )

    # ---- ACL changes (server/apis/acls.py, under ``lock``) ----------------------------------------

    def acls(self, flt: AclBindingFilter) -> list[AclBinding]:
        return self.cache.acls(flt)

    def apply(self, add: Iterable[AclBinding] = (), remove: Iterable[AclBinding] = ()) -> tuple[list[AclBinding], list[AclBinding]]:
        """Change the ACLs in memory: (added, removed) as they really changed, for ``undo``."""
        removed = [a for a in dict.fromkeys(remove) if a in self.cache]
        for a in removed:
            self.cache.remove(a)
        added = [a for a in add if self.cache.add(a)]
        return added, removed

    def undo(self, added: list[AclBinding], removed: list[AclBinding]) -> None:
        for a in added:
            self.cache.remove(a)
        for a in removed:
            self.cache.add(a)

    def snapshot(self) -> list[AclBinding]:
        return self.cache.sorted()

    def save(self, acls: list[AclBinding]) -> None:
        """Write the ACL file (blocking: run it in the storage thread)."""
        self.file.save(acls)


def has_transactional_records(request: Any) -> bool:
    """RequestUtils.hasTransactionalRecords for a Produce request: whether the first record batch
    of some partition is transactional (attributes bit 0x10; magic 2 batches only)."""
    for t in request.topic_data:
        for p in t.partition_data:
            records = p.records
            if records is not None and len(records) >= 23 and records[16] == 2 and records[22] & 0x10:
                return True
    return False


def create_authorizer(config: BrokerConfig, data_dir: Path) -> NoAuthorizer:
    """The authorizer ``authorizer.class.name`` names (ConfigError for an unknown class or bad super.users)."""
    class_name = (config.get("authorizer.class.name") or "").strip()
    if not class_name:
        if AclFile(data_dir).exists():
            log.info("ACLs in %s are not enforced: authorizer.class.name is not set", Path(data_dir) / "sidecar-acls.json")
        return NoAuthorizer()
    if class_name not in AUTHORIZER_CLASSES:
        raise ConfigError(
            f"authorizer.class.name={class_name} is not supported: use {STANDARD_AUTHORIZER} (ACLs kept in the data dir), "
            f"or leave it empty for no authorizer"
        )
    return StandardAuthorizer(class_name, Path(data_dir), parse_super_users(config.get("super.users")),
                              bool(config.get("allow.everyone.if.no.acl.found")))
