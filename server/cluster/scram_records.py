"""SCRAM users in the cluster metadata log (Kafka's UserScramCredentialRecord /
RemoveUserScramCredentialRecord).

``{"op": "scram", "user", "mechanism", "credential": {salt, stored_key, server_key, iterations}}``
sets a user's credential (the salted form only, as ``sidecar-scram-credentials.json`` keeps it),
``{"op": "remove_scram", "user", "mechanism"}`` deletes it; every node's SASL/SCRAM login looks
them up, so a user made through one node logs in on all (``admin.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..security.credentials import ScramCredential
from .metadata_log import Record

if TYPE_CHECKING:
    from ..services import BrokerServices


def upserted(user: str, mechanism: str, credential: ScramCredential) -> Record:
    return {"op": "scram", "user": user, "mechanism": mechanism, "credential": credential.to_json()}


def deleted(user: str, mechanism: str) -> Record:
    return {"op": "remove_scram", "user": user, "mechanism": mechanism}


def _apply(services: BrokerServices, record: Record) -> None:
    store = services.scram_store
    if record["op"] == "scram":
        store.upsert(record["user"], record["mechanism"], ScramCredential.from_json(record["credential"]))
    else:
        store.delete(record["user"], record["mechanism"])


APPLY = {"scram": _apply, "remove_scram": _apply}
