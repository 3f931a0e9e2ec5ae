"""Validating one segment file on open, without changing it.

The scan walks every batch, checking its header, its CRC and that offsets and
epochs follow on from the previous batch. It tells a torn tail apart from
corruption:

* torn (tail segment only; cut by the caller): the file ends inside a header
  or inside a batch whose header is valid; or the last batch fails its CRC;
  or everything from the bad batch to the end of the file is zero bytes (pages
  the file system allocated but never wrote before a power loss).
* corruption (raised, naming file, byte position and offset): a bad batch
  followed by anything but zeros, a header that fails its own checksum, a
  batch at an unexpected offset, any damage in a segment that is not the tail.

A compacted log (`offset_gaps`) may skip offsets between batches, never go back.

A process crash (kill -9) can only leave a prefix of a write on disk, so it
always produces the first kind.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from quorum.log.batch_format import (
    HEADER_SIZE,
    HeaderChecksumError,
    header_problem,
    parse_header,
    payload_crc_ok,
)
from quorum.log.errors import LogCorruptionError
from quorum.log.offset_index import should_index


@dataclass(frozen=True, slots=True)
class SegmentScan:
    path: Path
    base_offset: int
    next_offset: int
    valid_bytes: int  # where the last good batch ends; the file is cut here if torn
    file_size: int
    torn_reason: str | None
    epoch_starts: tuple[tuple[int, int], ...]  # (epoch, first offset) where the epoch changes
    last_epoch: int
    index_entries: tuple[tuple[int, int], ...]
    last_append_time_ms: int

    @property
    def torn(self) -> bool:
        return self.valid_bytes < self.file_size


def scan_segment(
    path: Path,
    base_offset: int,
    previous_epoch: int,
    index_interval_bytes: int,
    *,
    is_tail: bool,
    offset_gaps: bool = False,
) -> SegmentScan:
    """`offset_gaps`: a batch may start past where the previous one ended (a
    compacted data-plane log), never before it."""
    data = path.read_bytes()
    size = len(data)
    position = 0
    expected = base_offset
    epoch = previous_epoch
    epoch_starts: list[tuple[int, int]] = []
    index: list[tuple[int, int]] = []
    last_indexed = 0
    last_append = -1
    torn: str | None = None

    def fail(detail: str) -> LogCorruptionError:
        return LogCorruptionError(path, detail, position=position, offset=expected)

    while position < size:
        if size - position < HEADER_SIZE:
            torn = "file ends inside a batch header"
            break
        try:
            header = parse_header(data, position)
        except HeaderChecksumError as exc:
            if _only_zeros(data, position):
                torn = "zero-filled tail"
                break
            raise fail(str(exc)) from None
        problem = header_problem(header)
        if problem is not None:
            raise fail(problem)
        if header.base_offset != expected and not (offset_gaps and header.base_offset > expected):
            raise fail(f"batch has base offset {header.base_offset}, expected {expected}")
        if header.epoch < epoch:
            raise fail(f"batch epoch {header.epoch} is below the previous epoch {epoch}")
        end = position + header.size
        if end > size:
            torn = f"batch of {header.size} bytes runs past the end of the file"
            break
        if not payload_crc_ok(data, position, header):
            if end == size or _only_zeros(data, end):
                torn = "last batch fails its CRC"
                break
            raise fail("batch CRC mismatch")
        if header.epoch != epoch:
            epoch_starts.append((header.epoch, header.base_offset))
        epoch = header.epoch
        if should_index(position, last_indexed, index_interval_bytes):
            index.append((header.base_offset, position))
            last_indexed = position
        last_append = max(last_append, header.append_time_ms)
        expected = header.next_offset
        position = end

    if torn is not None and not is_tail:
        raise fail(f"segment is not the last one but is torn ({torn})")
    return SegmentScan(
        path=path,
        base_offset=base_offset,
        next_offset=expected,
        valid_bytes=position,
        file_size=size,
        torn_reason=torn,
        epoch_starts=tuple(epoch_starts),
        last_epoch=epoch,
        index_entries=tuple(index),
        last_append_time_ms=last_append,
    )


def _only_zeros(data: bytes, start: int) -> bool:
    return not data[start:].strip(b"\x00")
