"""Kafka's SkimpyOffsetMap: key -> last offset in a fixed-size hash array (24 bytes a slot).

The cleaner's memory for deduplication is ``log.cleaner.dedupe.buffer.size`` (split between
the cleaner threads), not a function of the number of keys: the map is two flat arrays
sized once, ``memory // 24`` slots of a 16-byte digest and an 8-byte offset, filled up to
``slots x log.cleaner.io.buffer.load.factor`` entries with open addressing (linear probing).
No Python object is kept per key.

Digests: Kafka keys every entry by the MD5 of the key. A key shorter than 16 bytes is stored
as itself here (zero-padded, its length in the last byte): no hashing, which is most of a
lookup's cost in Python, and no possible collision between two short keys. An entry's kind
(short key or MD5) is kept in the sign of its stored offset, so a short key can never be
mistaken for a digest equal to its padded bytes.
"""

from __future__ import annotations

import hashlib
import mmap

BYTES_PER_ENTRY = 24  # 16-byte digest + 8-byte offset, as Kafka's SkimpyOffsetMap
DIGEST_SIZE = 16
# Keys shorter than this are their own map entry; longer ones are replaced by their MD5.
SHORT_KEY = 16

_md5 = hashlib.md5
# A short key's padding: zeros up to 15 bytes, then its length.
_SHORT_PADS = [bytes(DIGEST_SIZE - 1 - n) + bytes((n,)) for n in range(SHORT_KEY)]
# Probing: the first attempts go to pseudo-random slots (a 64-bit LCG over the key's hash), as
# Kafka's probes use successive windows of the MD5; then linear, which always ends (a slot is
# always free). Random probing keeps chains short at a 0.9 load, where linear clusters badly.
_RANDOM_PROBES = 8
_LCG_MUL = 6364136223846793005
_LCG_ADD = 1442695040888963407
_MASK64 = (1 << 64) - 1


class SkimpyOffsetMap:
    """key digest -> last offset, with Kafka's capacity rule (memory / 24 slots x load factor).

    Stored offset values: 0 = empty slot, ``offset + 1`` for an MD5-keyed entry,
    ``-(offset + 1)`` for a short key stored as itself.
    """

    def __init__(self, memory: int, load_factor: float = 0.9) -> None:
        self.memory = memory
        self.load_factor = load_factor
        self.capacity = max(2, memory // BYTES_PER_ENTRY)  # hash slots (one always stays free)
        # Kafka: the map is full at (slots x load factor) entries.
        self.slots = max(1, min(self.capacity - 1, int(self.capacity * load_factor)))
        self.latest_offset = -1
        self.entries = 0
        self.lookups = 0
        self.probes = 0
        self._allocate()

    def _allocate(self) -> None:
        # Anonymous mappings: zero pages the OS provides lazily, so only the slots used count
        # in the RSS, and allocating (or clearing) a 128 MiB map costs nothing.
        self._digest_area = mmap.mmap(-1, self.capacity * DIGEST_SIZE)
        self._offset_area = mmap.mmap(-1, self.capacity * 8)
        self._digests = self._digest_area
        self._offsets = memoryview(self._offset_area).cast("q")

    def _release(self) -> None:
        self._offsets.release()
        self._offset_area.close()
        self._digest_area.close()

    @staticmethod
    def digest(key: bytes) -> bytes:
        return key if len(key) < SHORT_KEY else _md5(key).digest()

    def put(self, key: bytes, offset: int) -> None:
        """Set ``key``'s last offset (a new entry or an update)."""
        if len(key) < SHORT_KEY:
            d = key + _SHORT_PADS[len(key)]
            tag = -(offset + 1)
        else:
            d = _md5(key).digest()
            tag = offset + 1
        capacity = self.capacity
        offsets = self._offsets
        digests = self._digests
        h = hash(d) & _MASK64
        i = h % capacity
        short = tag < 0
        probes = 1
        while True:
            v = offsets[i]
            if v == 0:
                if self.entries >= self.slots:
                    raise OverflowError("the offset map is full")
                p = i * DIGEST_SIZE
                digests[p : p + DIGEST_SIZE] = d
                offsets[i] = tag
                self.entries += 1
                break
            if (v < 0) == short:
                p = i * DIGEST_SIZE
                if digests[p : p + DIGEST_SIZE] == d:
                    offsets[i] = tag
                    break
            if probes < _RANDOM_PROBES:
                h = (h * _LCG_MUL + _LCG_ADD) & _MASK64
                i = (h >> 16) % capacity
            else:
                i += 1
                if i == capacity:
                    i = 0
            probes += 1
        self.lookups += 1
        self.probes += probes

    def get(self, key: bytes) -> int:
        """``key``'s last offset, -1 if not in the map."""
        if len(key) < SHORT_KEY:
            d = key + _SHORT_PADS[len(key)]
            short = True
        else:
            d = _md5(key).digest()
            short = False
        capacity = self.capacity
        offsets = self._offsets
        digests = self._digests
        h = hash(d) & _MASK64
        i = h % capacity
        probes = 1
        while True:
            v = offsets[i]
            if v == 0:
                return -1
            if (v < 0) == short:
                p = i * DIGEST_SIZE
                if digests[p : p + DIGEST_SIZE] == d:
                    return -v - 1 if short else v - 1
            if probes < _RANDOM_PROBES:
                h = (h * _LCG_MUL + _LCG_ADD) & _MASK64
                i = (h >> 16) % capacity
            else:
                i += 1
                if i == capacity:
                    i = 0
            probes += 1

    @property
    def size(self) -> int:
        return self.entries

    @property
    def full(self) -> bool:
        return self.entries >= self.slots

    @property
    def utilization(self) -> float:
        """Kafka's OffsetMap.utilization: entries / slots of the hash array."""
        return self.entries / self.capacity

    @property
    def allocated_bytes(self) -> int:
        """Bytes of the backing arrays (24 per slot)."""
        return len(self._digest_area) + len(self._offset_area)

    def clear(self) -> None:
        """Empty the map. The arrays are allocated afresh (zeroed lazily by the OS) rather than
        overwritten, so clearing a large, mostly unused map costs nothing."""
        if self.entries:
            self._release()
            self._allocate()
        self.entries = 0
        self.latest_offset = -1
        self.lookups = 0
        self.probes = 0
