"""The worker thread opening new logs lets the event loop take a turn before each
log (`log_opener.loop_turn`), so the loop's own work goes first; a closed loop
does not hold the opens."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

from broker_agent.partitions import log_opener
from broker_agent.partitions.assignments import MetadataView, PartitionAssignment
from broker_agent.partitions.log_opener import loop_turn
from broker_agent.partitions.replica_manager import ReplicaManager


def test_a_turn_returns_only_once_the_loop_ran_what_it_had_first() -> None:
    order: list[str] = []

    async def go() -> None:
        loop = asyncio.get_running_loop()
        asked = threading.Event()

        def worker() -> None:
            asked.set()
            loop_turn(loop, timeout_s=30)
            order.append("worker")

        thread = threading.Thread(target=worker)
        thread.start()
        assert asked.wait(30)
        time.sleep(0.05)  # the loop busy (a metadata apply): the worker must wait for it
        order.append("loop")
        await asyncio.to_thread(thread.join, 30)

    asyncio.run(go())
    assert order == ["loop", "worker"]


def test_a_closed_loop_does_not_hold_a_worker() -> None:
    loop = asyncio.new_event_loop()
    loop.close()
    started = time.monotonic()
    loop_turn(loop, timeout_s=30)
    assert time.monotonic() - started < 10


def test_the_worker_lets_the_loop_turn_before_each_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events: list[str] = []
    real_turn, real_open = log_opener.loop_turn, ReplicaManager._open_log

    def turn(loop: asyncio.AbstractEventLoop, timeout_s: float = 30) -> None:
        real_turn(loop, timeout_s)
        events.append("turn")

    def opened(manager: ReplicaManager, *args: object) -> object:
        events.append("open")
        return real_open(manager, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(log_opener, "loop_turn", turn)
    monkeypatch.setattr(ReplicaManager, "_open_log", opened)

    async def go() -> None:
        manager = ReplicaManager(0, tmp_path)
        parts = tuple(PartitionAssignment(f"t{i}", "id", 0, (0,), (0,), 0, 0, 0) for i in range(5))
        manager.apply_metadata(MetadataView(parts, {}), open_in_background=True)
        await manager._opener.until_open([(f"t{i}", 0) for i in range(5)], 30)
        assert all(manager.partition_state(f"t{i}", 0) is not None for i in range(5))
        await manager.close()

    asyncio.run(go())
    assert events == ["turn", "open"] * 5


@pytest.mark.parametrize("threads", [1, 3])
def test_opens_run_on_at_most_the_configured_threads(tmp_path: Path, threads: int) -> None:
    """`num.recovery.threads.per.data.dir`: 250 new logs (five chunks) open on that
    many worker threads at most, none on the loop's."""
    from broker_agent.partitions.replica_config import ReplicaConfig

    used: set[int] = set()
    real_open = ReplicaManager._open_log

    def opened(manager: ReplicaManager, *args: object) -> object:
        used.add(threading.get_ident())
        return real_open(manager, *args)  # type: ignore[arg-type]

    async def go() -> None:
        loop_thread = threading.get_ident()
        config = ReplicaConfig(num_recovery_threads_per_data_dir=threads)
        manager = ReplicaManager(0, tmp_path, config)
        keys = [(f"t{i}", 0) for i in range(250)]
        parts = tuple(PartitionAssignment(t, "id", 0, (0,), (0,), 0, 0, 0) for t, _ in keys)
        manager.apply_metadata(MetadataView(parts, {}), open_in_background=True)
        await manager._opener.until_open(keys, 60)
        assert all(manager.partition_state(t, 0) is not None for t, _ in keys)
        assert loop_thread not in used
        await manager.close()

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ReplicaManager, "_open_log", opened)
        asyncio.run(go())
    assert 1 <= len(used) <= threads
