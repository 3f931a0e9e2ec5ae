"""The canonical order, framing and checksum of a snapshot's records.

A snapshot is a sorted set of (key, value) pairs. Its checksum is CRC32C over
the records in key order, each framed as

    uint32 key length | key | uint32 value length | value

so that moving a byte from a key to a value changes it. The same framing is
the record section of the transfer archive, so the archive's trailer checksum
and the manifest's checksum are one number.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from itertools import pairwise

import google_crc32c

Record = tuple[bytes, bytes]
_LENGTH = struct.Struct(">I")
_SHORT = 4096
_SHORT_LENGTHS = [_LENGTH.pack(n) for n in range(_SHORT)]  # most keys and values: no pack call


def sorted_records(records: Iterable[Record]) -> list[Record]:
    """Records in RocksDB's bytewise key order; duplicate keys are an error.

    Already-sorted input (an image that iterates in key order) costs one pass.
    """
    ordered = sorted(records)
    for previous, current in pairwise(ordered):
        if previous[0] == current[0]:
            raise ValueError(f"duplicate snapshot key {current[0]!r}")
    return ordered


def frame_records(records: Sequence[Record]) -> bytes:
    pack, short = _LENGTH.pack, _SHORT_LENGTHS
    parts: list[bytes] = []
    add = parts.extend
    for key, value in records:
        k, v = len(key), len(value)
        add((short[k] if k < _SHORT else pack(k), key, short[v] if v < _SHORT else pack(v), value))
    return b"".join(parts)


class RecordChecksum:
    """Running checksum, count and size of records fed to it in key order."""

    def __init__(self) -> None:
        self.value = 0
        self.count = 0
        self.data_bytes = 0

    def update(self, records: Sequence[Record]) -> bytes:
        """Feed the next records; returns their framing for callers that store it."""
        framed = frame_records(records)
        self.update_framed(framed, len(records))
        return framed

    def update_framed(self, framed: bytes, count: int) -> None:
        self.value = google_crc32c.extend(self.value, framed)
        self.count += count
        self.data_bytes += len(framed) - 8 * count
