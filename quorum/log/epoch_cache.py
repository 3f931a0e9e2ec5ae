"""The leader-epoch cache: for every epoch in the log, the offset where it starts.

It answers the question behind diverging-epoch truncation (the seeds'
leader-epoch truncation, KIP-595's `end_offset_for_epoch`) without reading the
log. It is derived state: the log's batch headers carry each batch's epoch, so
the file is checked against the log on open and rebuilt when it is missing,
unreadable or stale (for example after a crash between cutting the log and
rewriting the cache). It is truncated together with the log: its suffix when
the log's tail is cut, its prefix when the log start advances.

File format (JSON, replaced atomically):
    {"version": 1, "entries": [[epoch, start_offset], ...]}
"""

from __future__ import annotations

import json
from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from quorum.common.fsutil import write_atomically
from quorum.raft.records import OffsetAndEpoch

VERSION = 1
UNDEFINED = OffsetAndEpoch(-1, -1)


@dataclass(frozen=True, slots=True)
class EpochEntry:
    epoch: int
    start_offset: int


class LeaderEpochCache:
    def __init__(self, path: Path, entries: Iterable[EpochEntry] = ()) -> None:
        self.path = path
        self._entries: list[EpochEntry] = list(entries)
        self._dirty = True

    @classmethod
    def load(cls, path: Path) -> LeaderEpochCache | None:
        """The cache stored at `path`, or None when it has to be rebuilt from the log."""
        try:
            doc = json.loads(path.read_text())
            if doc["version"] != VERSION:
                return None
            entries = [EpochEntry(int(e), int(s)) for e, s in doc["entries"]]
        except (OSError, ValueError, KeyError, TypeError):
            return None
        cache = cls(path, entries)
        cache._dirty = False
        return cache

    @property
    def entries(self) -> tuple[EpochEntry, ...]:
        return tuple(self._entries)

    @property
    def latest_epoch(self) -> int | None:
        return self._entries[-1].epoch if self._entries else None

    @property
    def dirty(self) -> bool:
        """Whether the file lags behind memory."""
        return self._dirty

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that `epoch` starts at `start_offset` (a no-op for the current epoch)."""
        if self._entries:
            last = self._entries[-1]
            if epoch == last.epoch:
                return
            if epoch < last.epoch or start_offset < last.start_offset:
                raise ValueError(
                    f"epoch {epoch} at offset {start_offset} does not follow "
                    f"epoch {last.epoch} at offset {last.start_offset}"
                )
        self._entries.append(EpochEntry(epoch, start_offset))
        self._dirty = True

    def truncate_from_end(self, end_offset: int) -> None:
        """The log now ends at `end_offset`: forget epochs that start at or after it."""
        keep = len(self._entries)
        while keep and self._entries[keep - 1].start_offset >= end_offset:
            keep -= 1
        if keep != len(self._entries):
            del self._entries[keep:]
            self._dirty = True

    def truncate_from_start(self, start_offset: int, end_offset: int) -> None:
        """The log now holds [start_offset, end_offset): drop epochs wholly before it."""
        if start_offset >= end_offset:
            self.clear()
            return
        before = list(self._entries)
        while len(self._entries) > 1 and self._entries[1].start_offset <= start_offset:
            del self._entries[0]
        if self._entries and self._entries[0].start_offset < start_offset:
            self._entries[0] = EpochEntry(self._entries[0].epoch, start_offset)
        if self._entries != before:
            self._dirty = True

    def clear(self) -> None:
        if self._entries:
            self._entries.clear()
            self._dirty = True

    def end_offset_for_epoch(self, epoch: int, log_end_offset: int) -> OffsetAndEpoch:
        """The largest epoch <= `epoch` in the log and the offset where it ends.

        (-1, -1) when the log holds no such epoch.
        """
        i = bisect_right([e.epoch for e in self._entries], epoch) - 1
        if i < 0:
            return UNDEFINED
        found = self._entries[i]
        if i + 1 < len(self._entries):
            return OffsetAndEpoch(self._entries[i + 1].start_offset, found.epoch)
        return OffsetAndEpoch(log_end_offset, found.epoch)

    def persist(self) -> None:
        doc = {"version": VERSION, "entries": [[e.epoch, e.start_offset] for e in self._entries]}
        write_atomically(self.path, json.dumps(doc).encode())
        self._dirty = False

    def persist_if_dirty(self) -> None:
        if self._dirty:
            self.persist()
