"""Iteration orders of the Java collections Kafka's group coordinator keeps its state in.

Where Kafka answers in the order of a hash table (members of a group, groups of
a coordinator shard, shards of the coordinator runtime), the order depends on
the Java hash codes and the table's growth history. These classes reproduce it,
so answers list members and groups in the order Kafka lists them:

- ``JavaHashMap``: ``java.util.HashMap`` (group members, protocol votes, requests grouped by partition).
- ``chm_order``: ``java.util.concurrent.ConcurrentHashMap`` keys (the runtime's shards).
- ``TimelineOrder``: Kafka's ``TimelineHashMap`` (``BaseHashTable``) keys (the groups of a shard).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, Generic, TypeVar

from .records import java_string_hash

K = TypeVar("K")
V = TypeVar("V")

_MASK64 = (1 << 64) - 1


def _spread(h: int) -> int:
    h &= 0xFFFFFFFF
    return h ^ (h >> 16)


class JavaHashMap(Generic[K, V]):
    """A dict that iterates in ``java.util.HashMap`` order for the same insertions.

    HashMap iterates by bucket (``spread(hashCode) & (capacity - 1)``), then by
    insertion order within a bucket; the capacity starts at 16, doubles when the
    size passes 3/4 of it and never shrinks.
    """

    def __init__(self, hasher: Callable[[Any], int] = java_string_hash) -> None:
        self._d: dict[K, V] = {}
        self._cap = 16
        self._hasher = hasher
        self._order: list[K] | None = None

    def __setitem__(self, key: K, value: V) -> None:
        if key not in self._d:
            self._order = None
            self._d[key] = value
            if len(self._d) > self._cap * 3 // 4:
                self._cap *= 2
        else:
            self._d[key] = value

    def __getitem__(self, key: K) -> V:
        return self._d[key]

    def __delitem__(self, key: K) -> None:
        del self._d[key]
        self._order = None

    def __contains__(self, key: object) -> bool:
        return key in self._d

    def __len__(self) -> int:
        return len(self._d)

    def get(self, key: K, default: V | None = None) -> V | None:
        return self._d.get(key, default)

    def pop(self, key: K, default: V | None = None) -> V | None:
        if key in self._d:
            self._order = None
        return self._d.pop(key, default)

    def keys(self) -> list[K]:
        if self._order is None:
            mask = self._cap - 1
            self._order = sorted(self._d, key=lambda k: _spread(self._hasher(k)) & mask)
        return list(self._order)

    def __iter__(self) -> Iterator[K]:
        return iter(self.keys())

    def values(self) -> list[V]:
        return [self._d[k] for k in self.keys()]

    def items(self) -> list[tuple[K, V]]:
        return [(k, self._d[k]) for k in self.keys()]


def chm_order(keys: Iterable[K], hasher: Callable[[K], int]) -> list[K]:
    """Keys in ``ConcurrentHashMap`` iteration order after inserting them (bins ascending).

    The table starts at 16 and doubles each time the count reaches 3/4 of it.
    Keys sharing a bin keep their insertion order (CHM can reorder colliding
    keys on resize; the coordinator's partition keys do not collide).
    """
    keys = list(keys)
    cap = 16
    while len(keys) >= cap - (cap >> 2):
        cap *= 2
    return sorted(keys, key=lambda k: (_spread(hasher(k)) & 0x7FFFFFFF) & (cap - 1))


def _find_slot(hash_code: int, num_elements: int) -> int:
    """Kafka's BaseHashTable.findSlot: Fibonacci hashing, top bits."""
    shift = 65 - num_elements.bit_length()
    return ((hash_code * -7046029254386353131) & _MASK64) >> shift


class TimelineOrder(Generic[K]):
    """The key order of a ``TimelineHashMap`` (Kafka's BaseHashTable) for the same adds and removes.

    Slots are a power-of-two array (initial 2, doubled before an add would
    pass a load of 3/4); colliding keys share a slot in arrival order; a table
    iterates slots ascending and each slot's keys last-first.
    """

    def __init__(self, hasher: Callable[[K], int] = java_string_hash) -> None:
        self._hasher = hasher
        self._slots: list[list[K]] = [[], []]
        self._size = 0

    def add(self, key: K) -> None:
        n = len(self._slots)
        slot = self._slots[_find_slot(self._hasher(key), n)]
        if key in slot:
            return
        if (self._size + 1) * 0.75 > n:
            self._rehash(n * 2)
            slot = self._slots[_find_slot(self._hasher(key), len(self._slots))]
        slot.append(key)
        self._size += 1

    def remove(self, key: K) -> None:
        slot = self._slots[_find_slot(self._hasher(key), len(self._slots))]
        if key in slot:
            slot.remove(key)
            self._size -= 1

    def _rehash(self, size: int) -> None:
        old = self._slots
        self._slots = [[] for _ in range(size)]
        for keys in old:
            for key in keys:
                self._slots[_find_slot(self._hasher(key), size)].append(key)

    def __iter__(self) -> Iterator[K]:
        for keys in self._slots:
            yield from reversed(keys)

    def __len__(self) -> int:
        return self._size
