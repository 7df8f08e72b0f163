"""ClusterAdmin: the cluster-wide admin state of ``serve --processes N`` kept in step on every node.

ACLs, client quotas (with the ip connection quotas), SCRAM users, finalized features, dynamic
broker configs and group configs are, in Kafka, records of the KRaft metadata log that every broker replays. Here
they are records of the same ``cluster-metadata.log`` as the topics (``metadata_log.py``), one
module per concept saying what its records are and how a node applies them: ``acl_records.py``,
``quota_records.py``, ``scram_records.py``, ``feature_records.py``, ``config_records.py``,
``group_config_records.py`` (group configs).

A change, through whichever node, is made in that node's turn of the log (``change``): on the
storage thread the turn is taken and the records other nodes appended are read; on the event loop
they are applied, then the handler's ``build`` checks the request against that state and returns
the records of the change (and its answer); back on the storage thread they are appended and
fsynced, and the turn ends; on the loop they are applied. So the change is in the log before the
answer, and a second node's change is checked against the first's, as the controller orders them.

Every other node applies it when it next catches up (``topics.py``: before any request but
Produce and Fetch, every ``POLL_INTERVAL_S``): an ACL created through node 1 is enforced by node
2, a SCRAM user made through node 2 can log in on node 1, a quota set through node 1 throttles on
node 2. Records are applied on the event loop only, so the loop's readers (the authorizer, the
quota managers, the SASL lookups) never see a half-made change. At start the node's state is what
the log says (the log is the truth; the one-process files ``sidecar-acls.json`` ... are not
written in this mode).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from . import (
    acl_records,
    config_records,
    feature_records,
    group_config_records,
    quota_records,
    scram_records,
)
from .metadata_log import Record

if TYPE_CHECKING:
    from ..services import BrokerServices
    from .topics import ClusterTopics

log = logging.getLogger(__name__)

T = TypeVar("T")
# How long the storage thread holding the log's turn waits for the loop's ``build``.
BUILD_TIMEOUT_S = 30.0

# op -> how a node applies the record (on the event loop).
APPLY: dict[str, Callable[[BrokerServices, Record], None]] = {
    **acl_records.APPLY, **quota_records.APPLY, **scram_records.APPLY, **feature_records.APPLY, **config_records.APPLY,
    **group_config_records.APPLY,
}


class ClusterAdmin:
    def __init__(self, topics: ClusterTopics) -> None:
        self.topics = topics  # its turn; the admin records it read wait in ``topics.others``

    def apply_others(self, services: BrokerServices) -> None:
        """Apply, in the log's order, the admin records read so far (on the loop)."""
        others = self.topics.others
        while others:
            record = others.pop(0)
            apply = APPLY.get(record["op"])
            if apply is None:
                log.warning("cluster metadata record of unknown kind %r ignored", record["op"])
                continue
            try:
                apply(services, record)
            except Exception:  # a record this node cannot apply must not stop it following the log
                log.exception("cannot apply cluster metadata record %r", record)

    async def change(self, services: BrokerServices, build: Callable[[], tuple[list[Record], T]]) -> T:
        """Make a change in this node's turn of the log: ``build`` (run on the loop with every
        earlier record applied) returns (the records, the answer); the records are durable in the
        log and applied here before this returns the answer. ``build``'s exceptions propagate
        (nothing written); OSError if the log cannot be written (nothing applied)."""
        loop = asyncio.get_running_loop()

        async def on_loop() -> tuple[list[Record], T]:
            self.apply_others(services)
            return build()

        def in_turn() -> T:
            with self.topics.turn():
                records, answer = asyncio.run_coroutine_threadsafe(on_loop(), loop).result(BUILD_TIMEOUT_S)
                for record in records:
                    self.topics.log.append(record)
                    self.topics.others.append(record)  # applied after the turn, in the log's order
            return answer

        try:
            return await services.run_blocking(in_turn)
        finally:
            self.apply_others(services)
            self.topics.finish_deletions(services)
