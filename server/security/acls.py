"""ACLs: Kafka's ACL model, StandardAuthorizer's matching rules, and the ACL file.

Plain synchronous code (no asyncio, no sockets), so every rule is a unit test:

- the enums of ``org.apache.kafka.common.acl`` / ``common.resource`` with Kafka's codes
  (``ResourceType``, ``PatternType``, ``AclOperation``, ``AclPermissionType``);
- ``AclBinding`` (a resource pattern plus an access control entry) and ``AclBindingFilter`` with
  Kafka's ``matches`` (``ResourcePatternFilter`` / ``AccessControlEntryFilter``), used by
  DescribeAcls and DeleteAcls;
- ``AclCache``: the ACLs in force, and ``authorize`` as StandardAuthorizerData decides: super
  users are allowed everything; otherwise the ACLs whose resource pattern matches the resource
  (LITERAL with the same name, LITERAL ``*``, PREFIXED with a prefix of the name) are checked
  for the principal (or ``User:*``), the host (or ``*``) and the operation (``ALL``, and for
  ALLOW ACLs the implied ones: DESCRIBE from READ/WRITE/DELETE/ALTER, DESCRIBE_CONFIGS from
  ALTER_CONFIGS); a matching DENY wins over any ALLOW; when no ACL at all names the resource,
  ``allow.everyone.if.no.acl.found`` decides, else the answer is DENY;
  ``authorize_by_resource_type`` is the Authorizer interface's default method;
- ``AclFile``: the ACLs kept in ``sidecar-acls.json`` in the data dir (a JSON list with a
  CRC-32, written ``.tmp`` + fsync + rename like the checkpoints, with a ``.bak`` copy).
"""

from __future__ import annotations

import ipaddress
import json
import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path
from typing import Any, NamedTuple

from kafka_sidecar.storage import checkpoint

log = logging.getLogger(__name__)

ACLS_FILE = "sidecar-acls.json"
ACLS_FILE_VERSION = 1
WILDCARD = "*"  # ResourcePattern.WILDCARD_RESOURCE and the any-host ACL host
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"  # Resource.CLUSTER_NAME


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


def resource_type(code: int) -> ResourceType:
    """``ResourceType.fromCode``: an unknown code is UNKNOWN."""
    try:
        return ResourceType(code)
    except ValueError:
        return ResourceType.UNKNOWN


def pattern_type(code: int) -> PatternType:
    try:
        return PatternType(code)
    except ValueError:
        return PatternType.UNKNOWN


def operation(code: int) -> AclOperation:
    try:
        return AclOperation(code)
    except ValueError:
        return AclOperation.UNKNOWN


def permission_type(code: int) -> AclPermissionType:
    try:
        return AclPermissionType(code)
    except ValueError:
        return AclPermissionType.UNKNOWN


def pascal_case(name: str) -> str:
    """Kafka's ``SecurityUtils.toPascalCase``: TRANSACTIONAL_ID -> TransactionalId."""
    return "".join(part[:1] + part[1:].lower() for part in name.split("_"))


# The operations each resource type supports (AclEntry.supportedOperations): what
# authorized-operations bit fields are computed over.
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE, AclOperation.DELETE,
                         AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS),
    ResourceType.GROUP: (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE, AclOperation.DESCRIBE_CONFIGS,
                         AclOperation.ALTER_CONFIGS),
    ResourceType.CLUSTER: (AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS,
                           AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER, AclOperation.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.DESCRIBE, AclOperation.WRITE),
    ResourceType.DELEGATION_TOKEN: (AclOperation.DESCRIBE,),
    ResourceType.USER: (AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS),
}

# ALLOW ACLs for these operations also allow DESCRIBE (resp. DESCRIBE_CONFIGS); DENY ACLs imply nothing.
_IMPLIES_DESCRIBE = frozenset({AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE, AclOperation.ALTER})
_IMPLIES_DESCRIBE_CONFIGS = frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS})


