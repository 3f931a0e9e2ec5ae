"""New replicas' logs opened in a worker thread (the agent's way): requests for a
partition its metadata has but whose log is still opening wait for it (Produce,
Fetch) or get NOT_LEADER_OR_FOLLOWER; a replica that left meanwhile is deleted
once open; close() closes what is still being opened; images applied one after
another reach the replicas their records touch, and a failed open is retried."""

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
from quorum.controller.metadata_image import MetadataImage
from quorum.controller.record_codec import encode, wrap
from quorum.gen import metadata_pb2 as md

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


class Log:
    """A metadata image fed one record at a time, as the agent applies them."""

    def __init__(self) -> None:
        self.image = MetadataImage()

    def add(self, **record: object) -> MetadataImage:
        self.image.apply(self.image.applied_offset, encode(wrap(**record)))
        return self.image

    def topic(self, name: str, topic_id: str, partitions: int) -> MetadataImage:
        self.add(topic=md.TopicRecord(name=name, topic_id=topic_id))
        for p in range(partitions):
            mine = [BROKER]
            record = md.PartitionRecord(
                topic_id=topic_id, partition_id=p, replicas=mine, isr=mine, leader=BROKER
            )
            self.add(partition=record)
        return self.image


def test_each_image_applies_only_what_changed_and_a_failed_open_is_tried_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent's way (`on_metadata` per applied batch, logs opened in a worker
    thread): moves, config changes, leader changes and deletions reach the
    replicas they touch, and a log that failed to open opens at the next image,
    whatever that image's records are about."""
    flaky = {"left": 1}
    real = ReplicaManager._open_log

    def open_log(manager: ReplicaManager, assignment: PartitionAssignment, *args: object) -> object:
        if assignment.topic == "flaky" and flaky["left"]:
            flaky["left"] -= 1
            raise OSError("disk hiccup")
        return real(manager, assignment, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(rm_module.ReplicaManager, "_open_log", open_log)

    async def settled(manager: ReplicaManager) -> None:
        for _ in range(1000):
            if not manager._opener.opening:
                return
            await asyncio.sleep(0.01)
        raise AssertionError("logs still opening")

    def role(manager: ReplicaManager, topic: str, partition: int) -> str | None:
        part = manager.partition_state(topic, partition)
        return None if part is None else part.role.value

    async def go() -> None:
        meta = Log()
        manager = ReplicaManager(BROKER, tmp_path, ReplicaConfig(tick_interval_ms=None))

        def apply(**record: object) -> None:
            manager.on_metadata(meta.add(**record), open_in_background=True)

        try:
            manager.on_metadata(meta.topic("orders", "T1", 2), open_in_background=True)
            await settled(manager)
            assert [role(manager, "orders", p) for p in (0, 1)] == ["leader", "leader"]
            # orders-1 moves to broker 7: deleted here; orders-0 untouched.
            moved = md.PartitionChangeRecord(topic_id="T1", partition_id=1, leader=7)
            moved.replicas.ids.append(7)
            moved.isr.ids.append(7)
            apply(partition_change=moved)
            assert role(manager, "orders", 1) is None
            assert not (tmp_path / "orders-1").exists()
            assert role(manager, "orders", 0) == "leader"
            retention = md.ConfigRecord(
                resource_type=md.CONFIG_RESOURCE_TOPIC,
                resource_name="orders",
                name="retention.ms",
                value="1000",
            )
            apply(config=retention)
            part = manager.partition_state("orders", 0)
            assert part is not None and part.log.config.retention_ms == 1000
            # A new topic whose log fails to open once: opened at the next image.
            manager.on_metadata(meta.topic("flaky", "T2", 1), open_in_background=True)
            await settled(manager)
            assert role(manager, "flaky", 0) is None and not flaky["left"]
            apply(register_broker=md.RegisterBrokerRecord(broker_id=7))
            await settled(manager)
            assert role(manager, "flaky", 0) == "leader"
            # orders-0 loses its leader: this replica leads no more.
            apply(
                partition_change=md.PartitionChangeRecord(topic_id="T1", partition_id=0, leader=-1)
            )
            assert role(manager, "orders", 0) == "offline"
            apply(remove_topic=md.RemoveTopicRecord(topic_id="T1"))
            assert role(manager, "orders", 0) is None
            assert role(manager, "flaky", 0) == "leader"
        finally:
            await manager.close()

    asyncio.run(go())
