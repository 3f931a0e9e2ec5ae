"""Replacing a run of segments with one rewritten segment, crash-safely (Kafka's
`.cleaned` / `.swap` protocol, used by the data plane's log cleaner).

The replacement for the segments with base offsets in [base, end) is written as

    <base>.log.<end>.cleaned    written and fsync'd; a crash leaves the old segments
    <base>.log.<end>.swap       renamed from .cleaned, directory fsync'd: the commit point
    <base>.log                  the old segments in (base, end) deleted, then the swap
                                renamed over the old first segment, directory fsync'd

so a crash at any point leaves either the old segments or the new one, never a
mix: on open, `complete_interrupted_swaps` deletes every `.cleaned` file (the
swap never committed) and finishes every `.swap` (it did). The replaced range's
end is in the file name because the rewritten segment may end earlier than the
segments it replaces (compaction leaves offset gaps), so its own batches cannot
say which old segments it covers.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from quorum.common.fsutil import fsync_dir, sync_file, writev_all
from quorum.log.batch_format import encode_batch_parts
from quorum.log.offset_index import should_index
from quorum.log.segment import index_file_name, log_file_name, parse_log_file_name
from quorum.raft.records import Batch

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
_PENDING = re.compile(r"^(\d{20})\.log\.(\d{20})\.(cleaned|swap)$")


def cleaned_file_name(base_offset: int, end_offset: int) -> str:
    return f"{log_file_name(base_offset)}.{end_offset:020d}{CLEANED_SUFFIX}"


def swap_file_name(base_offset: int, end_offset: int) -> str:
    return f"{log_file_name(base_offset)}.{end_offset:020d}{SWAP_SUFFIX}"


@dataclass(frozen=True, slots=True)
class CleanedSegment:
    """What the log needs to adopt a rewritten segment without reading it again."""

    base_offset: int
    end_offset: int  # the base offset of the segment after the replaced ones
    next_offset: int  # after its last batch (its base offset when it holds none)
    size: int
    index_entries: tuple[tuple[int, int], ...]
    last_append_time_ms: int


class CleanedSegmentWriter:
    """Writes `<base>.log.<end>.cleaned` batch by batch (offsets increasing, gaps
    allowed), keeping the sparse index and end offset as it goes. It syncs every
    `SYNC_EVERY_BYTES`, so no single call (the last one's fsync included) waits
    for the disk to take more than that: the broker's event loop runs the cleaner."""

    SYNC_EVERY_BYTES = 8 << 20

    def __init__(
        self, directory: Path, base_offset: int, end_offset: int, index_interval_bytes: int
    ) -> None:
        self.path = directory / cleaned_file_name(base_offset, end_offset)
        self._base, self._end = base_offset, end_offset
        self._interval = index_interval_bytes
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self._size = 0
        self._next = base_offset
        self._index: list[tuple[int, int]] = []
        self._last_indexed = 0
        self._last_append = -1
        self._unsynced = 0

    def append(self, batches: Sequence[Batch]) -> None:
        parts: list[bytes] = []
        for batch in batches:
            if batch.base_offset < self._next or batch.next_offset > self._end:
                raise ValueError(f"batch at {batch.base_offset} out of order for {self.path}")
            if should_index(self._size, self._last_indexed, self._interval):
                self._index.append((batch.base_offset, self._size))
                self._last_indexed = self._size
            encoded = encode_batch_parts(batch)
            parts.extend(encoded)
            written = sum(len(p) for p in encoded)
            self._size += written
            self._unsynced += written
            self._next = batch.next_offset
            self._last_append = max(self._last_append, batch.append_time_ms)
        writev_all(self._fd, parts)
        if self._unsynced >= self.SYNC_EVERY_BYTES:
            sync_file(self._fd)
            self._unsynced = 0

    def finish(self) -> CleanedSegment:
        """fsync and close: the file is ready for `FileLogStore.replace_segments`."""
        sync_file(self._fd)
        os.close(self._fd)
        self._fd = -1
        return CleanedSegment(
            self._base, self._end, self._next, self._size, tuple(self._index), self._last_append
        )

    def abort(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        self.path.unlink(missing_ok=True)


def commit_swap(directory: Path, base_offset: int, end_offset: int) -> Path:
    """The .cleaned file (already fsync'd) becomes the .swap file: from now on a
    crash completes the replacement. Returns the swap file's path."""
    swap = directory / swap_file_name(base_offset, end_offset)
    os.rename(directory / cleaned_file_name(base_offset, end_offset), swap)
    fsync_dir(directory)
    return swap


def finish_swap(
    directory: Path,
    base_offset: int,
    end_offset: int,
    hook: Callable[[str], None] | None = None,
) -> Path:
    """Delete the replaced segments and move the swap file into place (idempotent:
    recovery calls it again after a crash part-way). Returns the new segment's path."""
    for name in os.listdir(directory):
        base = parse_log_file_name(name)
        if base is not None and base_offset < base < end_offset:
            (directory / name).unlink(missing_ok=True)
            (directory / index_file_name(base)).unlink(missing_ok=True)
            if hook:
                hook("deleted-old")
    target = directory / log_file_name(base_offset)
    os.rename(directory / swap_file_name(base_offset, end_offset), target)
    # The old first segment's index describes the old file; it is rebuilt on open.
    (directory / index_file_name(base_offset)).unlink(missing_ok=True)
    fsync_dir(directory)
    if hook:
        hook("renamed")
    return target


def complete_interrupted_swaps(directory: Path) -> list[str]:
    """On open: drop uncommitted rewrites, finish committed ones. The names acted on."""
    done: list[str] = []
    for name in sorted(os.listdir(directory)):
        match = _PENDING.match(name)
        if match is None:
            continue
        base, end, kind = int(match.group(1)), int(match.group(2)), match.group(3)
        if kind == "cleaned":
            (directory / name).unlink()
        else:
            finish_swap(directory, base, end)
        done.append(name)
    if done:
        fsync_dir(directory)
    return done
