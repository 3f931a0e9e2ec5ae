"""A topic deleted and created again under its name never inherits the dead
topic's log: not on a running broker that applies both in one batch, not while
the old log is still opening, and not on a broker restarted across them (each
replica directory says its topic id in Kafka's `partition.metadata`)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from partitions_cluster import make_batch

from broker_agent.partitions import replica_manager as rm_module
from broker_agent.partitions import topic_identity
from broker_agent.partitions.assignments import MetadataView, PartitionAssignment
from broker_agent.partitions.log_deleter import DELETE_SUFFIX, LogDeleter
from broker_agent.partitions.replica_config import ReplicaConfig
from broker_agent.partitions.replica_manager import ReplicaManager
from quorum.controller.metadata_image import MetadataImage
from quorum.controller.record_codec import encode, wrap
from quorum.gen import metadata_pb2 as md

BROKER = 0


def view(topic_id: str) -> MetadataView:
    part = PartitionAssignment("orders", topic_id, 0, (BROKER,), (BROKER,), BROKER, 0, 0)
    return MetadataView((part,), {"orders": {}})


def manager(root: Path) -> ReplicaManager:
    return ReplicaManager(BROKER, root, ReplicaConfig(tick_interval_ms=None))


async def append(rm: ReplicaManager, value: bytes) -> None:
    result = await rm.append("orders", 0, make_batch(value), 1, 10_000)
    assert result.error.value == 0, result


def log_end(rm: ReplicaManager) -> int:
    part = rm.partition_state("orders", 0)
    assert part is not None
    return part.log.log_end_offset


async def settled(rm: ReplicaManager) -> None:
    for _ in range(1000):
        if not rm._opener.opening:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("logs still opening")


class Meta:
    """A metadata image fed records as the agent applies them."""

    def __init__(self) -> None:
        self.image = MetadataImage()

    def add(self, **record: object) -> MetadataImage:
        self.image.apply(self.image.applied_offset, encode(wrap(**record)))
        return self.image

    def topic(self, topic_id: str) -> MetadataImage:
        self.add(topic=md.TopicRecord(name="orders", topic_id=topic_id))
        mine = [BROKER]
        record = md.PartitionRecord(
            topic_id=topic_id, partition_id=0, replicas=mine, isr=mine, leader=BROKER
        )
        return self.add(partition=record)


def test_claim_writes_keeps_adopts_and_sets_aside(tmp_path: Path) -> None:
    deleter = LogDeleter(BROKER)
    try:
        directory = tmp_path / "orders-0"
        assert topic_identity.claim(directory, "A", deleter) is False
        assert topic_identity.read_topic_id(directory) == "A"
        (directory / "data").write_bytes(b"x")
        assert topic_identity.claim(directory, "A", deleter) is False
        assert (directory / "data").exists()
        # A directory from before the file existed is adopted, its data kept.
        (directory / topic_identity.PARTITION_METADATA).unlink()
        assert topic_identity.claim(directory, "A", deleter) is False
        assert (directory / "data").exists() and topic_identity.read_topic_id(directory) == "A"
        # Another topic's directory is set aside (and removed), a new one made.
        assert topic_identity.claim(directory, "B", deleter) is True
        assert topic_identity.read_topic_id(directory) == "B"
        assert not (directory / "data").exists()
        deleter.wait()
        assert not [p for p in tmp_path.iterdir() if p.name.endswith(DELETE_SUFFIX)]
        # Garbage or an unknown version reads as "no file".
        (directory / topic_identity.PARTITION_METADATA).write_bytes(b"\xff\x00 nonsense")
        assert topic_identity.read_topic_id(directory) is None
        (directory / topic_identity.PARTITION_METADATA).write_text("version: 9\ntopic_id: B\n")
        assert topic_identity.read_topic_id(directory) is None
    finally:
        deleter.close()


def test_a_restarted_broker_keeps_its_topics_log_and_drops_a_dead_namesakes(
    tmp_path: Path,
) -> None:
    async def go() -> None:
        rm = manager(tmp_path)
        rm.apply_metadata(view("A"))
        await append(rm, b"a1")
        await append(rm, b"a2")
        await rm.close()
        rm = manager(tmp_path)  # restarted, the same topic
        try:
            rm.apply_metadata(view("A"))
            assert log_end(rm) == 2
        finally:
            await rm.close()
        rm = manager(tmp_path)  # restarted after "orders" was deleted and re-created
        try:
            rm.apply_metadata(view("B"))
            assert log_end(rm) == 0
            await append(rm, b"b1")
            assert log_end(rm) == 1
        finally:
            await rm.close()

    asyncio.run(go())


def test_delete_and_recreate_in_one_applied_batch(tmp_path: Path) -> None:
    async def go() -> None:
        meta = Meta()
        rm = manager(tmp_path)
        try:
            rm.on_metadata(meta.topic("T1"), open_in_background=True)
            await settled(rm)
            await append(rm, b"old")
            meta.add(remove_topic=md.RemoveTopicRecord(topic_id="T1"))
            rm.on_metadata(meta.topic("T2"), open_in_background=True)  # both at once
            await settled(rm)
            part = rm.partition_state("orders", 0)
            assert part is not None and part.assignment.topic_id == "T2"
            assert part.log.log_end_offset == 0
            assert topic_identity.read_topic_id(tmp_path / "orders-0") == "T2"
        finally:
            await rm.close()

    asyncio.run(go())


def test_recreated_while_the_old_log_was_opening(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate, started = threading.Event(), threading.Event()
    real = ReplicaManager._open_log

    def gated(rm: ReplicaManager, assignment: PartitionAssignment, *args: object) -> object:
        if assignment.topic_id == "T1":
            started.set()
            assert gate.wait(30)
        return real(rm, assignment, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(rm_module.ReplicaManager, "_open_log", gated)

    async def go() -> None:
        meta = Meta()
        rm = manager(tmp_path)
        try:
            rm.on_metadata(meta.topic("T1"), open_in_background=True)
            assert await asyncio.to_thread(started.wait, 10)
            meta.add(remove_topic=md.RemoveTopicRecord(topic_id="T1"))
            rm.on_metadata(meta.topic("T2"), open_in_background=True)
            gate.set()
            for _ in range(1000):
                part = rm.partition_state("orders", 0)
                if part is not None and part.assignment.topic_id == "T2":
                    break
                await asyncio.sleep(0.01)
            await settled(rm)
            part = rm.partition_state("orders", 0)
            assert part is not None and part.assignment.topic_id == "T2"
            assert topic_identity.read_topic_id(tmp_path / "orders-0") == "T2"
            await append(rm, b"new")
            assert part.log.log_end_offset == 1
        finally:
            await rm.close()

    asyncio.run(go())


def test_strays_are_removed_at_the_first_image_and_nothing_else(tmp_path: Path) -> None:
    """A broker restarted after its topic was deleted (or its partition moved
    away) removes that replica's directory once its image has caught up; a
    directory without `partition.metadata`, and the hosted replicas, stay."""

    async def go() -> None:
        rm = manager(tmp_path)
        two = MetadataView(
            tuple(
                PartitionAssignment(t, f"id-{t}", 0, (BROKER,), (BROKER,), BROKER, 0, 0)
                for t in ("orders", "gone")
            ),
            {"orders": {}, "gone": {}},
        )
        rm.apply_metadata(two)
        await append(rm, b"kept")
        await rm.close()
        (tmp_path / "legacy-0").mkdir()  # no partition.metadata: not known to be a replica
        (tmp_path / "legacy-0" / "00000000000000000000.log").write_bytes(b"")
        (tmp_path / "not-a-replica").mkdir()
        meta = Meta()
        meta.add(topic=md.TopicRecord(name="orders", topic_id="id-orders"))
        mine = [BROKER]
        part = md.PartitionRecord(
            topic_id="id-orders", partition_id=0, replicas=mine, isr=mine, leader=BROKER
        )
        meta.add(partition=part)
        rm = manager(tmp_path)  # restarted: "gone" was deleted meanwhile
        try:
            rm.on_metadata(meta.image, open_in_background=True)
            await settled(rm)
            rm._deleter.wait()
            names = sorted(p.name for p in tmp_path.iterdir())
            assert names == ["legacy-0", "not-a-replica", "orders-0"], names
            assert log_end(rm) == 1
            # Only at the first image: a directory appearing later is not looked at.
            stray = tmp_path / "late-0"
            assert topic_identity.claim(stray, "id-late", rm._deleter) is False
            rm.on_metadata(meta.add(register_broker=md.RegisterBrokerRecord(broker_id=7)))
            assert stray.exists()
        finally:
            await rm.close()

    asyncio.run(go())
