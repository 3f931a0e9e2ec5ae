"""`log.cleaner.io.max.bytes.per.second` on a fake clock: a round never reads
ahead of the limit, and an unlimited cleaner never waits. (bench/compaction.py
measures the real throttle beside producers: 5.3-5.8 MB/s against 5.)"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest
from partitions_cluster import Cluster, run
from test_log_cleaner_replicas import T, produce_updates

from broker_agent.partitions.cleaner_task import CleanerTask, Throttle

LIMIT = 10_000.0  # bytes a second


def test_the_throttle_waits_until_the_bytes_read_took_their_time() -> None:
    now = [0.0]
    throttle = Throttle(LIMIT, lambda: now[0])
    assert throttle.delay_after(5_000) == 0.5
    now[0] = 0.5
    assert throttle.delay_after(2_000) == pytest.approx(0.2)
    now[0] = 3.0  # a slow step: nothing to wait, but no credit beyond the time it took
    assert throttle.delay_after(1_000) == 0.0
    assert throttle.delay_after(30_000) == pytest.approx(0.8)
    assert Throttle(float("inf"), lambda: 0.0).delay_after(1 << 30) == 0.0


def paced_round(task: CleanerTask) -> list[tuple[int, float]]:
    """Run one round on a clock that only the throttle's sleeps move; (bytes
    read, clock) after each sleep."""
    now = [0.0]
    after_sleeps: list[tuple[int, float]] = []

    async def sleep(seconds: float) -> None:
        now[0] += seconds
        after_sleeps.append((task.stats.io_bytes, now[0]))
        await asyncio.sleep(0)

    task.clock_s = lambda: now[0]
    task.sleep = sleep
    return after_sleeps


def test_a_throttled_round_reads_at_the_limit(tmp_path: Path) -> None:
    async def scenario(cluster: Cluster) -> None:
        cluster.create_topic(
            T, replicas=(0,), cleanup_policy="compact", segment_bytes="2048",
            min_cleanable_dirty_ratio="0.01",
        )  # fmt: skip
        task = cluster.brokers[0].cleaner
        await produce_updates(cluster.brokers[0], rounds=20)
        task.config = replace(task.config, io_max_bytes_per_second=LIMIT)
        after_sleeps = paced_round(task)
        assert await task.clean_once()
        read = task.stats.io_bytes
        assert read > 10_000 and len(after_sleeps) > 1  # paced step by step
        for so_far, at in after_sleeps:
            assert at == pytest.approx(so_far / LIMIT)  # never ahead of the limit
        assert after_sleeps[-1][1] == pytest.approx(read / LIMIT)

        await produce_updates(cluster.brokers[0], rounds=20, first_round=20)
        task.config = replace(task.config, io_max_bytes_per_second=float("inf"))
        after_sleeps = paced_round(task)
        assert await task.clean_once()
        assert task.stats.io_bytes > read and after_sleeps == []

    run(scenario, tmp_path)
