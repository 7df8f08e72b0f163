"""The iteration order of Java's HashMap, which Kafka's quota answers come out in.

Kafka answers DescribeClientQuotas and AlterClientQuotas from HashMaps (ClientQuotasImage's
entities, ClientQuotaImage's values, the controller's results), so their order is the maps'
bucket order: ``(hash ^ hash >>> 16) & (capacity - 1)``, insertion order within a bucket. The
capacity depends on how the map was built and grown, which is simulated here (no treeification:
it needs 8 entries in one bucket).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

T = TypeVar("T")

_MASK = 0xFFFFFFFF


def string_hash(s: str | None) -> int:
    """String.hashCode as an unsigned 32-bit int; null hashes to 0 (Objects.hashCode)."""
    if s is None:
        return 0
    data = s.encode("utf-16-be", "surrogatepass")  # Java hashes UTF-16 code units
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & _MASK
    return h


def entity_hash(entity: Iterable[tuple[str, str | None]]) -> int:
    """ClientQuotaEntity.hashCode: Objects.hash(entries), a map's hash being the sum of key ^ value."""
    total = 0
    for k, v in entity:
        total = (total + (string_hash(k) ^ string_hash(v))) & _MASK
    return (31 + total) & _MASK


def table_size_for(cap: int) -> int:
    """HashMap.tableSizeFor: the power of two at least ``cap`` (1 for 0)."""
    n = 1
    while n < cap:
        n <<= 1
    return n


def capacity(n: int, initial: int | None = None) -> int:
    """The table size after ``n`` puts into ``new HashMap<>()`` (initial None) or ``new HashMap<>(initial)``."""
    if initial is None:
        cap, thr = 16, 12
    else:
        cap = table_size_for(initial)
        thr = int(cap * 0.75)
    for size in range(1, n + 1):
        if size > thr:
            old = cap
            cap <<= 1
            thr = thr << 1 if old >= 16 else int(cap * 0.75)
    return cap


def hashmap_order(items: list[T], hash_of: Callable[[T], int], initial: int | None = None) -> list[T]:
    """``items`` (distinct, in insertion order) in the order a HashMap holding them iterates."""
    mask = capacity(len(items), initial) - 1

    def bucket(i_item: tuple[int, T]) -> tuple[int, int]:
        h = hash_of(i_item[1])
        return (h ^ (h >> 16)) & mask, i_item[0]

    return [item for _, item in sorted(enumerate(items), key=bucket)]
