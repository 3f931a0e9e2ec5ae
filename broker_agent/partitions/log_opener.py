"""Opening new replicas' logs in worker threads, so the event loop keeps answering.

Creating a replica's log costs fsyncs (its first segment, its directory), ~10 ms
each under load, and opening an existing one a scan of its tail (no syncs: see
`FileLogStore`'s `sync_on_open`). The replica manager hands such opens
here: in chunks of `OPEN_CHUNK` on `num.recovery.threads.per.data.dir` threads
(Kafka's name for the threads that load logs; 1 by default, as in Kafka), so a
forwarded CreateTopics of 100 topics no longer waits for ~33 opens, and each chunk's
replicas join (at the latest metadata, the manager's callback) once open, so a
restarted broker's first followers fetch while the rest still open. Until then
a Produce or Fetch for such a replica waits for it (`until_open`, within its
own timeout), as in Kafka for a partition its metadata has but its replica
manager does not yet host.

A worker waits for a turn of the event loop before each log (`loop_turn`). An
open is Python and short system calls, each releasing the GIL for a few
microseconds, and CPython gives the GIL back to the thread that released it
before the event loop's thread, woken to take it, gets a core (the waiter's
timeout, `sys.setswitchinterval`, starts again at every release): a worker
opening 33 logs kept the loop from the GIL until it was done, and a forwarded
CreateTopics' reply waited for that (docs/benchmarks.md, issue 36, sixth
pass). Waiting for the loop instead lets it through between two logs.

One thread, not four: more threads made the opens' GIL traffic the loop's wait
(a forwarded CreateTopics of 100 topics, alternated: 15.7-18.7 ms median with
one, 19.3-21.2 with four), and a restarted broker's 1,000 opens took no longer
(docs/benchmarks.md, "One log-opening thread").
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from broker_agent.partitions.assignments import PartitionAssignment
from broker_agent.partitions.partition_log import LogConfig, PartitionLog
from broker_agent.partitions.producer_state import ProducerStateTable

log = logging.getLogger("broker_agent.partitions.replica_manager")

# Replicas' logs opened per worker-thread job.
OPEN_CHUNK = 50

Key = tuple[str, int]

# How long a worker waits for the event loop to take a turn before opening on.
TURN_TIMEOUT_S = 0.1


def loop_turn(loop: asyncio.AbstractEventLoop, timeout_s: float = TURN_TIMEOUT_S) -> None:
    """Block this (worker) thread until `loop` has run a callback queued now, so
    the work the loop already had (callbacks, I/O that came in) goes first;
    at most `timeout_s` (a loop that is closed or stuck does not stop the opens)."""
    done = threading.Event()
    try:
        loop.call_soon_threadsafe(done.set)
    except RuntimeError:  # the loop is closed
        return
    done.wait(timeout_s)


@dataclass(frozen=True, slots=True)
class OpenedLog:
    """A replica's log opened (maybe in a worker thread), before it joins."""

    assignment: PartitionAssignment
    log: PartitionLog
    producers: ProducerStateTable
    high_watermark: int


OpenLog = Callable[[PartitionAssignment, LogConfig, int], OpenedLog]
OnOpened = Callable[[list[Key], list["OpenedLog | BaseException"]], None]


class BackgroundOpener:
    """The opens in flight: `opening` holds a future per replica, done once it joined."""

    def __init__(
        self,
        broker_id: int,
        open_log: OpenLog,
        on_opened: OnOpened,
        closed: Callable[[], bool],
        threads: int = 1,
    ) -> None:
        self.broker_id = broker_id
        self.threads = threads
        self._open_log = open_log
        self._on_opened = on_opened
        self._closed = closed
        self.opening: dict[Key, asyncio.Future[None]] = {}
        self._jobs: set[asyncio.Future[list[OpenedLog | BaseException]]] = set()
        self._pool: ThreadPoolExecutor | None = None

    def open(self, items: list[tuple[PartitionAssignment, LogConfig]], now: int) -> None:
        """In chunks on a few threads: the first replicas join (and their
        followers fetch) while the rest still open, and the opens' system calls
        overlap (a restarted broker opens all its replicas at once)."""
        for start in range(0, len(items), OPEN_CHUNK):
            self._open_chunk(items[start : start + OPEN_CHUNK], now)

    def _open_chunk(self, items: list[tuple[PartitionAssignment, LogConfig]], now: int) -> None:
        loop = asyncio.get_running_loop()

        def open_all() -> list[OpenedLog | BaseException]:
            out: list[OpenedLog | BaseException] = []
            for assignment, config in items:
                loop_turn(loop)
                try:
                    out.append(self._open_log(assignment, config, now))
                except Exception as exc:  # one bad directory must not keep the others out
                    out.append(exc)
            return out

        keys = [(a.topic, a.partition) for a, _ in items]
        for key in keys:
            self.opening[key] = loop.create_future()
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="log-open")
        job = loop.run_in_executor(self._pool, open_all)
        self._jobs.add(job)
        job.add_done_callback(lambda done: self._opened(keys, done))

    def _opened(
        self, keys: list[Key], job: asyncio.Future[list[OpenedLog | BaseException]]
    ) -> None:
        """On the loop: the manager joins the opened replicas; then their waiters go."""
        if self._closed() or job.cancelled():
            return  # close() closes what the job opened
        self._jobs.discard(job)
        waiters = [self.opening.pop(key) for key in keys if key in self.opening]
        try:
            self._on_opened(keys, job.result())
        except Exception:
            log.exception("broker %d: opening new replicas failed", self.broker_id)
        finally:
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)

    async def until_open(self, keys: Sequence[Key], timeout_s: float) -> None:
        """Wait (bounded) for replicas whose logs are being opened."""
        waiters = {self.opening[k] for k in keys if k in self.opening}
        if waiters:
            await asyncio.wait(waiters, timeout=max(timeout_s, 0.0))

    async def close(self) -> None:
        """Close the logs a worker thread still opens; release every waiter."""
        for job in list(self._jobs):
            with contextlib.suppress(Exception):
                for opened in await job:
                    if not isinstance(opened, BaseException):
                        opened.log.close()
        for waiter in self.opening.values():
            if not waiter.done():
                waiter.set_result(None)
        self.opening.clear()
        if self._pool is not None:
            self._pool.shutdown(wait=False)


__all__ = ["OPEN_CHUNK", "BackgroundOpener", "OpenedLog"]
