"""ACLs in the cluster metadata log (Kafka's AccessControlEntryRecord / RemoveAccessControlEntryRecord).

``{"op": "acl", "acl": {...}}`` adds an ACL, ``{"op": "remove_acl", "acl": {...}}`` removes one
(the binding as ``sidecar-acls.json`` spells it); every node applies them to its authorizer's
ACL cache, so an ACL made through one node is enforced by all (``admin.py``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..security.acls import AclBinding
from ..security.authorizer import StandardAuthorizer
from .metadata_log import Record

if TYPE_CHECKING:
    from ..services import BrokerServices


def created(acls: Iterable[AclBinding], current: StandardAuthorizer) -> list[Record]:
    """The records of a CreateAcls: the ACLs not there yet (an existing one is a success)."""
    return [{"op": "acl", "acl": a.to_json()} for a in dict.fromkeys(acls) if a not in current.cache]


def removed(acls: Iterable[AclBinding]) -> list[Record]:
    return [{"op": "remove_acl", "acl": a.to_json()} for a in dict.fromkeys(acls)]


def _apply(services: BrokerServices, record: Record) -> None:
    az = services.authorizer
    if not isinstance(az, StandardAuthorizer):  # no authorizer here: ACLs are not enforced (as the others)
        return
    acl = AclBinding.from_json(record["acl"])
    if record["op"] == "acl":
        az.apply(add=[acl])
    else:
        az.apply(remove=[acl])


APPLY = {"acl": _apply, "remove_acl": _apply}