def operations_bit_field(ops: Iterable[AclOperation]) -> int:
    """``Utils.to32BitField`` of operation codes (as the authorized-operations fields carry them)."""
    field = 0
    for op in ops:
        field |= 1 << int(op)
    return field


class AclBinding(NamedTuple):
    """A resource pattern and an access control entry (Kafka's AclBinding, StandardAcl)."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def __str__(self) -> str:
        return (f"(pattern=ResourcePattern(resourceType={self.resource_type.name}, name={self.resource_name}, "
                f"patternType={self.pattern_type.name}), entry=(principal={self.principal}, host={self.host}, "
                f"operation={self.operation.name}, permissionType={self.permission_type.name}))")

    def to_json(self) -> dict[str, str]:
        return {
            "resource_type": self.resource_type.name, "resource_name": self.resource_name,
            "pattern_type": self.pattern_type.name, "principal": self.principal, "host": self.host,
            "operation": self.operation.name, "permission_type": self.permission_type.name,
        }

    @classmethod
    def from_json(cls, item: Any) -> AclBinding:
        if not isinstance(item, dict):
            raise ValueError(f"not an ACL: {item!r}")
        try:
            binding = cls(
                ResourceType[item["resource_type"]], _str(item["resource_name"]), PatternType[item["pattern_type"]],
                _str(item["principal"]), _str(item["host"]), AclOperation[item["operation"]],
                AclPermissionType[item["permission_type"]],
            )
        except KeyError as e:
            raise ValueError(f"bad ACL {item!r}: {e}") from None
        problem = validate_new_acl(binding)
        if problem is not None:
            raise ValueError(f"bad ACL {item!r}: {problem}")
        return binding


def _str(v: Any) -> str:
    if not isinstance(v, str):
        raise KeyError(f"{v!r} is not a string")
    return v


def _utf16(s: str) -> bytes:
    """A key that orders strings as Java's ``String.compareTo`` (UTF-16 code units)."""
    return s.encode("utf-16-be", "surrogatepass")


def display_order(a: AclBinding) -> tuple[Any, ...]:
    """How ACLs are listed: by resource type, name, pattern type, then principal, host,
    operation and permission (Java string order)."""
    return (a.resource_type, _utf16(a.resource_name), a.pattern_type, _utf16(a.principal), _utf16(a.host),
            a.operation, a.permission_type)


def validate_new_acl(b: AclBinding) -> str | None:
    """AclControlManager.validateNewAcl: why an ACL cannot be created (INVALID_REQUEST), or None."""
    if b.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return f"Invalid resourceType {b.resource_type.name}"
    if b.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"Invalid patternType {b.pattern_type.name}"
    if b.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        return f"Invalid operation {b.operation.name}"
    if b.permission_type not in (AclPermissionType.DENY, AclPermissionType.ALLOW):
        return f"Invalid permissionType {b.permission_type.name}"
    if not b.resource_name:
        return "Resource name should not be empty"
    if ":" not in b.principal:
        return f"Could not parse principal from `{b.principal}` (no colon is present separating the principal type from the principal name)"
    return None


