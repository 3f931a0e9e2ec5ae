"""CommitClock: parked fetches wake on the next commit, time out otherwise, and
commit times are known only for offsets this controller saw commit."""

from __future__ import annotations

import asyncio

from quorum.controller.commit_clock import GROUP_S, CommitClock


def test_waiters_wake_on_the_next_commit_and_time_out_without_one() -> None:
    async def scenario() -> tuple[list[bool], bool, bool]:
        clock = CommitClock(clock_ms=lambda: 0)
        parked = [asyncio.ensure_future(clock.wait(5.0)) for _ in range(3)]
        await asyncio.sleep(0.01)
        assert not any(p.done() for p in parked)
        clock.on_commit(10)
        woken = await asyncio.wait_for(asyncio.gather(*parked), 1.0)
        timed_out = await clock.wait(0.02)
        clock.on_commit(10)  # not a move: nobody may be woken by it
        late = asyncio.ensure_future(clock.wait(0.05))
        await asyncio.sleep(0.01)
        clock.on_commit(10)
        return woken, timed_out, await late

    woken, timed_out, late = asyncio.run(scenario())
    assert woken == [True, True, True]
    assert timed_out is False
    assert late is False


def test_commit_times_are_known_only_for_offsets_seen_committing() -> None:
    now = iter([1000, 2000, 3000])
    clock = CommitClock(clock_ms=lambda: next(now))
    clock.on_commit(5)  # offsets 0-4 committed before this controller watched
    clock.on_commit(8)
    clock.on_commit(12)
    assert clock.commit_time_ms(3) == 0
    assert clock.commit_time_ms(5) == 2000
    assert clock.commit_time_ms(7) == 2000
    assert clock.commit_time_ms(8) == 3000
    assert clock.commit_time_ms(11) == 3000
    assert clock.commit_time_ms(12) == 0  # not committed yet


def test_waits_that_time_out_together_end_together_and_leave_nothing_behind() -> None:
    """Waits share a timer by deadline slot; with no commit at all they still all
    end (False), and none is kept afterwards, however many came and went."""

    async def scenario() -> tuple[list[bool], int, int]:
        clock = CommitClock(clock_ms=lambda: 0)
        parked = [asyncio.ensure_future(clock.wait(0.03)) for _ in range(50)]
        short = [asyncio.ensure_future(clock.wait(0.001)) for _ in range(5)]
        await asyncio.sleep(0)
        during = clock.waiting
        ended = await asyncio.wait_for(asyncio.gather(*parked, *short), 5.0)
        return ended, during, clock.waiting

    ended, during, after = asyncio.run(scenario())
    assert ended == [False] * 55
    assert (during, after) == (55, 0)


def test_a_cancelled_wait_does_not_end_the_others_of_its_group() -> None:
    """A broker that goes away while parked: its wait is cancelled, the waits
    sharing its timer still end with the next commit."""

    async def scenario() -> tuple[list[bool], bool]:
        clock = CommitClock(clock_ms=lambda: 0)
        parked = [asyncio.ensure_future(clock.wait(5.0)) for _ in range(3)]
        await asyncio.sleep(0)
        parked[1].cancel()
        await asyncio.sleep(0)
        clock.on_commit(7)
        woken = await asyncio.wait_for(asyncio.gather(parked[0], parked[2]), 1.0)
        return woken, parked[1].cancelled()

    woken, cancelled = asyncio.run(scenario())
    assert woken == [True, True]
    assert cancelled


def test_a_grouped_wait_ends_at_most_one_slot_sooner_than_asked() -> None:
    """Grouped by slot, a wait may end sooner than asked, by at most one slot
    (and its group's timer is due no later than its own would have been)."""

    async def scenario() -> tuple[float, float]:
        loop = asyncio.get_running_loop()
        clock = CommitClock(clock_ms=lambda: 0)
        started = loop.time()
        assert await clock.wait(0.05) is False
        return started, loop.time()

    started, ended = asyncio.run(scenario())
    assert ended - started >= 0.05 - GROUP_S
