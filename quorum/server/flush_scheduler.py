"""One log flush at a time, each covering every append before it started (group
commit): a leader's after the round's messages have left, a follower's at once.

Large flushes (a follower catching up, a big metadata batch) are synced in a
worker thread, so the loop never stalls for long. Small ones are too when the
driver says so (`sync_off_loop`: a leader with other voters), and on the loop
thread otherwise (a single voter, as Kafka's raft thread does, and a follower).
Handing a small fsync to a worker costs GIL hand-offs (the worker takes the GIL
to start and again to report: several hundred microseconds per flush on 2 busy
cores, measured at one writer), but a leader's loop blocked in fdatasync takes no
answers and no writes meanwhile; with three voters under load the worker won at
1, 16 and 64 writers (docs/benchmarks.md, "CPU per write (issue 32, goal 1)").
A follower has nothing to take meanwhile: its next fetch waits for this very
flush, which is on the commit's path, so it pays no hand-offs and no wait for
the loop's next turn (docs/benchmarks.md, "Writes at 16 writers").
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from contextlib import AbstractContextManager

from quorum.log.api import LogStore
from quorum.raft.effects import FlushLog

# Flushes up to this size are synced on the loop thread, larger ones in a worker.
INLINE_FLUSH_MAX_BYTES = 256 * 1024

# flushed(flush, end_offset, error, started): `started` is None when nothing
# needed syncing (already durable).
Flushed = Callable[[FlushLog, int, BaseException | None, float | None], None]


class FlushScheduler:
    def __init__(
        self,
        log_store: LogStore,
        busy: Callable[[], AbstractContextManager[object]],
        closed: Callable[[], bool],
        flushed: Flushed,
        sync_off_loop: Callable[[], bool] = lambda: False,
        at_once: Callable[[], bool] = lambda: False,
    ) -> None:
        self.log_store = log_store
        self._busy = busy  # the driver's poll-idle accounting around its work
        self._closed = closed
        self._flushed = flushed
        self._sync_off_loop = sync_off_loop  # every flush in a worker while this holds
        self._at_once = at_once  # started within the round that asked, while this holds
        self.running = False
        self._wanted: FlushLog | None = None

    def request(self, flush: FlushLog) -> None:
        """Note the flush; `schedule` starts it once all of its round's effects
        are out (the newest request wins: one fsync covers every append)."""
        self._wanted = flush

    def schedule(self, loop: asyncio.AbstractEventLoop) -> None:
        """Run the wanted flush as a callback of its own, after the callbacks this
        round woke: a leader's answers to the fetches it was holding leave before
        it syncs, so its followers write and sync at the same time as it does.
        While `at_once` holds (a follower: nothing of its round waits to leave)
        it starts now, and its completion may run the driver's next round within
        this one."""
        if self._wanted is not None and not self.running:
            self.running = True
            if self._at_once():
                self._flush(loop)
            else:
                loop.call_soon(self._flush, loop)

    def _flush(self, loop: asyncio.AbstractEventLoop) -> None:
        with self._busy():
            self._start(loop)

    def _start(self, loop: asyncio.AbstractEventLoop) -> None:
        flush, self._wanted = self._wanted, None
        if flush is None or self._closed():
            self.running = False
            return
        started = time.monotonic()
        # The flush's scope is fixed here, so appends may go on while a worker syncs.
        pending = self.log_store.begin_flush(flush.end_offset)
        if pending is None:  # already durable
            self._done(flush, flush.end_offset, None, None)
            return
        end = max(flush.end_offset, pending.end_offset)
        if pending.size <= INLINE_FLUSH_MAX_BYTES and not self._sync_off_loop():
            error: Exception | None = None
            try:
                pending.complete()
            except Exception as err:
                error = err
            self._done(flush, end, error, started)
            return
        task = loop.run_in_executor(None, pending.complete)
        task.add_done_callback(lambda done: self._done(flush, end, _failure(done), started))

    def _done(
        self, flush: FlushLog, end_offset: int, error: BaseException | None, started: float | None
    ) -> None:
        with self._busy():
            self.running = False
            self._flushed(flush, end_offset, error, started)


def _failure(done: asyncio.Future[None]) -> BaseException | None:
    """What stopped a worker's flush, if anything (a cancelled one is not durable)."""
    return asyncio.CancelledError() if done.cancelled() else done.exception()
