"""TransactionCoordinator: transactional ids, their producer ids and epochs, and the two-phase
commit of transactions (Kafka's TransactionCoordinator + TransactionStateManager, TV0/TV1).

This broker is the coordinator of every transactional id. The state of each id is a record in
the compacted internal topic ``__transaction_state`` (Kafka's format, server/transactions/
records.py), written before a request that changes it is answered, and replayed at start:
transactions caught in PrepareCommit/PrepareAbort are completed then by writing their markers
again. EndTxn persists PrepareCommit/PrepareAbort, writes the transaction markers to each
partition of the transaction (through the ReplicaManager, server/replica_manager.py; for ``__consumer_offsets``
partitions the group coordinator then publishes or drops the transactional offsets), then
persists CompleteCommit/CompleteAbort.

Kafka's transaction version 2 (KIP-890 part 2: an epoch bump per transaction, implicit
AddPartitionsToTxn) is not offered: ApiVersions finalizes no ``transaction.version`` feature,
so the Java client and librdkafka run the classic protocol (TV1), which this class follows.
Everything runs on the event loop; the state-changing paths do not await between their checks
and their writes, so no two changes of one transactional id interleave.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kafka_sidecar.protocol import errors
from kafka_sidecar.storage.log_config import validate_topic_configs

from ..coordinator.runtime import coordinator_runtime
from ..groups.records import OFFSETS_TOPIC
from .records import (
    TRANSACTION_STATE_TOPIC,
    decode_key,
    decode_value,
    key_bytes,
    transaction_partition_for,
    value_bytes,
)
from .state import (
    CONCURRENT_TRANSACTIONS,
    EXPIRABLE,
    INVALID_PRODUCER_ID_MAPPING,
    INVALID_TRANSACTION_TIMEOUT,
    INVALID_TXN_STATE,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    PRODUCER_FENCED,
    TRANSACTION_ABORTABLE,
    TRANSACTIONAL_ID_NOT_FOUND,
    TransactionMetadata,
    TransactionState,
)

if TYPE_CHECKING:
    from ..broker import Broker

log = logging.getLogger(__name__)

S = TransactionState
COORDINATOR_EPOCH = 0  # one broker, never a new leader of a __transaction_state partition


class TransactionCoordinator:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        cfg = broker.config
        self.configured_partitions: int = cfg.get("transaction.state.log.num.partitions")
        self.num_partitions = self.configured_partitions
        self.segment_bytes: int = cfg.get("transaction.state.log.segment.bytes")
        self.max_timeout_ms: int = cfg.get("transaction.max.timeout.ms")
        self.id_expiration_ms: int = cfg.get("transactional.id.expiration.ms")
        self.transactions: dict[str, TransactionMetadata] = {}
        self.runtime = coordinator_runtime(broker)  # appends, durability, clock (server/coordinator/runtime.py)
        self.active = False
        self._topic_lock: asyncio.Lock | None = None

    # ---- lifecycle ---------------------------------------------------------------------

    async def start(self) -> None:
        """Replay ``__transaction_state`` and complete the transactions left in Prepare*."""
        info = self.broker.metadata.topics.get(TRANSACTION_STATE_TOPIC)
        if info is not None:
            self.num_partitions = info.partitions
            count = await self.broker.run_blocking(self._load_all, info.partitions)
            log.info("loaded %d transactional ids from %d records of %s", len(self.transactions), count, TRANSACTION_STATE_TOPIC)
        self.active = True
        for m in list(self.transactions.values()):
            if m.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                log.info("completing transaction %s left in %s", m.transactional_id, m.state.state_name)
                self._complete(m, m.state == S.PREPARE_COMMIT)

    def shutdown(self) -> None:
        self.active = False

    def _load_all(self, partitions: int) -> int:
        lm = self.broker.log_manager

        def apply(_offset: int, _pid: int, _epoch: int, key: bytes | None, value: bytes | None, marker: int | None) -> bool:
            if marker is not None or key is None:
                return False
            tid = decode_key(key)
            if tid is not None:
                if value is None:
                    self.transactions.pop(tid, None)
                else:
                    self.transactions[tid] = decode_value(tid, value)
            return True

        return self.runtime.load([lg for p in range(partitions) if (lg := lm.get_log(TRANSACTION_STATE_TOPIC, p)) is not None], apply)

    async def ensure_topic(self) -> None:
        """Create ``__transaction_state`` on first use, with Kafka's topic configs."""
        lm = self.broker.log_manager
        if TRANSACTION_STATE_TOPIC in self.broker.metadata.topics:
            return
        if self._topic_lock is None:
            self._topic_lock = asyncio.Lock()
        async with self._topic_lock:
            if TRANSACTION_STATE_TOPIC in self.broker.metadata.topics:
                return
            configs = validate_topic_configs({
                "cleanup.policy": "compact",
                "compression.type": "uncompressed",
                "segment.bytes": str(self.segment_bytes),
                "unclean.leader.election.enable": "false",
            })
            self.num_partitions = self.configured_partitions
            await self.broker.run_blocking(lm.create_topic, TRANSACTION_STATE_TOPIC, self.num_partitions, configs)

    # ---- persistence -------------------------------------------------------------------

    def partition_for(self, transactional_id: str) -> int:
        return transaction_partition_for(transactional_id, self.num_partitions)

    def not_coordinator(self, transactional_id: str) -> bool:
        """``serve --processes N``: another node leads the id's ``__transaction_state`` partition,
        so this one answers NOT_COORDINATOR (Kafka's TransactionStateManager: not an owned partition)."""
        cluster = getattr(self.broker, "cluster", None)  # None in unit tests' FakeBroker
        return cluster is not None and cluster.placement.leader(TRANSACTION_STATE_TOPIC, self.partition_for(transactional_id)) != cluster.node_id

    def _persist(self, m: TransactionMetadata, replay: Callable[[], None] | None = None, tombstone: bool = False) -> int:
        """Write the state of ``m`` (or its tombstone) to its __transaction_state partition through
        the coordinator runtime; ``replay`` makes it current once the append succeeded (Kafka's
        completeTransitionTo). Any failure is NOT_COORDINATOR, as Kafka maps a failed append here."""
        record = (key_bytes(m.transactional_id), None if tombstone else value_bytes(m))
        error = self.runtime.write(TRANSACTION_STATE_TOPIC, self.partition_for(m.transactional_id), [record],
                                   lambda _k, _v, _o: replay and replay(), not_available=errors.NOT_COORDINATOR)
        return errors.NONE if error == errors.NONE else errors.NOT_COORDINATOR

    def _transition(self, m: TransactionMetadata, new: TransactionMetadata) -> int:
        """Persist ``new`` (a changed copy of ``m``), which becomes current only once written:
        a failed append leaves ``m`` current and unchanged."""
        m.check_transition(new.state)
        m.pending_state = new.state
        try:
            return self._persist(new, lambda: self.transactions.__setitem__(m.transactional_id, new))
        finally:
            m.pending_state = None

    # ---- InitProducerId ------------------------------------------------------------------

    async def init_producer_id(self, transactional_id: str, txn_timeout_ms: int,
                               expected_pid: int = NO_PRODUCER_ID, expected_epoch: int = NO_PRODUCER_EPOCH) -> tuple[int, int, int]:
        """(error, producer id, epoch): Kafka's handleInitProducerId for a transactional id."""
        if not transactional_id:
            return errors.INVALID_REQUEST, -1, -1
        if not 0 < txn_timeout_ms <= self.max_timeout_ms:
            return INVALID_TRANSACTION_TIMEOUT, -1, -1
        if not self.active:
            return errors.COORDINATOR_LOAD_IN_PROGRESS, -1, -1
        if self.not_coordinator(transactional_id):
            return errors.NOT_COORDINATOR, -1, -1
        await self.ensure_topic()
        if transactional_id not in self.transactions:
            pid = await self.broker.run_blocking(self.broker.producer_ids.allocate)
            if transactional_id not in self.transactions:
                self.transactions[transactional_id] = TransactionMetadata(
                    transactional_id, pid, NO_PRODUCER_EPOCH, txn_timeout_ms, S.EMPTY,
                    txn_last_update_timestamp=self.runtime.clock.now_ms())
        m = self.transactions[transactional_id]
        if m.pending_transition_in_progress:
            return CONCURRENT_TRANSACTIONS, -1, -1
        if expected_pid != NO_PRODUCER_ID and not self._is_valid_producer_id(m, expected_pid, expected_epoch):
            return PRODUCER_FENCED, -1, -1
        if m.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT, S.PREPARE_EPOCH_FENCE, S.DEAD):
            return CONCURRENT_TRANSACTIONS, -1, -1
        if m.state == S.ONGOING:
            # Fence the current producer (epoch + 1) and abort its transaction; the client retries.
            error = self._fence_and_abort(m)
            return (error or CONCURRENT_TRANSACTIONS), -1, -1
        # Empty, CompleteCommit, CompleteAbort: a new epoch (or a new producer id when exhausted).
        new = m.copy()
        now = self.runtime.clock.now_ms()
        if expected_pid != NO_PRODUCER_ID and expected_pid == m.producer_id and expected_epoch == m.last_producer_epoch \
                and m.producer_epoch != NO_PRODUCER_EPOCH and expected_epoch != m.producer_epoch:
            # A retry of an InitProducerId whose answer was lost (KIP-360): the epoch already given.
            return errors.NONE, m.producer_id, m.producer_epoch
        if m.is_producer_epoch_exhausted:
            pid = await self.broker.run_blocking(self.broker.producer_ids.allocate)
            if self.transactions.get(transactional_id) is not m or m.pending_transition_in_progress:
                return CONCURRENT_TRANSACTIONS, -1, -1
            new.previous_producer_id = m.producer_id
            new.producer_id = pid
            new.producer_epoch = 0
            new.last_producer_epoch = NO_PRODUCER_EPOCH
        else:
            new.last_producer_epoch = m.producer_epoch
            new.producer_epoch = m.producer_epoch + 1
        new.state = S.EMPTY
        new.txn_timeout_ms = txn_timeout_ms
        new.topic_partitions = set()
        new.txn_start_timestamp = -1
        new.txn_last_update_timestamp = now
        error = self._transition(m, new)
        if error:
            return error, -1, -1
        log.info("initialized transactional id %s: producer id %d epoch %d", transactional_id, new.producer_id, new.producer_epoch)
        return errors.NONE, new.producer_id, new.producer_epoch

    @staticmethod
    def _is_valid_producer_id(m: TransactionMetadata, pid: int, epoch: int) -> bool:
        """Kafka's isValidProducerId (KIP-360): metadata just created (no epoch yet), the current
        producer id with its current or last epoch (a retry), or the previous producer id with an
        exhausted epoch (a retry after the id was rotated)."""
        if m.producer_epoch == NO_PRODUCER_EPOCH:
            return True
        if pid == m.producer_id:
            return epoch in (m.producer_epoch, m.last_producer_epoch, NO_PRODUCER_EPOCH)
        return pid == m.previous_producer_id and epoch >= 32766

    def _fence_and_abort(self, m: TransactionMetadata) -> int:
        """PrepareEpochFence then abort (Kafka's prepareFenceProducerEpoch + endTransaction(ABORT))."""
        m.check_transition(S.PREPARE_EPOCH_FENCE)
        fenced = m.copy()
        if m.producer_epoch < 32767:
            fenced.producer_epoch = m.producer_epoch + 1
        fenced.last_producer_epoch = NO_PRODUCER_EPOCH
        fenced.state = S.PREPARE_EPOCH_FENCE
        # The fence is not current until its PrepareAbort is written: a failed append leaves m.
        return self._end(fenced, commit=False)

    # ---- AddPartitionsToTxn, AddOffsetsToTxn ---------------------------------------------

    def _check_producer(self, m: TransactionMetadata | None, pid: int, epoch: int) -> int:
        if m is None or m.producer_id != pid:
            return INVALID_PRODUCER_ID_MAPPING
        if m.producer_epoch != epoch:
            return PRODUCER_FENCED
        if m.pending_transition_in_progress:
            return CONCURRENT_TRANSACTIONS
        return errors.NONE

    def add_partitions(self, transactional_id: str, pid: int, epoch: int, partitions: list[tuple[str, int]]) -> int:
        """Kafka's handleAddPartitionsToTransaction (TV1): one error for all the partitions."""
        if not self.active:
            return errors.COORDINATOR_LOAD_IN_PROGRESS
        if self.not_coordinator(transactional_id):
            return errors.NOT_COORDINATOR
        m = self.transactions.get(transactional_id)
        error = self._check_producer(m, pid, epoch)
        if error:
            return error
        assert m is not None
        if m.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return CONCURRENT_TRANSACTIONS
        if m.state in (S.DEAD, S.PREPARE_EPOCH_FENCE):
            return INVALID_TXN_STATE
        if m.state == S.ONGOING and set(partitions) <= m.topic_partitions:
            return errors.NONE
        new = m.copy()
        now = self.runtime.clock.now_ms()
        if m.state != S.ONGOING:
            new.topic_partitions = set()
            new.txn_start_timestamp = now
        new.topic_partitions |= set(partitions)
        new.state = S.ONGOING
        new.txn_last_update_timestamp = now
        return self._transition(m, new)

    def verify_partition(self, transactional_id: str, pid: int, epoch: int, topic: str, partition: int) -> int:
        """AddPartitionsToTxn v4+ verify_only (Kafka's handleVerifyPartitionsInTransaction): is the
        partition part of the transaction? For the produce path's verification (KIP-890 part 1)."""
        if not self.active:
            return errors.COORDINATOR_LOAD_IN_PROGRESS
        if self.not_coordinator(transactional_id):
            return errors.NOT_COORDINATOR
        m = self.transactions.get(transactional_id)
        if m is None or m.producer_id != pid:
            return INVALID_PRODUCER_ID_MAPPING
        if m.producer_epoch != epoch:
            return PRODUCER_FENCED
        if m.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return CONCURRENT_TRANSACTIONS
        return errors.NONE if (topic, partition) in m.topic_partitions else TRANSACTION_ABORTABLE

    # ---- EndTxn ----------------------------------------------------------------------------

    def end_transaction(self, transactional_id: str, pid: int, epoch: int, commit: bool) -> int:
        """Kafka's handleEndTransaction (TV1, from a client)."""
        if not self.active:
            return errors.COORDINATOR_LOAD_IN_PROGRESS
        if self.not_coordinator(transactional_id):
            return errors.NOT_COORDINATOR
        m = self.transactions.get(transactional_id)
        error = self._check_producer(m, pid, epoch)
        if error:
            return error
        assert m is not None
        state = m.state
        if state == S.ONGOING:
            return self._end(m, commit)
        if state == S.COMPLETE_COMMIT:
            return errors.NONE if commit else INVALID_TXN_STATE
        if state == S.COMPLETE_ABORT:
            return INVALID_TXN_STATE if commit else errors.NONE
        if state == S.PREPARE_COMMIT:
            return CONCURRENT_TRANSACTIONS if commit else INVALID_TXN_STATE
        if state == S.PREPARE_ABORT:
            return INVALID_TXN_STATE if commit else CONCURRENT_TRANSACTIONS
        return INVALID_TXN_STATE  # Empty, Dead, PrepareEpochFence

    def _end(self, m: TransactionMetadata, commit: bool) -> int:
        """Persist PrepareCommit/PrepareAbort, write the markers, persist CompleteCommit/CompleteAbort."""
        prepare = m.copy()
        prepare.state = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
        prepare.txn_last_update_timestamp = self.runtime.clock.now_ms()
        error = self._transition(m, prepare)
        if error:
            return error
        self._complete(self.transactions[m.transactional_id], commit)
        return errors.NONE

    def _complete(self, m: TransactionMetadata, commit: bool) -> None:
        remote = self._write_markers(m, commit)
        if remote:
            # Partitions led by other nodes of the cluster: their markers go there by WriteTxnMarkers
            # (server/cluster/txn_markers.py); the transaction completes once every one is written.
            self.broker.cluster.markers.send(m, commit, remote, self._finish_later)
            return
        self._finish(m, commit)

    def _finish_later(self, m: TransactionMetadata, commit: bool) -> None:
        """The other nodes wrote their markers: complete the transaction as it is now, in a write
        scope of its own (the request that ended it was answered long ago)."""
        current = self.transactions.get(m.transactional_id)
        if current is not None and current.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT) and current.producer_id == m.producer_id:
            self.runtime.run_in_scope(lambda: self._finish(current, commit), f"completion of transaction {m.transactional_id}")

    def _finish(self, m: TransactionMetadata, commit: bool) -> None:
        """Every marker written: persist CompleteCommit/CompleteAbort."""
        done = m.copy()
        done.state = S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT
        done.topic_partitions = set()  # Kafka's prepareComplete: the partitions are done with
        done.txn_last_update_timestamp = self.runtime.clock.now_ms()
        error = self._transition(m, done)
        if error:
            log.error("cannot write the completion of transaction %s: %s (completed again at the next start)",
                      m.transactional_id, error)
        else:
            log.debug("%s transaction %s (producer id %d epoch %d, %d partitions)", "committed" if commit else "aborted",
                     m.transactional_id, m.producer_id, m.producer_epoch, len(m.topic_partitions))

    def _write_markers(self, m: TransactionMetadata, commit: bool) -> list[tuple[str, int]]:
        """Write the markers of the partitions this broker leads; returns those another node of
        the cluster leads (their markers are sent there)."""
        writer = self.broker.replica_manager
        offsets_partitions: list[int] = []
        remote: list[tuple[str, int]] = []
        for topic, partition in sorted(m.topic_partitions):
            lg = writer.get_log(topic, partition)
            if lg is None and writer.missing_log_error(topic, partition) == errors.NOT_LEADER_OR_FOLLOWER:
                remote.append((topic, partition))
                continue
            if lg is None:
                log.info("no marker for %s-%d of transaction %s: the partition is gone", topic, partition, m.transactional_id)
                continue
            try:
                writer.append_transaction_marker(lg, m.producer_id, m.producer_epoch, COORDINATOR_EPOCH, commit)
                self.runtime.touch(topic, partition)  # the answer waits for the marker's flush, if any
            except Exception:
                log.exception("cannot write the %s marker of transaction %s to %s-%d",
                              "commit" if commit else "abort", m.transactional_id, topic, partition)
                continue
            if topic == OFFSETS_TOPIC:
                offsets_partitions.append(partition)
        gc = self.broker.group_coordinator
        for partition in offsets_partitions:
            gc.complete_transaction(m.producer_id, commit, partition)
        return remote

    # ---- timeouts and expiration -----------------------------------------------------------

    def abort_timed_out_transactions(self, now: int | None = None) -> int:
        """Kafka's abortTimedOutTransactions: fence the producer and abort."""
        if not self.active:
            return 0
        now = self.runtime.clock.now_ms() if now is None else now
        aborted = 0
        for m in list(self.transactions.values()):
            if m.state == S.ONGOING and not m.pending_transition_in_progress and m.txn_start_timestamp + m.txn_timeout_ms < now:
                log.info("aborting transaction %s (producer id %d epoch %d): it timed out after %d ms",
                         m.transactional_id, m.producer_id, m.producer_epoch, m.txn_timeout_ms)
                if self._fence_and_abort(m) == errors.NONE:
                    aborted += 1
        return aborted

    def expire_transactional_ids(self, now: int | None = None) -> int:
        """Kafka's removeExpiredTransactionalIds: tombstones for ids idle past transactional.id.expiration.ms."""
        if not self.active:
            return 0
        now = self.runtime.clock.now_ms() if now is None else now
        expired = 0
        for tid, m in list(self.transactions.items()):
            if m.state in EXPIRABLE and not m.pending_transition_in_progress \
                    and m.txn_last_update_timestamp + self.id_expiration_ms <= now:
                m.check_transition(S.DEAD)
                if self._persist(m, functools.partial(self.transactions.pop, tid, None), tombstone=True) == errors.NONE:
                    expired += 1
        if expired:
            log.info("expired %d transactional ids", expired)
        return expired

    async def periodic(self) -> None:
        self.abort_timed_out_transactions()

    async def periodic_expiration(self) -> None:
        self.expire_transactional_ids()

    # ---- ListTransactions, DescribeTransactions ----------------------------------------------

    def list_transactions(self, state_filters: list[str], pid_filters: list[int], duration_ms: int = -1,
                          pattern: str | None = None) -> tuple[int, list[str], list[dict[str, Any]]]:
        """(error, unknown state filters, [transaction states])."""
        if not self.active:
            return errors.COORDINATOR_LOAD_IN_PROGRESS, [], []
        unknown = [s for s in state_filters if TransactionState.from_name(s) is None]
        states = {TransactionState.from_name(s) for s in state_filters} - {None}
        regex = None
        if pattern:
            try:
                regex = re.compile(pattern)
            except re.error:  # Kafka's ListTransactions v2 (KIP-1152): INVALID_REGULAR_EXPRESSION
                return errors.INVALID_REGULAR_EXPRESSION, [], []
        now = self.runtime.clock.now_ms()
        out = []
        for tid, m in self.transactions.items():
            if m.state == S.DEAD or (state_filters and m.state not in states):
                continue
            if pid_filters and m.producer_id not in pid_filters:
                continue
            if duration_ms >= 0 and now - m.txn_start_timestamp <= duration_ms:
                continue
            if regex is not None and not regex.fullmatch(tid):
                continue
            out.append({"transactional_id": tid, "producer_id": m.producer_id, "transaction_state": m.state.state_name})
        return errors.NONE, unknown, out

    def describe(self, transactional_id: str) -> dict[str, Any]:
        m = self.transactions.get(transactional_id) if self.active else None
        if m is None or self.not_coordinator(transactional_id):
            # Kafka leaves the other fields at their defaults (0).
            error = TRANSACTIONAL_ID_NOT_FOUND if self.active else errors.COORDINATOR_NOT_AVAILABLE
            if self.active and self.not_coordinator(transactional_id):
                error = errors.NOT_COORDINATOR
            return {"error_code": error,
                    "transactional_id": transactional_id, "transaction_state": "", "transaction_timeout": 0,
                    "transaction_start_time": 0, "producer_id": 0, "producer_epoch": 0, "topics": []}
        return {
            "error_code": errors.NONE, "transactional_id": transactional_id, "transaction_state": m.state.state_name,
            "transaction_timeout": m.txn_timeout_ms, "transaction_start_time": m.txn_start_timestamp,
            "producer_id": m.producer_id, "producer_epoch": m.producer_epoch,
            "topics": [{"topic": t, "partitions": ps} for t, ps in m.partitions_by_topic().items()],
        }
