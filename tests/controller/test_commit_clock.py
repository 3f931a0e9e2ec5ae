"""CommitClock: parked fetches wake on the next commit, time out otherwise, and
commit times are known only for offsets this controller saw commit."""

from __future__ import annotations

import asyncio

from quorum.controller.commit_clock import CommitClock


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
