"""The transfer archive: one flat byte stream per snapshot, served in chunks.

A lagging follower fetches `(snapshot id, position, max_bytes)` chunks of this
stream (KIP-630's FetchSnapshot) and rebuilds its own RocksDB database from it.
The stream is a logical encoding of the records, not a copy of RocksDB's files:
it is deterministic (two leaders with the same snapshot serve the same bytes),
independent of RocksDB's version and options, and checkable before anything
is installed.

    header (44 bytes, big-endian)
      magic          8   b"KQSNAP\\x00\\x01"
      end_offset     8   int64
      epoch          8   int64
      record_count   8   int64
      data_bytes     8   int64
      header_crc     4   CRC32C of the 40 bytes before it
    records, in key order, framed as in records.py:
      uint32 key length | key | uint32 value length | value
    trailer (16 bytes)
      magic          4   b"KQND"
      record_count   8   int64, must equal the header's
      checksum       4   CRC32C of the records section (= the manifest checksum)
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import BinaryIO

import google_crc32c

from quorum.raft.records import SnapshotId
from snapshots.errors import SnapshotCorruptionError
from snapshots.records import Record, RecordChecksum

MAGIC = b"KQSNAP\x00\x01"
TRAILER_MAGIC = b"KQND"
_HEADER = struct.Struct(">8sqqqqI")
_TRAILER = struct.Struct(">4sqI")
_LENGTH = struct.Struct(">I")
HEADER_SIZE = _HEADER.size
TRAILER_SIZE = _TRAILER.size
READ_BLOCK = 4 * 1024 * 1024
WRITE_RECORDS = 10_000


@dataclass(frozen=True, slots=True)
class ArchiveHeader:
    snapshot_id: SnapshotId
    record_count: int
    data_bytes: int


def archive_size(record_count: int, data_bytes: int) -> int:
    return HEADER_SIZE + data_bytes + 8 * record_count + TRAILER_SIZE


def write_archive(
    out: BinaryIO, header: ArchiveHeader, records: Iterable[Record]
) -> RecordChecksum:
    """Stream `records` (already in key order) into `out`; returns their checksum.

    The caller compares it with the manifest before serving the archive.
    """
    out.write(archive_header(header))
    checksum = RecordChecksum()
    chunk: list[Record] = []
    for record in records:
        chunk.append(record)
        if len(chunk) == WRITE_RECORDS:
            out.write(checksum.update(chunk))
            chunk = []
    if chunk:
        out.write(checksum.update(chunk))
    out.write(archive_trailer(checksum))
    return checksum


def archive_header(header: ArchiveHeader) -> bytes:
    snapshot = header.snapshot_id
    prefix = _HEADER.pack(
        MAGIC, snapshot.end_offset, snapshot.epoch, header.record_count, header.data_bytes, 0
    )[:-4]
    return prefix + _LENGTH.pack(google_crc32c.value(prefix))


def archive_trailer(checksum: RecordChecksum) -> bytes:
    return _TRAILER.pack(TRAILER_MAGIC, checksum.count, checksum.value)


def read_archive(
    source: BinaryIO, size: int, name: str, *, read_block: int = READ_BLOCK
) -> tuple[ArchiveHeader, int, Iterator[Record]]:
    """Parse the archive in the seekable `source` of `size` bytes: its header,
    the checksum its trailer promises, and its records.

    The iterator raises SnapshotCorruptionError (naming `name`) on a framing
    error and, after the last record, when the records do not match the
    trailer's checksum. Consumers must not install anything before it is
    exhausted.
    """
    if size < HEADER_SIZE + TRAILER_SIZE:
        raise SnapshotCorruptionError(name, f"archive of {size} bytes is too short", position=0)
    source.seek(0)
    raw = source.read(HEADER_SIZE)
    magic, end_offset, epoch, count, data_bytes, header_crc = _HEADER.unpack(raw)
    if magic != MAGIC or google_crc32c.value(raw[:-4]) != header_crc:
        raise SnapshotCorruptionError(name, "bad archive header", position=0)
    if min(end_offset, epoch, count, data_bytes) < 0 or archive_size(count, data_bytes) != size:
        raise SnapshotCorruptionError(
            name, f"archive header does not describe a {size}-byte archive", position=0
        )
    trailer_at = size - TRAILER_SIZE
    source.seek(trailer_at)
    trailer_magic, trailer_count, trailer_checksum = _TRAILER.unpack(source.read(TRAILER_SIZE))
    if trailer_magic != TRAILER_MAGIC or trailer_count != count:
        raise SnapshotCorruptionError(name, "bad archive trailer", position=trailer_at)
    source.seek(HEADER_SIZE)
    header = ArchiveHeader(SnapshotId(end_offset, epoch), count, data_bytes)
    parser = _RecordParser(source.read, name, HEADER_SIZE, trailer_at, read_block)

    def checked() -> Iterator[Record]:
        yield from parser.records(count)
        if parser.position != trailer_at:
            raise SnapshotCorruptionError(
                name, "records do not end where the trailer starts", position=parser.position
            )
        if parser.checksum != trailer_checksum:
            raise SnapshotCorruptionError(
                name,
                f"archive records have checksum {parser.checksum:#010x}, "
                f"trailer says {trailer_checksum:#010x}",
            )

    return header, trailer_checksum, checked()


class _RecordParser:
    """Pulls framed records out of a stream read in large blocks."""

    def __init__(
        self, read: Callable[[int], bytes], name: str, position: int, limit: int, block: int
    ) -> None:
        self._read = read
        self._block = block
        self._limit = limit  # records must end before this stream position
        self._name = name
        self._buffer = b""
        self._at = 0
        self._crc_from = 0  # buffer position up to which the checksum is computed
        self._base = position  # stream position of buffer[0]
        self._checksumming = True
        self.checksum = 0

    @property
    def position(self) -> int:
        return self._base + self._at

    def records(self, count: int) -> Iterator[Record]:
        unpack = _LENGTH.unpack_from
        for _ in range(count):
            # Each _ensure may move the buffer: positions are taken after the last one.
            self._ensure(4)
            (key_length,) = unpack(self._buffer, self._at)
            self._ensure(8 + key_length)
            (value_length,) = unpack(self._buffer, self._at + 4 + key_length)
            self._ensure(8 + key_length + value_length)
            buffer, key_start = self._buffer, self._at + 4
            value_start = key_start + key_length + 4
            self._at = value_start + value_length
            yield buffer[key_start : value_start - 4], buffer[value_start : self._at]
        self._close_checksum()

    def _ensure(self, size: int) -> None:
        if self.position + size > self._limit:
            raise SnapshotCorruptionError(
                self._name, "record runs into the archive trailer", position=self.position
            )
        while len(self._buffer) - self._at < size:
            block = self._read(max(self._block, size))
            if not block:
                raise SnapshotCorruptionError(
                    self._name, "archive ends in the middle of a record", position=self.position
                )
            self._extend_checksum()
            self._base += self._at
            self._buffer = self._buffer[self._at :] + block
            self._at = 0
            self._crc_from = 0

    def _extend_checksum(self) -> None:
        if self._checksumming and self._at > self._crc_from:
            self.checksum = google_crc32c.extend(
                self.checksum, self._buffer[self._crc_from : self._at]
            )
        self._crc_from = self._at

    def _close_checksum(self) -> None:
        self._extend_checksum()
        self._checksumming = False
