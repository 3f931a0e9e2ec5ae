"""Reading segment files batch by batch, checking every rule: the one reader.

Recovery (`scan.py`, when a log is opened), the offline tools (`quorumctl`'s
`data_dir.py`: dump, image, snapshot commands) and the log export
(`export_sources.py`) all read segments here, so a file is judged the same
way whoever reads it. The reader walks every batch, checking its header, its
CRC and that offsets and epochs follow on from the previous batch, and tells a
torn tail apart from corruption:

* torn (tail segment only; recovery cuts it, the offline readers report it and
  leave it out): the file ends inside a header or inside a batch whose header
  is valid; or the last batch fails its CRC; or everything from the bad batch
  to the end of the file is zero bytes (pages the file system allocated but
  never wrote before a power loss).
* corruption (`LogCorruptionError`, naming file, byte position and offset): a
  bad batch followed by anything but zeros, a header that fails its own
  checksum, a batch at an unexpected offset, any damage in a segment that is
  not the tail, a segment that does not start where the previous one ended.

A compacted log (`offset_gaps`) may skip offsets between batches and segments,
never go back. A process crash (kill -9) can only leave a prefix of a write on
disk, so it always produces the first kind.

The file is read a chunk at a time (a segment may be 1 GiB, and the offline
tools run beside a live node), never changed, and read with plain reads, not
mmap: a live node may truncate its tail while a tool reads it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Protocol

from quorum.log.batch_format import (
    HEADER_SIZE,
    MAGIC_OPAQUE,
    BatchHeader,
    HeaderChecksumError,
    decode_batch,
    header_problem,
    parse_header,
    payload_crc_ok,
)
from quorum.log.errors import LogCorruptionError
from quorum.log.segment import parse_log_file_name
from quorum.raft.records import Batch

CHUNK_BYTES = 1 << 20


@dataclass(slots=True)
class BatchOnDisk:
    """One batch as read: its header, and its bytes at `at` in `buffer` (the header
    only when the reader skips payloads). Valid until the reader moves on."""

    position: int  # in the file
    header: BatchHeader
    buffer: bytes
    at: int

    def decode(self) -> Batch:
        return decode_batch(self.buffer, self.at, self.header)

    @property
    def opaque(self) -> bool:
        """A data-plane batch (magic 2): one Kafka record batch as produced."""
        return self.header.magic == MAGIC_OPAQUE

    def header_only(self) -> Batch:
        """The batch without its records: enough to learn offsets and epochs."""
        h = self.header
        return Batch(h.base_offset, h.epoch, (), h.append_time_ms, h.control)


class SegmentReader:
    """The batches of one segment file, in order, each checked before it is
    yielded; after the last, what the walk found (`torn_reason`, `valid_bytes`,
    `next_offset`, `last_epoch`, `file_size`).

    `payloads=False` reads headers only and skips the payload CRC: for callers
    that need offsets and epochs, not records."""

    def __init__(
        self,
        path: Path,
        base_offset: int,
        previous_epoch: int,
        *,
        is_tail: bool,
        offset_gaps: bool = False,
        payloads: bool = True,
    ) -> None:
        self.path = path
        self.base_offset = base_offset
        self.is_tail = is_tail
        self.offset_gaps = offset_gaps
        self.payloads = payloads
        self.next_offset = base_offset
        self.last_epoch = previous_epoch
        self.valid_bytes = 0  # where the last good batch ends; cut here if torn
        self.file_size = 0
        self.torn_reason: str | None = None

    def __iter__(self) -> Iterator[BatchOnDisk]:
        with self.path.open("rb") as f:
            self.file_size = os.fstat(f.fileno()).st_size
            yield from self._walk(_Window(f))
        if self.torn_reason is not None and not self.is_tail:
            raise self._fail(f"segment is not the last one but is torn ({self.torn_reason})")

    def _fail(self, detail: str) -> LogCorruptionError:
        return LogCorruptionError(
            self.path, detail, position=self.valid_bytes, offset=self.next_offset
        )

    def _walk(self, window: _Window) -> Iterator[BatchOnDisk]:
        # Locals and an inlined buffer check: recovery scans every batch of every
        # segment on open, so each attribute lookup here is paid per batch.
        size, payloads, gaps = self.file_size, self.payloads, self.offset_gaps
        position, expected, epoch = 0, self.next_offset, self.last_epoch
        buffer, start = b"", 0
        while position < size:
            if size - position < HEADER_SIZE:
                self.torn_reason = "file ends inside a batch header"
                return
            at = position - start
            if at + HEADER_SIZE > len(buffer):
                buffer, start = window.read(position, HEADER_SIZE)
                at = 0
            try:
                header = parse_header(buffer, at)
            except HeaderChecksumError as exc:
                if window.only_zeros_from(position):
                    self.torn_reason = "zero-filled tail"
                    return
                raise self._fail(str(exc)) from None
            problem = header_problem(header)
            if problem is not None:
                raise self._fail(problem)
            if header.base_offset != expected and not (gaps and header.base_offset > expected):
                raise self._fail(f"batch has base offset {header.base_offset}, expected {expected}")
            if header.epoch < epoch:
                raise self._fail(f"batch epoch {header.epoch} is below the previous epoch {epoch}")
            end = position + header.size
            if end > size:
                self.torn_reason = f"batch of {header.size} bytes runs past the end of the file"
                return
            if payloads:
                if at + header.size > len(buffer):
                    buffer, start = window.read(position, header.size)
                    at = 0
                if not payload_crc_ok(buffer, at, header):
                    if end == size or window.only_zeros_from(end):
                        self.torn_reason = "last batch fails its CRC"
                        return
                    raise self._fail("batch CRC mismatch")
            yield BatchOnDisk(position, header, buffer, at)
            epoch, expected, position = header.epoch, header.next_offset, end
            self.last_epoch, self.next_offset, self.valid_bytes = epoch, expected, end


class _Window:
    """A file's bytes a chunk at a time: a batch is parsed in place in the chunk
    that holds it, so a segment of small batches costs one read per chunk."""

    def __init__(self, f: BinaryIO) -> None:
        self._f = f

    def read(self, position: int, length: int) -> tuple[bytes, int]:
        """A buffer starting at `position` that holds at least `length` bytes (when
        the file has them), and the file position it starts at."""
        self._f.seek(position)
        return self._f.read(max(length, CHUNK_BYTES)), position

    def only_zeros_from(self, position: int) -> bool:
        self._f.seek(position)
        while chunk := self._f.read(CHUNK_BYTES):
            if chunk.strip(b"\x00"):
                return False
        return True


def segment_files(directory: Path) -> list[tuple[int, Path]]:
    """(base offset, path) of every segment under `directory`, in offset order."""
    return sorted(
        (base, directory / name)
        for name in os.listdir(directory)
        if (base := parse_log_file_name(name)) is not None
    )


class ReadSegment(Protocol):
    """A segment already read (a `SegmentReader` after its walk, or a recovery scan)."""

    @property
    def path(self) -> Path: ...
    @property
    def next_offset(self) -> int: ...


def check_follows(
    previous: ReadSegment | None, path: Path, base: int, offset_gaps: bool = False
) -> None:
    """A segment starts where the previous one ended (or past it, in a compacted log)."""
    if previous is None:
        return
    end = previous.next_offset
    if base < end or (base > end and not offset_gaps):
        raise LogCorruptionError(
            path,
            f"segment starts at offset {base} but {previous.path.name} ends at offset "
            f"{end}: a segment is missing or was cut",
            offset=base,
        )


def read_log(directory: Path, *, payloads: bool = True) -> Iterator[SegmentReader]:
    """Every segment of a (metadata) log directory in order, each a reader to
    iterate before the next is given; a torn tail is reported on the last one."""
    found = segment_files(directory)
    previous: SegmentReader | None = None
    epoch = -1
    for i, (base, path) in enumerate(found):
        check_follows(previous, path, base)
        reader = SegmentReader(path, base, epoch, is_tail=i == len(found) - 1, payloads=payloads)
        yield reader
        previous, epoch = reader, reader.last_epoch


__all__ = [
    "BatchOnDisk",
    "ReadSegment",
    "SegmentReader",
    "check_follows",
    "read_log",
    "segment_files",
]
