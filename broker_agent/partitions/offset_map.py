"""The cleaner's key -> last offset map in a fixed amount of memory (Kafka's
SkimpyOffsetMap): `log.cleaner.dedupe.buffer.size` bytes of 24-byte slots, each
a key's 16-byte MD5 digest and the last offset seen for it, open addressing with
linear probing. It counts as full at `log.cleaner.io.buffer.load.factor` (0.9)
of its slots; the cleaner then cleans what it mapped so far and maps the rest of
the dirty range in the next pass. Two keys with the same digest would share an
entry, as in Kafka (the chance is negligible for MD5's 128 bits).
"""

from __future__ import annotations

import hashlib
import struct

DIGEST_BYTES = 16
SLOT_BYTES = DIGEST_BYTES + 8
KAFKA_DEFAULT_DEDUPE_BUFFER_SIZE = 128 * 1024 * 1024
KAFKA_DEFAULT_LOAD_FACTOR = 0.9
_EMPTY = bytes(DIGEST_BYTES)
_OFFSET = struct.Struct(">q")


class OffsetMap:
    def __init__(self, memory_bytes: int, load_factor: float = KAFKA_DEFAULT_LOAD_FACTOR) -> None:
        self.slots = memory_bytes // SLOT_BYTES
        if self.slots < 1:
            raise ValueError(f"a dedupe buffer of {memory_bytes} bytes holds no entry")
        self.max_entries = max(1, int(self.slots * load_factor))
        self._table = bytearray(self.slots * SLOT_BYTES)
        self._view = memoryview(self._table)
        self.size = 0
        self.latest_offset = -1
        self.lookups = 0
        self.probes = 0

    @property
    def memory_bytes(self) -> int:
        return len(self._table)

    @property
    def full(self) -> bool:
        return self.size >= self.max_entries

    def clear(self) -> None:
        self._table[:] = bytes(len(self._table))
        self.size = 0
        self.latest_offset = -1

    def put(self, key: bytes, offset: int) -> None:
        """Record `offset` as the last one of `key` (offsets come in increasing order)."""
        digest = _digest(key)
        position = self._find(digest)
        view = self._view
        if view[position : position + DIGEST_BYTES] == _EMPTY:
            if self.full:
                raise OverflowError("offset map is full")
            view[position : position + DIGEST_BYTES] = digest
            self.size += 1
        _OFFSET.pack_into(self._table, position + DIGEST_BYTES, offset)
        self.latest_offset = max(self.latest_offset, offset)

    def get(self, key: bytes) -> int:
        """The last offset mapped for `key`, -1 when it is not in the map."""
        digest = _digest(key)
        position = self._find(digest)
        if self._view[position : position + DIGEST_BYTES] == _EMPTY:
            return -1
        return int(_OFFSET.unpack_from(self._table, position + DIGEST_BYTES)[0])

    def _find(self, digest: bytes) -> int:
        """The slot holding `digest`, or the empty slot where it would go."""
        self.lookups += 1
        slot = int.from_bytes(digest[:8], "big") % self.slots
        view = self._view
        while True:
            self.probes += 1
            position = slot * SLOT_BYTES
            stored = view[position : position + DIGEST_BYTES]
            if stored in (digest, _EMPTY):
                return position
            slot = (slot + 1) % self.slots


def _digest(key: bytes) -> bytes:
    digest = hashlib.md5(key, usedforsecurity=False).digest()
    # The all-zero digest marks an empty slot; a key hashing to it gets another.
    return digest if digest != _EMPTY else b"\x00" * 15 + b"\x01"
