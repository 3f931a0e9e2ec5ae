"""What recovery learns from one segment file on open, without changing it.

The batches are read and judged by the one segment reader
(`segment_reader.py`: torn tail versus corruption, offsets, epochs, CRCs);
this module only sums up what opening the log needs from them: where the
file is cut if torn, the epoch changes for the leader-epoch cache, the
offset-index entries and the newest append time.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from quorum.log.offset_index import should_index
from quorum.log.segment_reader import SegmentReader


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
    reader = SegmentReader(
        path, base_offset, previous_epoch, is_tail=is_tail, offset_gaps=offset_gaps
    )
    epoch = previous_epoch
    epoch_starts: list[tuple[int, int]] = []
    index: list[tuple[int, int]] = []
    last_indexed = 0
    last_append = -1
    for batch in reader:
        header = batch.header
        if header.epoch != epoch:
            epoch_starts.append((header.epoch, header.base_offset))
        epoch = header.epoch
        if should_index(batch.position, last_indexed, index_interval_bytes):
            index.append((header.base_offset, batch.position))
            last_indexed = batch.position
        last_append = max(last_append, header.append_time_ms)
    return SegmentScan(
        path=path,
        base_offset=base_offset,
        next_offset=reader.next_offset,
        valid_bytes=reader.valid_bytes,
        file_size=reader.file_size,
        torn_reason=reader.torn_reason,
        epoch_starts=tuple(epoch_starts),
        last_epoch=reader.last_epoch,
        index_entries=tuple(index),
        last_append_time_ms=last_append,
    )
