"""Creating a replica's log syncs nothing; its first flush makes the log durable
whole (segment, directory, the log directory's entry for it); a kill -9 loses
nothing written; and a deleted replica's rename is durable before a new log
takes its name, so a power loss cannot bring the old data back under it.

The syncs are observed on the real files (os.fsync / os.fdatasync wrapped to
note which file each one synced, then called).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from partitions_cluster import Cluster, make_batch, run

from broker_agent.partitions.log_deleter import LogDeleter
from broker_agent.partitions.partition_log import LogConfig, PartitionLog, directory_name
from broker_agent.partitions.record_batch import split_batches
from quorum.log.file_log import FileLogStore

REPO = Path(__file__).resolve().parents[3]
T = "events"


@pytest.fixture
def syncs(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, Path]]]:
    """("sync", path) per fsync/fdatasync and ("mkdir", path) per directory made, in order."""
    events: list[tuple[str, Path]] = []
    lock = threading.Lock()

    def noting(real: Callable[[int], None]) -> Callable[[int], None]:
        def call(fd: int) -> None:
            with lock:
                events.append(("sync", Path(os.readlink(f"/proc/self/fd/{fd}"))))
            real(fd)

        return call

    real_mkdir = os.mkdir

    def mkdir(path: str | Path, mode: int = 0o777, *args: object, **kwargs: object) -> None:
        real_mkdir(path, mode)
        with lock:
            events.append(("mkdir", Path(path)))

    monkeypatch.setattr(os, "fsync", noting(os.fsync))
    monkeypatch.setattr(os, "fdatasync", noting(os.fdatasync))
    monkeypatch.setattr(os, "mkdir", mkdir)
    yield events


def synced(events: list[tuple[str, Path]]) -> list[Path]:
    return [path for kind, path in events if kind == "sync"]


def append(log: PartitionLog, value: bytes) -> int:
    return log.append_as_leader(split_batches(make_batch(value)), 0, 0)


def test_a_new_log_syncs_nothing_until_its_first_flush(
    tmp_path: Path, syncs: list[tuple[str, Path]]
) -> None:
    directory = tmp_path / directory_name(T, 0)
    log = PartitionLog(directory, LogConfig(flush_interval_messages=1), 0)
    try:
        assert synced(syncs) == []
        append(log, b"a")  # flush.messages=1: flushed before the append returns
        # (and the leader-epoch cache, written at the first flush after an epoch change)
        assert {directory / "00000000000000000000.log", directory, tmp_path} <= set(synced(syncs))
        syncs.clear()
        append(log, b"b")  # the entries are durable now: only the segment again
        assert synced(syncs) == [directory / "00000000000000000000.log"]
    finally:
        log.close()


def test_a_reopened_log_syncs_its_entries_again_at_its_first_flush(
    tmp_path: Path, syncs: list[tuple[str, Path]]
) -> None:
    """Created, written and never flushed by a process that was then killed: the
    next process cannot tell whether the entries reached the disk, so its first
    flush syncs them too."""
    directory = tmp_path / directory_name(T, 0)
    first = PartitionLog(directory, LogConfig(), 0)
    append(first, b"a")
    first.close()
    log = PartitionLog(directory, LogConfig(flush_interval_messages=1), 0)
    try:
        assert synced(syncs) == []
        append(log, b"b")
        assert {directory / "00000000000000000000.log", directory, tmp_path} <= set(synced(syncs))
        syncs.clear()
        append(log, b"c")
        assert synced(syncs) == [directory / "00000000000000000000.log"]
    finally:
        log.close()


def test_the_raft_log_still_syncs_its_new_first_segment_at_open(
    tmp_path: Path, syncs: list[tuple[str, Path]]
) -> None:
    with FileLogStore(tmp_path / "raft"):
        assert tmp_path / "raft" in synced(syncs)
    syncs.clear()
    with FileLogStore(tmp_path / "replica", offset_gaps=True, sync_on_open=False):
        assert synced(syncs) == []


CHILD = """
import sys, time
from pathlib import Path
sys.path[:0] = [sys.argv[1], sys.argv[1] + "/tests/broker_agent/partitions"]
from partitions_cluster import make_batch
from broker_agent.partitions.partition_log import LogConfig, PartitionLog
from broker_agent.partitions.record_batch import split_batches
logs = [PartitionLog(Path(sys.argv[2]) / f"events-{p}", LogConfig(), 0) for p in range(3)]
logs[0].append_as_leader(split_batches(make_batch(b"written")), 0, 0)
print("ready", flush=True)
time.sleep(60)
"""


def test_a_killed_broker_loses_no_new_log_and_nothing_written_to_one(tmp_path: Path) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(REPO), str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == "ready\n"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(30)
    for partition in range(3):
        log = PartitionLog(tmp_path / directory_name(T, partition), LogConfig(), 0)
        try:
            assert log.log_end_offset == (1 if partition == 0 else 0)
            assert (b"written" in log.read(0, 1 << 20, 1)) is (partition == 0)
        finally:
            log.close()


def test_a_deleted_replicas_rename_is_durable_before_a_new_log_takes_its_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, syncs: list[tuple[str, Path]]
) -> None:
    release = threading.Event()
    real_remove = LogDeleter._remove

    def held_remove(self: LogDeleter, path: Path) -> None:
        release.wait(10)  # the worker's own sync comes too late to count
        real_remove(self, path)

    monkeypatch.setattr(LogDeleter, "_remove", held_remove)

    async def scenario(cluster: Cluster) -> None:
        broker = cluster.brokers[0]
        live = broker.log_dir / directory_name(T, 0)
        try:
            cluster.create_topic(T, replicas=(0,))
            await broker.append(T, 0, make_batch(b"old"), 1, 1_000)
            other = broker.log_dir / directory_name("other", 0)
            cluster.create_topic("other", replicas=(0,))
            assert broker.log_dir not in synced(syncs)  # new logs sync nothing

            del cluster.controller.partitions[(T, 0)]
            cluster.publish()
            cluster.create_topic(T, replicas=(0,))
            made = syncs.index(("mkdir", live), syncs.index(("mkdir", other)) + 1)
            assert ("sync", broker.log_dir) in syncs[:made]  # the rename, before the new name
            assert b"old" not in await cluster.consume(0, T)
        finally:
            release.set()

    run(scenario, tmp_path, broker_ids=(0,))


def test_the_deleter_syncs_the_renames_before_removing(
    tmp_path: Path, syncs: list[tuple[str, Path]]
) -> None:
    deleter = LogDeleter(7)
    try:
        for name in ("a-0", "b-0", "c-0"):
            (tmp_path / name).mkdir()
        for name in ("a-0", "b-0", "c-0"):
            deleter.delete(tmp_path / name)
        deleter.wait()
        assert list(tmp_path.iterdir()) == []
        assert 1 <= synced(syncs).count(tmp_path) <= 3
    finally:
        deleter.close()
