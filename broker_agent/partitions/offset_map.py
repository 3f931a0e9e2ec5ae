"""The cleaner's key -> last offset map in a bounded amount of memory.

Kafka's SkimpyOffsetMap packs 24-byte slots (an MD5 digest and an offset) into
`log.cleaner.dedupe.buffer.size` bytes. Probing such a table from Python cost
more than parsing the records (a digest and a probe loop per record, twice per
record cleaned), so this map is a dict, whose lookups run in C, and the buffer
size bounds it by what its entries really cost: `ENTRY_BYTES` per key (the
dict's slot, the key's bytes object of at most `MAX_KEY_BYTES`, the offset's
int; measured with tracemalloc, dict growth included). A longer key is stored
as its 16-byte MD5 digest, as Kafka stores every key; two keys with the same
digest would share an entry, as in Kafka (negligible for 128 bits). The map
counts as full at `log.cleaner.io.buffer.load.factor` (0.9) of its capacity;
the cleaner then cleans what it mapped and maps the rest in the next pass.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

ENTRY_BYTES = 176
MAX_KEY_BYTES = 32
KAFKA_DEFAULT_DEDUPE_BUFFER_SIZE = 128 * 1024 * 1024
KAFKA_DEFAULT_LOAD_FACTOR = 0.9


class OffsetMap:
    def __init__(self, memory_bytes: int, load_factor: float = KAFKA_DEFAULT_LOAD_FACTOR) -> None:
        self.slots = memory_bytes // ENTRY_BYTES
        if self.slots < 1:
            raise ValueError(f"a dedupe buffer of {memory_bytes} bytes holds no entry")
        self.max_entries = max(1, int(self.slots * load_factor))
        self._offsets: dict[bytes, int] = {}
        self.latest_offset = -1

    @property
    def memory_bytes(self) -> int:
        return self.slots * ENTRY_BYTES

    @property
    def size(self) -> int:
        return len(self._offsets)

    @property
    def full(self) -> bool:
        return len(self._offsets) >= self.max_entries

    def clear(self) -> None:
        self._offsets.clear()
        self.latest_offset = -1

    def put(self, key: bytes, offset: int) -> None:
        """Record `offset` as the last one of `key` (offsets come in increasing order)."""
        stored = key if len(key) <= MAX_KEY_BYTES else _digest(key)
        if stored not in self._offsets and self.full:
            raise OverflowError("offset map is full")
        self._offsets[stored] = offset
        self.latest_offset = max(self.latest_offset, offset)

    def new_keys(self, keys: Sequence[bytes | None]) -> int:
        """How many entries `keys` (one batch's; None for keyless records) would
        add: its distinct keys, counted exactly only when the map is near full."""
        distinct = set(keys)
        distinct.discard(None)
        if len(self._offsets) + len(distinct) <= self.max_entries:
            return len(distinct)
        return sum(1 for k in distinct if self.get(k) < 0)  # type: ignore[arg-type]

    def put_all(self, keys: Sequence[bytes], offsets: Sequence[int]) -> None:
        """`put` for one batch's keyed records, in offset order; the caller checked
        that `len(keys)` more entries fit (`size + len(keys) <= max_entries`)."""
        if not keys:
            return
        self._offsets.update(
            zip(
                [k if len(k) <= MAX_KEY_BYTES else _digest(k) for k in keys],
                offsets,
                strict=True,
            )
        )
        self.latest_offset = max(self.latest_offset, offsets[-1])

    def sorted_offsets(self) -> list[int]:
        """Every offset the map holds (each key's last), in increasing order."""
        return sorted(self._offsets.values())

    def get(self, key: bytes) -> int:
        """The last offset mapped for `key`, -1 when it is not in the map."""
        return self._offsets.get(key if len(key) <= MAX_KEY_BYTES else _digest(key), -1)


def _digest(key: bytes) -> bytes:
    return hashlib.md5(key, usedforsecurity=False).digest()
