"""Kafka's poll-idle-ratio-avg, computed on a clock the test moves by hand."""

from __future__ import annotations

import pytest

from quorum.server.poll_idle import PollIdleRatio


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def busy(ratio: PollIdleRatio, clock: Clock, seconds: float) -> None:
    with ratio:
        clock.advance(seconds)


def test_a_driver_that_only_waits_is_wholly_idle() -> None:
    clock = Clock()
    ratio = PollIdleRatio(30, 2, clock)
    assert ratio.ratio() == 1.0  # no time has passed: nothing was busy
    clock.advance(10)
    assert ratio.ratio() == 1.0


def test_busy_time_is_the_fraction_of_wall_time_spent_in_callbacks() -> None:
    clock = Clock()
    ratio = PollIdleRatio(30, 2, clock)
    for _ in range(10):
        busy(ratio, clock, 0.25)  # 2.5 s busy ...
        clock.advance(0.75)  # ... of 10 s
    assert ratio.ratio() == pytest.approx(0.75)


def test_nested_callbacks_count_once() -> None:
    clock = Clock()
    ratio = PollIdleRatio(30, 2, clock)
    with ratio:
        clock.advance(1)
        with ratio:  # _flush_done calling _process
            clock.advance(1)
        clock.advance(1)
    clock.advance(7)
    assert ratio.ratio() == pytest.approx(0.7)


def test_a_callback_still_running_counts_when_the_metrics_thread_reads() -> None:
    clock = Clock()
    ratio = PollIdleRatio(30, 2, clock)
    clock.advance(6)
    ratio.__enter__()
    clock.advance(4)
    assert ratio.ratio() == pytest.approx(0.6)
    ratio.__exit__(None, None, None)
    assert ratio.ratio() == pytest.approx(0.6)


def test_old_samples_leave_the_window() -> None:
    """Kafka's sampled window: the current sample and the full one before it."""
    clock = Clock()
    ratio = PollIdleRatio(10, 2, clock)
    busy(ratio, clock, 10)  # sample 0 (0-10 s): all busy
    assert ratio.ratio() == pytest.approx(0.0)
    clock.advance(5)  # half of sample 1, idle: 5 idle s of 15
    assert ratio.ratio() == pytest.approx(1 / 3)
    clock.advance(10)  # 25 s: sample 2 began and sample 0 left
    assert ratio.ratio() == pytest.approx(1.0)
    busy(ratio, clock, 5)  # 30 s: sample 3 begins; sample 2 (20-30 s) half busy
    assert ratio.ratio() == pytest.approx(0.5)


def test_a_busy_stretch_across_a_boundary_is_split_between_samples() -> None:
    clock = Clock()
    ratio = PollIdleRatio(10, 2, clock)
    clock.advance(8)
    busy(ratio, clock, 4)  # 2 s in sample 0, 2 s in sample 1
    clock.advance(8)  # now at 20: sample 2 starts, sample 0 leaves
    assert ratio.ratio() == pytest.approx(0.8)  # 2 busy s of sample 1's 10


def test_the_ratio_stays_within_zero_and_one() -> None:
    clock = Clock()
    ratio = PollIdleRatio(1, 1, clock)
    ratio.record_busy(clock.now - 5, clock.now)  # reported late, longer than the window
    assert 0.0 <= ratio.ratio() <= 1.0


def test_a_window_must_hold_time() -> None:
    with pytest.raises(ValueError):
        PollIdleRatio(0, 2)
    with pytest.raises(ValueError):
        PollIdleRatio(30, 0)
