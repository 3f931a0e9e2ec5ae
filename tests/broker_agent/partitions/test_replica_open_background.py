"""New replicas' logs opened in a worker thread (the agent's way): requests for a
partition its metadata has but whose log is still opening wait for it (Produce,
Fetch) or get NOT_LEADER_OR_FOLLOWER; a replica that left meanwhile is deleted
once open; close() closes what is still being opened."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode
from partitions_cluster import make_batch

from broker_agent.partitions import replica_manager as rm_module
from broker_agent.partitions.api import FetchPartition
from broker_agent.partitions.assignments import MetadataView, PartitionAssignment
from broker_agent.partitions.replica_config import ReplicaConfig
from broker_agent.partitions.replica_manager import ReplicaManager

BROKER = 0


def view(*topics: str, partitions: int = 2) -> MetadataView:
    parts = tuple(
        PartitionAssignment(t, f"id-{t}", p, (BROKER,), (BROKER,), BROKER, 0, 0)
        for t in topics
        for p in range(partitions)
    )
    return MetadataView(parts, {t: {} for t in topics})


class GatedOpen:
    """Holds the worker thread's log opens until released (a slow disk)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.gate = threading.Event()
        self.started = threading.Event()
        real = ReplicaManager._open_log

        def gated(manager: ReplicaManager, *args: object) -> object:
            if threading.current_thread() is not threading.main_thread():
                self.started.set()
                assert self.gate.wait(30)
            return real(manager, *args)  # type: ignore[arg-type]

        monkeypatch.setattr(rm_module.ReplicaManager, "_open_log", gated)


def test_requests_wait_for_a_log_being_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gated = GatedOpen(monkeypatch)

    async def go() -> None:
        manager = ReplicaManager(BROKER, tmp_path, ReplicaConfig(tick_interval_ms=None))
        try:
            manager.apply_metadata(view("orders"), open_in_background=True)
            assert manager.partition_state("orders", 0) is None  # returned before opening
            await asyncio.to_thread(gated.started.wait, 10)
            # The loop still answers; the synchronous lookups say "not here yet".
            offsets = manager.list_offsets("orders", 0, -1, -1)
            assert offsets.error is ErrorCode.not_leader_or_follower
            assert manager.list_offsets("nope", 0, -1, -1).error is (
                ErrorCode.unknown_topic_or_partition
            )
            produce = asyncio.create_task(manager.append("orders", 0, make_batch(b"v"), 1, 10_000))
            fetch = asyncio.create_task(
                manager.fetch(-1, 10_000, 1, 1 << 20, [FetchPartition("orders", 1, 0)])
            )
            await asyncio.sleep(0.1)
            assert not produce.done() and not fetch.done()
            gated.gate.set()
            result = await asyncio.wait_for(produce, 10)
            assert result.error is ErrorCode.none and result.base_offset == 0
            part = manager.partition_state("orders", 1)
            assert part is not None and part.role.value == "leader"
            fetch.cancel()
        finally:
            gated.gate.set()
            await manager.close()

    asyncio.run(go())


def test_a_replica_that_left_while_opening_is_deleted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gated = GatedOpen(monkeypatch)

    async def go() -> None:
        manager = ReplicaManager(BROKER, tmp_path, ReplicaConfig(tick_interval_ms=None))
        try:
            manager.apply_metadata(view("gone", "kept"), open_in_background=True)
            await asyncio.to_thread(gated.started.wait, 10)
            manager.apply_metadata(view("kept"), open_in_background=True)  # "gone" deleted
            gated.gate.set()
            for _ in range(500):
                if manager.partition_state("kept", 1) is not None:
                    break
                await asyncio.sleep(0.01)
            assert manager.partition_state("kept", 1) is not None
            assert manager.partition_state("gone", 0) is None
            assert not (tmp_path / "gone-0").exists()
            assert (tmp_path / "kept-0").exists()
        finally:
            gated.gate.set()
            await manager.close()

    asyncio.run(go())


def test_close_closes_logs_still_being_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gated = GatedOpen(monkeypatch)

    async def go() -> None:
        manager = ReplicaManager(BROKER, tmp_path, ReplicaConfig(tick_interval_ms=None))
        manager.apply_metadata(view("orders"), open_in_background=True)
        await asyncio.to_thread(gated.started.wait, 10)
        closing = asyncio.create_task(manager.close())
        await asyncio.sleep(0.05)
        gated.gate.set()
        await asyncio.wait_for(closing, 10)
        # Every directory lock was released: a new manager opens the same logs.
        again = ReplicaManager(BROKER, tmp_path, ReplicaConfig(tick_interval_ms=None))
        again.apply_metadata(view("orders"))
        assert again.partition_state("orders", 0) is not None
        await again.close()

    asyncio.run(go())
