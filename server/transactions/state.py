"""Transaction state: Kafka's ``TransactionState`` machine and ``TransactionMetadata``.

States and their ids (the ``TransactionStatus`` byte of ``__transaction_state`` values) are
Kafka's: Empty 0, Ongoing 1, PrepareCommit 2, PrepareAbort 3, CompleteCommit 4,
CompleteAbort 5, Dead 6, PrepareEpochFence 7. ``VALID_PREVIOUS_STATES`` is Kafka's
``TransactionState.validPreviousStates``: a transition from any other state is a bug and
raises ``IllegalTransition``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

# Kafka's error codes of the transaction APIs, used by this package's modules through this one.
from kafka_sidecar.protocol.errors import (  # noqa: F401 (re-exported)
    CONCURRENT_TRANSACTIONS,
    INVALID_PRODUCER_EPOCH,
    INVALID_PRODUCER_ID_MAPPING,
    INVALID_TRANSACTION_TIMEOUT,
    INVALID_TXN_STATE,
    OPERATION_NOT_ATTEMPTED,
    PRODUCER_FENCED,
    TRANSACTION_ABORTABLE,
    TRANSACTION_COORDINATOR_FENCED,
    TRANSACTIONAL_ID_NOT_FOUND,
)

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 32767  # Short.MaxValue


class TransactionState(enum.Enum):
    EMPTY = (0, "Empty")
    ONGOING = (1, "Ongoing")
    PREPARE_COMMIT = (2, "PrepareCommit")
    PREPARE_ABORT = (3, "PrepareAbort")
    COMPLETE_COMMIT = (4, "CompleteCommit")
    COMPLETE_ABORT = (5, "CompleteAbort")
    DEAD = (6, "Dead")
    PREPARE_EPOCH_FENCE = (7, "PrepareEpochFence")

    @property
    def id(self) -> int:
        return self.value[0]

    @property
    def state_name(self) -> str:
        return self.value[1]

    @classmethod
    def from_id(cls, state_id: int) -> TransactionState:
        for s in cls:
            if s.id == state_id:
                return s
        raise ValueError(f"unknown transaction state id {state_id}")

    @classmethod
    def from_name(cls, name: str) -> TransactionState | None:
        for s in cls:
            if s.state_name == name:
                return s
        return None


S = TransactionState
VALID_PREVIOUS_STATES: dict[TransactionState, frozenset[TransactionState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}
COMPLETED = frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT})
# States a transactional id may expire in (transactional.id.expiration.ms): nothing in flight.
EXPIRABLE = COMPLETED


class IllegalTransition(RuntimeError):
    pass


@dataclass
class TransactionMetadata:
    """One transactional id (Kafka's TransactionMetadata; TV0/TV1 semantics)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState
    topic_partitions: set[tuple[str, int]] = field(default_factory=set)
    txn_start_timestamp: int = -1
    txn_last_update_timestamp: int = -1
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    previous_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    client_transaction_version: int = 0
    # Set while a state change is being written (Kafka's pendingState): requests answer CONCURRENT_TRANSACTIONS.
    pending_state: TransactionState | None = None

    @property
    def pending_transition_in_progress(self) -> bool:
        return self.pending_state is not None

    @property
    def is_producer_epoch_exhausted(self) -> bool:
        return self.producer_epoch >= MAX_EPOCH - 1

    def check_transition(self, to: TransactionState) -> None:
        if self.state not in VALID_PREVIOUS_STATES[to]:
            raise IllegalTransition(f"transactional id {self.transactional_id}: {self.state.state_name} -> {to.state_name}")

    def copy(self) -> TransactionMetadata:
        return TransactionMetadata(
            self.transactional_id, self.producer_id, self.producer_epoch, self.txn_timeout_ms, self.state,
            set(self.topic_partitions), self.txn_start_timestamp, self.txn_last_update_timestamp,
            self.last_producer_epoch, self.previous_producer_id, self.next_producer_id,
            self.client_transaction_version,
        )

    def partitions_by_topic(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for t, p in sorted(self.topic_partitions):
            out.setdefault(t, []).append(p)
        return out
