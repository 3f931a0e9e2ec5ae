"""Deleted replicas leave the event loop at once (a rename) and the disk soon
after (a worker thread); a new replica writes no high-watermark checkpoint
until its HW moves."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pytest
from partitions_cluster import Cluster, eventually, make_batch, run

from broker_agent.partitions import log_deleter
from broker_agent.partitions.log_deleter import DELETE_SUFFIX, LogDeleter
from broker_agent.partitions.partition_log import HW_CHECKPOINT, directory_name

T = "events"


def marked(log_dir: Path) -> list[Path]:
    return [p for p in log_dir.iterdir() if p.name.endswith(DELETE_SUFFIX)]


def test_a_deleted_replica_is_renamed_at_once_then_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = threading.Event()
    real_rmtree = shutil.rmtree

    def held_rmtree(path: Path, ignore_errors: bool = False) -> None:
        assert threading.current_thread() is not threading.main_thread()
        release.wait(10)
        real_rmtree(path, ignore_errors=ignore_errors)

    monkeypatch.setattr(log_deleter.shutil, "rmtree", held_rmtree)

    async def scenario(cluster: Cluster) -> None:
        cluster.create_topic(T, replicas=(0,))
        broker = cluster.brokers[0]
        assert (await broker.append(T, 0, make_batch(b"old"), 1, 1_000)).base_offset == 0
        live = broker.log_dir / directory_name(T, 0)
        assert live.is_dir()

        del cluster.controller.partitions[(T, 0)]
        cluster.publish()
        # The apply returned while the removal waits in the worker thread: the
        # replica's name is free already, its data renamed aside.
        assert not live.exists()
        assert len(marked(broker.log_dir)) == 1
        release.set()
        await eventually(lambda: not marked(broker.log_dir), "the marked directory removed")

        # The same name again is a new, empty replica (nothing of the deleted one).
        cluster.create_topic(T, replicas=(0,))
        assert broker.log_end_offset(T, 0) == 0
        assert (await broker.append(T, 0, make_batch(b"new"), 1, 1_000)).base_offset == 0
        assert b"old" not in await cluster.consume(0, T)

    run(scenario, tmp_path, broker_ids=(0,))


def test_directories_left_marked_by_a_crash_are_removed_at_start(tmp_path: Path) -> None:
    async def scenario(cluster: Cluster) -> None:
        cluster.create_topic(T, replicas=(0,))
        await cluster.brokers[0].append(T, 0, make_batch(b"kept"), 1, 1_000)
        await cluster.stop_broker(0)
        log_dir = tmp_path / "broker-0"
        leftover = log_dir / f"gone-3.{'a' * 32}{DELETE_SUFFIX}"
        (leftover / "sub").mkdir(parents=True)
        (leftover / "sub" / "00000000000000000000.log").write_bytes(b"x" * 100)
        # A topic whose name ends in "-delete" is a replica like any other.
        cluster.create_topic("x-delete", replicas=(0,))

        broker = await cluster.start_broker(0)
        await eventually(lambda: not leftover.exists(), "the leftover removed")
        assert (log_dir / directory_name("x-delete", 0)).is_dir()
        assert b"kept" in await cluster.consume(0, T)
        assert broker.log_end_offset(T, 0) == 1

    run(scenario, tmp_path, broker_ids=(0,))


def test_a_missing_directory_is_no_error(tmp_path: Path) -> None:
    deleter = LogDeleter(7)
    try:
        assert deleter.delete(tmp_path / "never-0") is None
        (tmp_path / "t-0").mkdir()
        renamed = deleter.delete(tmp_path / "t-0")
        assert renamed is not None and renamed.name.startswith("t-0.")
        deleter.wait()
        assert list(tmp_path.iterdir()) == []
    finally:
        deleter.close()


def test_a_new_replica_writes_its_checkpoint_only_once_its_hw_moves(tmp_path: Path) -> None:
    async def scenario(cluster: Cluster) -> None:
        cluster.create_topic(T, replicas=(0,))
        broker = cluster.brokers[0]
        checkpoint = broker.log_dir / directory_name(T, 0) / HW_CHECKPOINT
        broker.tick()
        assert not checkpoint.exists()  # HW 0 is what a load without it gives
        await broker.append(T, 0, make_batch(b"a"), -1, 1_000)
        broker.tick()
        assert checkpoint.read_text().strip() == "1"

    run(scenario, tmp_path, broker_ids=(0,))
