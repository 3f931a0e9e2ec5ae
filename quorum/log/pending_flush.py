"""A flush whose scope is fixed on the log's thread and whose fsync runs on any.

The driver syncs small flushes on its own thread and hands large ones to a
worker while the log's owner keeps appending (see `file_log.py`): this handle
carries what `FileLogStore.begin_flush` fixed (the segments to sync, whether the
directory and its entry in its parent need it, the offset that becomes durable)
from one thread to the
other, and makes sure the flush completes exactly once.
"""

from __future__ import annotations

from collections.abc import Callable

from quorum.log.segment import Segment


class PendingFlush:
    """A flush whose scope `FileLogStore.begin_flush` fixed: `complete()` makes
    everything below `end_offset` durable, `size` bytes appended since the last
    flush. It must be completed exactly once; the log refuses to truncate or
    delete segments until it is."""

    def __init__(
        self,
        end_offset: int,
        segments: list[Segment],
        sync_directory: bool,
        size: int,
        complete: Callable[[PendingFlush], None],
        sync_parent: bool = False,
    ) -> None:
        self.end_offset = end_offset
        self.segments = segments
        self.sync_directory = sync_directory
        self.sync_parent = sync_parent
        self.size = size
        self._complete = complete
        self._completed = False

    def complete(self) -> None:
        if self._completed:
            raise RuntimeError("flush already completed")
        self._completed = True
        self._complete(self)


__all__ = ["PendingFlush"]
