"""One segment: a `.log` file of batches and its sparse `.index`.

Files are named by the segment's base offset, zero-padded to 20 digits as in
Kafka (`00000000000000001234.log`), so a directory listing sorts in log order
and names the offset a damaged file starts at.
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from quorum.common.fsutil import pread_exact, sync_file, write_all, writev_all
from quorum.log.batch_format import (
    HEADER_SIZE,
    BatchHeader,
    HeaderChecksumError,
    decode_batch,
    header_problem,
    parse_header,
    payload_crc_ok,
)
from quorum.log.errors import LogCorruptionError
from quorum.log.offset_index import OffsetIndex
from quorum.raft.records import Batch

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
_NAME = re.compile(r"^(\d{20})\.log$")


def log_file_name(base_offset: int) -> str:
    return f"{base_offset:020d}{LOG_SUFFIX}"


def index_file_name(base_offset: int) -> str:
    return f"{base_offset:020d}{INDEX_SUFFIX}"


def parse_log_file_name(name: str) -> int | None:
    match = _NAME.match(name)
    return int(match.group(1)) if match else None


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    """What a caller's retention or cleaning policy sees of a segment."""

    base_offset: int
    next_offset: int
    size_bytes: int
    last_append_time_ms: int


class Segment:
    """Appends go through one `os.write`; reads use `pread`, so they see
    appended bytes at once, flushed or not. Not thread-safe."""

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        index_interval_bytes: int,
        *,
        next_offset: int | None = None,
        size: int = 0,
        index_entries: Sequence[tuple[int, int]] = (),
        last_append_time_ms: int = -1,
        create: bool = False,
    ) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.next_offset = base_offset if next_offset is None else next_offset
        self.size = size
        self.last_append_time_ms = last_append_time_ms
        self.index = OffsetIndex(base_offset, index_interval_bytes, index_entries)
        flags = os.O_RDWR | os.O_APPEND | (os.O_CREAT | os.O_EXCL if create else 0)
        self._fd = os.open(self.path, flags, 0o644)
        self._index_fd: int | None = None

    @property
    def path(self) -> Path:
        return self.directory / log_file_name(self.base_offset)

    @property
    def index_path(self) -> Path:
        return self.directory / index_file_name(self.base_offset)

    # ---------------------------------------------------------------- writes

    def append(self, batches: Sequence[Batch], encoded: Sequence[Sequence[bytes]]) -> None:
        """Write already-encoded batches (each as its parts) with one `writev`."""
        position = self.size
        parts: list[bytes] = []
        for batch, batch_parts in zip(batches, encoded, strict=True):
            self.index.on_batch(batch.base_offset, position)
            position += sum(len(p) for p in batch_parts)
            parts.extend(batch_parts)
        try:
            writev_all(self._fd, parts)
        except OSError:
            # Leave no partial batch behind for a later append to build on.
            os.ftruncate(self._fd, self.size)
            self.index.truncate_to_position(self.size)
            raise
        self.size = position
        self.next_offset = batches[-1].next_offset
        self.last_append_time_ms = max(
            self.last_append_time_ms, max(b.append_time_ms for b in batches)
        )

    def sync(self) -> None:
        sync_file(self._fd)

    def truncate(self, position: int, next_offset: int) -> None:
        """Cut the file at a batch boundary, durably."""
        os.ftruncate(self._fd, position)
        sync_file(self._fd)
        self.size = position
        self.next_offset = next_offset
        self.index.truncate_to_position(position)
        self.rewrite_index()

    def write_index(self) -> None:
        """Append index entries added since the last call (not fsync'd: the
        index is checked and rebuilt on open)."""
        data = self.index.take_unwritten()
        if not data:
            return
        if self._index_fd is None:
            flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
            self._index_fd = os.open(self.index_path, flags, 0o644)
        write_all(self._index_fd, data)

    def rewrite_index(self) -> None:
        self._close_index()
        fd = os.open(self.index_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            write_all(fd, self.index.encode())
        finally:
            os.close(fd)
        self.index.mark_written()

    # ----------------------------------------------------------------- reads

    def read_header(self, position: int) -> BatchHeader:
        data = pread_exact(self._fd, HEADER_SIZE, position)
        if len(data) < HEADER_SIZE:
            raise self._corrupt("file ends inside a batch header", position)
        try:
            header = parse_header(data, 0)
        except HeaderChecksumError as exc:
            raise self._corrupt(str(exc), position) from None
        problem = header_problem(header)
        if problem is not None:
            raise self._corrupt(problem, position)
        return header

    def locate(self, offset: int) -> tuple[int, BatchHeader] | None:
        """The position and header of the batch holding `offset`, if any."""
        _, position = self.index.lookup(offset)
        while position < self.size:
            header = self.read_header(position)
            if header.next_offset > offset:
                return position, header
            position += header.size
        return None

    def read_batches(self, position: int, max_bytes: int | None = None) -> list[Batch]:
        """Whole batches from `position`: at least one, then as many as fit in
        `max_bytes` (all of them when it is None)."""
        if position >= self.size:
            return []
        end = self.size
        if max_bytes is not None:
            first = self.read_header(position)
            end = min(self.size, position + max(max_bytes, first.size))
        data = pread_exact(self._fd, end - position, position)
        out: list[Batch] = []
        at = 0
        while at + HEADER_SIZE <= len(data):
            try:
                header = parse_header(data, at)
            except HeaderChecksumError as exc:
                raise self._corrupt(str(exc), position + at) from None
            if at + header.size > len(data):
                break
            if not payload_crc_ok(data, at, header):
                raise self._corrupt("batch CRC mismatch", position + at, header.base_offset)
            try:
                out.append(decode_batch(data, at, header))
            except (ValueError, struct.error) as exc:
                raise self._corrupt(str(exc), position + at, header.base_offset) from None
            at += header.size
        return out

    # ------------------------------------------------------------- lifecycle

    def close(self) -> None:
        self._close_index()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def delete(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)
        self.index_path.unlink(missing_ok=True)

    def _close_index(self) -> None:
        if self._index_fd is not None:
            os.close(self._index_fd)
            self._index_fd = None

    def _corrupt(self, detail: str, position: int, offset: int | None = None) -> LogCorruptionError:
        return LogCorruptionError(self.path, detail, position=position, offset=offset)
