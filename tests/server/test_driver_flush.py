"""Where the driver fsyncs: small flushes on its loop thread, large ones in a
worker thread, and a failed fsync stops the node with nothing committed.

A single-voter quorum commits on its own flush alone, so these drive the real
driver over a real file log with no peers."""

from __future__ import annotations

import asyncio
import contextlib
import random
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from no_peers import NoPeers

from quorum.log.file_log import FileLogStore, PendingFlush
from quorum.log.memory import MemoryQuorumStateStore
from quorum.raft.client_api import ProposalOutcomeUnknown
from quorum.raft.config import RaftConfig
from quorum.raft.effects import FlushLog, Role
from quorum.raft.records import Batch
from quorum.server.driver import RaftDriver
from quorum.server.flush_scheduler import INLINE_FLUSH_MAX_BYTES, FlushScheduler


class WatchedLog(FileLogStore):
    """Records the thread each fsync ran on; `fail` makes the next one raise."""

    def __init__(self, directory: Path) -> None:
        super().__init__(directory)
        self.synced_on: list[int] = []
        self.fail = False

    def begin_flush(self, end_offset: int) -> PendingFlush | None:
        pending = super().begin_flush(end_offset)
        if pending is not None:
            pending.complete = self._watch(pending.complete)  # type: ignore[method-assign]
            if self.fail:  # the disk fails under the real flush, which must recover
                for segment in pending.segments:
                    segment.sync = _broken_disk  # type: ignore[method-assign]
        return pending

    def _watch(self, complete: Callable[[], None]) -> Callable[[], None]:
        def watched() -> None:
            self.synced_on.append(threading.get_ident())
            complete()

        return watched


def _broken_disk() -> None:
    raise OSError(5, "Input/output error")


async def lead_alone(log: WatchedLog) -> RaftDriver:
    config = RaftConfig(1, frozenset({1}), election_timeout_ms=50, election_backoff_max_ms=20)
    driver = RaftDriver(config, log, MemoryQuorumStateStore(), NoPeers(), rng=random.Random(1))
    driver.start()
    for _ in range(200):
        if driver.core.role is Role.LEADER and driver.core.high_watermark > 0:
            return driver
        await asyncio.sleep(0.01)
    raise AssertionError("a single voter did not elect itself")


def test_small_flushes_sync_on_the_loop_and_large_ones_in_a_worker(tmp_path: Path) -> None:
    async def scenario() -> None:
        log = WatchedLog(tmp_path)
        driver = await lead_alone(log)
        loop_thread = threading.get_ident()
        try:
            log.synced_on.clear()
            small = await driver.propose([b"x" * 100])
            assert log.synced_on == [loop_thread]
            assert log.durable_end_offset > small.last_offset

            log.synced_on.clear()
            large = await driver.propose([b"y" * (INLINE_FLUSH_MAX_BYTES + 1)])
            assert len(log.synced_on) == 1 and log.synced_on[0] != loop_thread
            assert log.durable_end_offset > large.last_offset
            assert driver.core.high_watermark > large.last_offset
        finally:
            await driver.stop(resign=False)
            log.close()

    asyncio.run(scenario())


@pytest.mark.parametrize("size", [100, INLINE_FLUSH_MAX_BYTES + 1], ids=["inline", "worker"])
def test_a_failed_fsync_stops_the_node_and_commits_nothing(tmp_path: Path, size: int) -> None:
    async def scenario() -> None:
        log = WatchedLog(tmp_path)
        driver = await lead_alone(log)
        reasons: list[str] = []
        driver.on_fatal.append(reasons.append)
        durable, committed = log.durable_end_offset, driver.core.high_watermark
        try:
            log.fail = True
            write = asyncio.ensure_future(driver.propose([b"z" * size]))
            for _ in range(200):
                if reasons:
                    break
                await asyncio.sleep(0.01)
            assert reasons and reasons[0].startswith("flush failed")
            assert driver.closed and not write.done()
            assert (log.durable_end_offset, driver.core.high_watermark) == (durable, committed)
        finally:
            await driver.stop(resign=False)
            log.close()
        # Appended but never durable: its outcome is unknown to the caller, never "refused".
        with pytest.raises(ProposalOutcomeUnknown, match="may still commit"):
            await write

    asyncio.run(scenario())


def one_small_flush_scheduled(
    tmp_path: Path, *, off_loop: bool, at_once: bool
) -> tuple[WatchedLog, FlushScheduler, list[tuple[int, BaseException | None]]]:
    """A log with one small batch appended, its flush requested and scheduled on
    the running loop; `done` collects the scheduler's reports."""
    log = WatchedLog(tmp_path)
    done: list[tuple[int, BaseException | None]] = []
    scheduler = FlushScheduler(
        log,
        contextlib.nullcontext,
        lambda: False,
        lambda flush, end, error, started: done.append((end, error)),
        sync_off_loop=lambda: off_loop,
        at_once=lambda: at_once,
    )
    log.append([Batch(0, 1, (b"x" * 100,), 0)])
    scheduler.request(FlushLog(1, 0))
    scheduler.schedule(asyncio.get_running_loop())
    return log, scheduler, done


def test_a_driver_with_other_voters_syncs_even_small_flushes_in_a_worker(tmp_path: Path) -> None:
    """With peers, the loop keeps taking answers and writes while the disk works:
    the scheduler hands every flush to a worker when the driver asks it to."""

    async def scenario() -> None:
        log, _, done = one_small_flush_scheduled(tmp_path, off_loop=True, at_once=False)
        for _ in range(200):
            if done:
                break
            await asyncio.sleep(0.01)
        assert done == [(1, None)]
        assert len(log.synced_on) == 1 and log.synced_on[0] != threading.get_ident()
        assert log.durable_end_offset == 1
        log.close()

    asyncio.run(scenario())


def test_a_follower_syncs_a_small_flush_on_its_loop_within_the_round(tmp_path: Path) -> None:
    """A follower's next fetch waits for its sync: the flush runs on the loop
    thread before `schedule` returns (no hand-off to a worker, no loop turn)."""

    async def scenario() -> None:
        log, scheduler, done = one_small_flush_scheduled(tmp_path, off_loop=False, at_once=True)
        assert done == [(1, None)] and not scheduler.running
        assert log.synced_on == [threading.get_ident()]
        assert log.durable_end_offset == 1
        log.close()

    asyncio.run(scenario())
