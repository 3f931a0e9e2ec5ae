"""`log.cleaner.io.max.bytes.per.second` on a fake clock: a round never reads
and writes ahead of the limit, and an unlimited cleaner never waits. (bench/compaction.py
measures the real throttle beside producers: 5.3-5.8 MB/s against 5.)"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest
from cleaner_helpers import T, produce_updates
from partitions_cluster import Cluster, run

from broker_agent.metrics import cleaner_metrics
from broker_agent.partitions.cleaner_task import CleanerTask, Throttle
from broker_agent.partitions.log_cleaner import CleanerConfig

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
        await produce_updates(cluster.brokers[0], rounds=10)
        task.config = replace(task.config, io_max_bytes_per_second=LIMIT)
        after_sleeps = paced_round(task)
        assert await task.clean_once()
        read = task.stats.io_bytes
        assert read > 10_000 and len(after_sleeps) > 1  # paced step by step
        for so_far, at in after_sleeps:
            assert at == pytest.approx(so_far / LIMIT)  # never ahead of the limit
        assert after_sleeps[-1][1] == pytest.approx(read / LIMIT)
        # Kafka's meaning: reads plus writes. A first round maps the range it
        # then rewrites, so the range is read twice and what it keeps written once.
        stats = task.stats
        assert 0 < stats.bytes_written < stats.bytes_read
        assert read == 2 * stats.bytes_read + stats.bytes_written

        await produce_updates(cluster.brokers[0], rounds=10, first_round=10)
        task.config = replace(task.config, io_max_bytes_per_second=float("inf"))
        after_sleeps = paced_round(task)
        assert await task.clean_once()
        assert task.stats.io_bytes > read and after_sleeps == []

    run(scenario, tmp_path)


def test_cleaner_threads_clean_different_partitions_under_one_throttle(tmp_path: Path) -> None:
    """`log.cleaner.threads=2`: two rounds at once, never on the same partition,
    each with half of `log.cleaner.dedupe.buffer.size` for its map, and one
    throttle over both (the clock ends at both rounds' bytes over the limit;
    a throttle per round would let each run at the limit)."""

    async def scenario(cluster: Cluster) -> None:
        manager = cluster.brokers[0]
        await manager.cleaner.stop()  # this test drives its own task
        for topic in ("a", "b"):
            cluster.create_topic(
                topic, replicas=(0,), cleanup_policy="compact", segment_bytes="2048",
                min_cleanable_dirty_ratio="0.01",
            )  # fmt: skip
        config = CleanerConfig(threads=2, dedupe_buffer_size=1 << 16, io_max_bytes_per_second=LIMIT)
        task = CleanerTask(manager, config)
        assert [c.config.dedupe_buffer_size for c in task.cleaners] == [1 << 15, 1 << 15]
        assert task.cleaners[1].stats is task.stats
        for topic in ("a", "b"):
            await produce_updates(manager, rounds=10, topic=topic)
        after_sleeps = paced_round(task)
        first, second = task.cleaners
        assert await asyncio.gather(task.clean_once(first), task.clean_once(second)) == [True, True]
        assert sorted(task.stats.partitions) == [("a", 0), ("b", 0)]
        assert all(p.last_run_end_ms > 0 for p in task.stats.partitions.values())
        assert task.stats.runs == 2 and len(after_sleeps) > 2
        # max-clean-time-secs: the longest of the two threads' last rounds.
        longest = max(c.last_run_seconds for c in task.cleaners)
        assert min(c.last_run_seconds for c in task.cleaners) > 0
        metrics = {m.name: m.samples[0].value for m in cleaner_metrics(task.stats, 0)}
        assert metrics["quorum_broker_log_cleaner_max_clean_time_seconds"] == longest
        assert after_sleeps[-1][1] == pytest.approx(task.stats.io_bytes / LIMIT)

        # One dirty partition: the second task finds nothing it may take.
        await produce_updates(manager, rounds=10, first_round=10, topic="a")
        assert await asyncio.gather(task.clean_once(first), task.clean_once(second)) == [
            True,
            False,
        ]
        assert task.stats.runs == 3

    run(scenario, tmp_path)
