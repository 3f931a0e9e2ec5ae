"""The sparse offset index of one segment: a few (offset, file position) pairs.

A read for offset N starts at the last indexed batch at or below N and walks
batch headers from there, so the index only needs an entry every
`interval_bytes` of log. Entries are 8 bytes on disk: the offset relative to
the segment's base offset and the byte position, both uint32 (segments are
capped well below 4 GiB). The index is a cache: it is checked against the
segment on every open and rewritten when it differs, so it is never fsync'd.
"""

from __future__ import annotations

import struct
from bisect import bisect_right
from collections.abc import Iterable

_ENTRY = struct.Struct(">II")
ENTRY_SIZE = _ENTRY.size


def should_index(position: int, last_indexed_position: int, interval_bytes: int) -> bool:
    """The one rule for where entries go, shared by appends and rebuilds so a
    rebuilt index is byte-identical to one written incrementally."""
    return position > 0 and position - last_indexed_position >= interval_bytes


class OffsetIndex:
    def __init__(
        self,
        base_offset: int,
        interval_bytes: int,
        entries: Iterable[tuple[int, int]] = (),
    ) -> None:
        self.base_offset = base_offset
        self.interval_bytes = interval_bytes
        self._offsets: list[int] = []
        self._positions: list[int] = []
        for offset, position in entries:
            self._offsets.append(offset)
            self._positions.append(position)
        self._written = len(self._offsets)  # entries already in the index file

    @property
    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._offsets, self._positions, strict=True))

    def on_batch(self, base_offset: int, position: int) -> None:
        """Called for every batch appended, in order."""
        last = self._positions[-1] if self._positions else 0
        if should_index(position, last, self.interval_bytes):
            self._offsets.append(base_offset)
            self._positions.append(position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """The last indexed (batch base offset, position) at or below `offset`."""
        i = bisect_right(self._offsets, offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self._offsets[i], self._positions[i]

    def truncate_to_position(self, position: int) -> None:
        """Forget entries for batches at or after `position` (they were cut)."""
        keep = bisect_right(self._positions, position - 1)
        del self._offsets[keep:]
        del self._positions[keep:]
        self._written = min(self._written, keep)

    def encode(self) -> bytes:
        return self._encode(0)

    def take_unwritten(self) -> bytes:
        """Encoded entries added since the last call, to append to the file."""
        data = self._encode(self._written)
        self._written = len(self._offsets)
        return data

    def mark_written(self) -> None:
        self._written = len(self._offsets)

    def _encode(self, start: int) -> bytes:
        return b"".join(
            _ENTRY.pack(self._offsets[i] - self.base_offset, self._positions[i])
            for i in range(start, len(self._offsets))
        )