@dataclass(frozen=True)
class AclBindingFilter:
    """Kafka's AclBindingFilter (ResourcePatternFilter + AccessControlEntryFilter): None names,
    principals and hosts match anything; ANY types match any type; a MATCH pattern type matches
    the patterns that would apply to the named resource (the literal name, ``*``, prefixes)."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    def pattern_unknown(self) -> bool:
        return self.resource_type == ResourceType.UNKNOWN or self.pattern_type == PatternType.UNKNOWN

    def entry_unknown(self) -> bool:
        return self.operation == AclOperation.UNKNOWN or self.permission_type == AclPermissionType.UNKNOWN

    def matches(self, b: AclBinding) -> bool:
        return self._pattern_matches(b) and self._entry_matches(b)

    def _pattern_matches(self, b: AclBinding) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != b.resource_type:
            return False
        pt = self.pattern_type
        if pt not in (PatternType.ANY, PatternType.MATCH) and pt != b.pattern_type:
            return False
        name = self.resource_name
        if name is None:
            return True
        if pt == PatternType.ANY or pt == b.pattern_type:
            return name == b.resource_name
        # MATCH
        if b.pattern_type == PatternType.LITERAL:
            return name == b.resource_name or b.resource_name == WILDCARD
        if b.pattern_type == PatternType.PREFIXED:
            return name.startswith(b.resource_name)
        return False

    def _entry_matches(self, b: AclBinding) -> bool:
        if self.principal is not None and self.principal != b.principal:
            return False
        if self.host is not None and self.host != b.host:
            return False
        if self.operation != AclOperation.ANY and self.operation != b.operation:
            return False
        return self.permission_type == AclPermissionType.ANY or self.permission_type == b.permission_type


ANY_FILTER = AclBindingFilter()


def java_host_address(host: str) -> str:
    """The client address as Java's ``InetAddress.getHostAddress`` prints it (what ACL hosts are
    compared with): IPv4 dotted; an IPv4-mapped IPv6 address as IPv4; other IPv6 addresses in
    full, without zero compression or leading zeros (``0:0:0:0:0:0:0:1``)."""
    bare, _, scope = host.partition("%")
    try:
        addr = ipaddress.ip_address(bare)
    except ValueError:
        return host
    if isinstance(addr, ipaddress.IPv6Address):
        if addr.ipv4_mapped is not None:
            return str(addr.ipv4_mapped)
        text = ":".join(part.lstrip("0") or "0" for part in addr.exploded.split(":"))
        return f"{text}%{scope}" if scope else text
    return str(addr)


@dataclass(frozen=True)
class Decision:
    """An authorization answer and the rule that gave it (as Kafka's audit log names it)."""

    allowed: bool
    rule: str  # "SuperUser", "DefaultAllow", "DefaultDeny", "MatchingAcl(acl=...)"


_SUPER_USER = Decision(True, "SuperUser")
_DEFAULT_DENY = Decision(False, "DefaultDeny")


class AclCache:
    """The ACLs in force, indexed for ``authorize``; changed only through ``add``/``remove``."""

    def __init__(self, acls: Iterable[AclBinding] = ()) -> None:
        self._acls: set[AclBinding] = set()
        # (resource type, name) -> LITERAL ACLs; resource type -> {prefix: PREFIXED ACLs}
        self._literal: dict[tuple[ResourceType, str], list[AclBinding]] = {}
        self._prefixed: dict[ResourceType, dict[str, list[AclBinding]]] = {}
        for acl in acls:
            self.add(acl)

    def __len__(self) -> int:
        return len(self._acls)

    def __contains__(self, acl: object) -> bool:
        return acl in self._acls

    def add(self, acl: AclBinding) -> bool:
        """Add an ACL; False if it was there already (Kafka keeps one copy of equal ACLs)."""
        if acl in self._acls:
            return False
        self._acls.add(acl)
        if acl.pattern_type == PatternType.PREFIXED:
            self._prefixed.setdefault(acl.resource_type, {}).setdefault(acl.resource_name, []).append(acl)
        else:
            self._literal.setdefault((acl.resource_type, acl.resource_name), []).append(acl)
        return True

    def remove(self, acl: AclBinding) -> None:
        if acl not in self._acls:
            return
        self._acls.discard(acl)
        if acl.pattern_type == PatternType.PREFIXED:
            by_name = self._prefixed[acl.resource_type]
            by_name[acl.resource_name].remove(acl)
            if not by_name[acl.resource_name]:
                del by_name[acl.resource_name]
            if not by_name:
                del self._prefixed[acl.resource_type]
        else:
            key = (acl.resource_type, acl.resource_name)
            self._literal[key].remove(acl)
            if not self._literal[key]:
                del self._literal[key]

    def sorted(self) -> list[AclBinding]:
        """Every ACL, in ``display_order``."""
        return sorted(self._acls, key=display_order)

    def acls(self, flt: AclBindingFilter) -> list[AclBinding]:
        """The ACLs a filter matches (Kafka's AclCache.acls), in ``display_order`` (Kafka answers
        in the order of Java hash maps keyed by enums, which changes from run to run)."""
        return sorted((a for a in self._acls if flt.matches(a)), key=display_order)

    def _resource_acls(self, rtype: ResourceType, name: str) -> list[AclBinding]:
        """The ACLs whose resource pattern applies to this resource (whoever they are for)."""
        found = list(self._literal.get((rtype, name), ()))
        if name != WILDCARD:
            found += self._literal.get((rtype, WILDCARD), ())
        prefixed = self._prefixed.get(rtype)
        if prefixed:
            if len(prefixed) < len(name):
                for prefix, acls in prefixed.items():
                    if name.startswith(prefix):
                        found += acls
            else:
                for i in range(1, len(name) + 1):
                    found += prefixed.get(name[:i], ())
        return found

    def find_rule(self, principal: str, host: str, op: AclOperation, rtype: ResourceType, name: str,
                  allow_if_no_acl: bool) -> Decision:
        """StandardAuthorizerData.findAclRule for a LITERAL resource (super users are the caller's)."""
        matching = self._resource_acls(rtype, name)
        if not matching:
            return Decision(True, "DefaultAllow") if allow_if_no_acl else _DEFAULT_DENY
        allow: AclBinding | None = None
        for acl in matching:
            result = _acl_result(acl, principal, host, op)
            if result is None:
                continue
            if result is AclPermissionType.DENY:
                return Decision(False, f"MatchingAcl(acl={_standard_acl_str(acl)})")
            allow = allow or acl
        if allow is not None:
            return Decision(True, f"MatchingAcl(acl={_standard_acl_str(allow)})")
        return _DEFAULT_DENY

    def authorize_by_resource_type(self, principal: str, host: str, op: AclOperation, rtype: ResourceType) -> bool:
        """The Authorizer interface's default ``authorizeByResourceType`` after its "hardcode"
        probe: whether some ALLOW ACL for the principal could let it do ``op`` on some resource of
        the type, no DENY dominating it (a wildcard DENY denies, a wildcard ALLOW allows, a
        LITERAL ALLOW not denied by the same LITERAL name nor a PREFIXED DENY of a prefix allows,
        a PREFIXED ALLOW not denied by a PREFIXED DENY of a prefix allows)."""
        deny_literal: set[str] = set()
        deny_prefixed: set[str] = set()
        allow_literal: set[str] = set()
        allow_prefixed: set[str] = set()
        wildcard_allow = False
        for acl in self.acls(AclBindingFilter(resource_type=rtype)):
            if acl.host != host and acl.host != WILDCARD:
                continue
            if acl.principal != principal and acl.principal != WILDCARD_PRINCIPAL:
                continue
            if acl.operation != op and acl.operation != AclOperation.ALL:
                continue
            if acl.permission_type == AclPermissionType.DENY:
                if acl.pattern_type == PatternType.LITERAL:
                    if acl.resource_name == WILDCARD:
                        return False
                    deny_literal.add(acl.resource_name)
                elif acl.pattern_type == PatternType.PREFIXED:
                    deny_prefixed.add(acl.resource_name)
                continue
            if acl.permission_type != AclPermissionType.ALLOW:
                continue
            if acl.pattern_type == PatternType.LITERAL:
                if acl.resource_name == WILDCARD:
                    wildcard_allow = True
                    continue
                allow_literal.add(acl.resource_name)
            elif acl.pattern_type == PatternType.PREFIXED:
                allow_prefixed.add(acl.resource_name)
        if wildcard_allow:
            return True
        for kind, names in ((PatternType.LITERAL, allow_literal), (PatternType.PREFIXED, allow_prefixed)):
            for name in names:
                if kind == PatternType.LITERAL and name in deny_literal:
                    continue
                if not any(name[:i] in deny_prefixed for i in range(1, len(name) + 1)):
                    return True
        return False


def _acl_result(acl: AclBinding, principal: str, host: str, op: AclOperation) -> AclPermissionType | None:
    """StandardAuthorizerData.findResult: the ACL's permission if it applies to this principal,
    host and operation, else None."""
    if acl.principal != principal and acl.principal != WILDCARD_PRINCIPAL:
        return None
    if acl.host != WILDCARD and acl.host != host:
        return None
    if acl.operation != AclOperation.ALL:
        if acl.permission_type == AclPermissionType.ALLOW:
            if op == AclOperation.DESCRIBE:
                if acl.operation not in _IMPLIES_DESCRIBE:
                    return None
            elif op == AclOperation.DESCRIBE_CONFIGS:
                if acl.operation not in _IMPLIES_DESCRIBE_CONFIGS:
                    return None
            elif op != acl.operation:
                return None
        elif op != acl.operation:
            return None
    return AclPermissionType.ALLOW if acl.permission_type == AclPermissionType.ALLOW else AclPermissionType.DENY


def _standard_acl_str(a: AclBinding) -> str:
    return (f"StandardAcl(resourceType={a.resource_type.name}, resourceName={a.resource_name}, "
            f"patternType={a.pattern_type.name}, principal={a.principal}, host={a.host}, "
            f"operation={a.operation.name}, permissionType={a.permission_type.name})")


def authorize(cache: AclCache, super_users: frozenset[str], allow_if_no_acl: bool, principal: str, host: str,
              op: AclOperation, rtype: ResourceType, name: str) -> Decision:
    """StandardAuthorizerData.authorize for one action on a LITERAL resource."""
    if principal in super_users:
        return _SUPER_USER
    return cache.find_rule(principal, host, op, rtype, name, allow_if_no_acl)


# ---- the ACL file -------------------------------------------------------------------------------


class AclFileError(Exception):
    """The ACL file (and its copy) cannot be read: the broker must not start without its ACLs."""


def parse_acls_file(text: str) -> list[AclBinding]:
    """The ACLs of an ACL file's text; ValueError if the file is damaged."""
    data = json.loads(text)
    if not isinstance(data, dict) or not isinstance(data.get("acls"), list):
        raise ValueError("not an ACL file")
    if data.get("version") != ACLS_FILE_VERSION:
        raise ValueError(f"unknown version {data.get('version')!r}")
    if data.get("crc32") != checkpoint.json_checksum(data["acls"]):
        raise ValueError("checksum mismatch")
    return [AclBinding.from_json(item) for item in data["acls"]]


class AclFile:
    """``sidecar-acls.json`` in the data dir, and its copy ``sidecar-acls.json.bak``."""

    def __init__(self, data_dir: Path) -> None:
        self.path = Path(data_dir) / ACLS_FILE
        self.backup = checkpoint.backup_path(self.path)

    def exists(self) -> bool:
        return self.path.exists() or self.backup.exists()

    def load(self) -> list[AclBinding]:
        """The stored ACLs (none if there is no file). The copy is used if the file is damaged or
        missing; if both are damaged, AclFileError (starting without the ACLs could open access:
        DENY ACLs would be gone)."""
        acls, problems = checkpoint.read_with_copy(self.path, parse_acls_file, "ACLs")
        if acls is not None:
            return acls
        if problems:
            raise AclFileError(
                f"cannot read the ACLs ({'; '.join(problems)}): fix {self.path} or remove it and its copy "
                f"(every ACL is then gone) before starting with an authorizer"
            )
        return []

    def save(self, acls: Iterable[AclBinding]) -> None:
        """Replace the file (tmp + fsync + rename + dir fsync), then its copy. OSError if the file
        cannot be written (the old one is left as it was)."""
        items = [a.to_json() for a in sorted(acls, key=display_order)]
        os.makedirs(self.path.parent, exist_ok=True)
        checkpoint.write_with_copy(self.path, {"version": ACLS_FILE_VERSION, "acls": items, "crc32": checkpoint.json_checksum(items)})
