"""The metadata log starts after the oldest retained snapshot, not the latest (KIP-630).

A broker or a peer that loaded the latest snapshot while the next one was being
taken must find the log after it still there: otherwise a load longer than the
snapshot interval (a million partitions' on a small machine) is followed by
another load, forever. So with `metadata.snapshot.retain.count` = 2 the log
starts after the older of the two; retention never deletes the snapshot the log
starts after; and a restarted node loads the *newest* snapshot its log holds and
replays only what follows it.

A single voter over a real file log and a real RocksDB snapshot store: it
commits on its own flush, so the driver's real snapshot path runs with no peers.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from pathlib import Path

from no_peers import NoPeers

from quorum.log.file_log import FileLogStore
from quorum.log.memory import MemoryQuorumStateStore
from quorum.raft.client_api import LeaderAndEpoch, SnapshotReader
from quorum.raft.config import RaftConfig
from quorum.raft.effects import Role
from quorum.raft.log import RaftLog
from quorum.raft.records import Batch, SnapshotId
from quorum.server.driver import RaftDriver
from quorum.server.local_snapshots import LocalSnapshots, loadable
from snapshots.memory import MemorySnapshotStore
from snapshots.store import FileSnapshotStore


class Recorder:
    """A state machine whose state is every record it applied, keyed by offset."""

    def __init__(self) -> None:
        self.state: dict[int, bytes] = {}
        self.loaded: list[SnapshotId] = []
        self.applied: list[int] = []  # offsets handed over in batches, in order

    def handle_commit(self, batches: Sequence[Batch]) -> None:
        for batch in batches:
            for i, record in enumerate(batch.records):
                if not batch.control:
                    self.state[batch.base_offset + i] = record
                self.applied.append(batch.base_offset + i)

    def handle_load_snapshot(self, reader: SnapshotReader) -> None:
        self.loaded.append(reader.snapshot_id)
        self.state = {int.from_bytes(k, "big"): v for k, v in reader.records}

    def handle_leader_change(self, leader: LeaderAndEpoch) -> None:
        pass

    def capture(self) -> list[tuple[bytes, bytes]]:
        return [(offset.to_bytes(8, "big"), value) for offset, value in sorted(self.state.items())]


async def start_alone(tmp_path: Path, recorder: Recorder) -> RaftDriver:
    config = RaftConfig(1, frozenset({1}), election_timeout_ms=50, election_backoff_max_ms=20)
    driver = RaftDriver(
        config,
        FileLogStore(tmp_path / "log"),
        MemoryQuorumStateStore(),
        NoPeers(),
        FileSnapshotStore(tmp_path / "snapshots"),
        rng=random.Random(1),
        snapshot_retain_count=2,
    )
    driver.register(recorder)
    driver.start()
    for _ in range(300):
        if driver.core.role is Role.LEADER and driver.core.leader_committed_epoch:
            return driver
        await asyncio.sleep(0.01)
    raise AssertionError("a single voter did not elect itself")


async def snapshot_now(driver: RaftDriver, recorder: Recorder) -> SnapshotId:
    end = driver.core.high_watermark
    task = driver.create_snapshot(end, recorder.capture)
    assert task is not None
    assert await task
    latest = driver.latest_snapshot()
    assert latest is not None and latest.end_offset == end
    return latest


def test_the_log_starts_after_the_oldest_kept_snapshot_and_a_restart_loads_the_newest(
    tmp_path: Path,
) -> None:
    async def scenario() -> tuple[dict[int, bytes], list[SnapshotId]]:
        recorder = Recorder()
        driver = await start_alone(tmp_path, recorder)
        try:
            taken = []
            for round_ in range(3):
                await driver.propose([f"r{round_}-{i}".encode() for i in range(5)])
                taken.append(await snapshot_now(driver, recorder))
                if round_ == 0:
                    assert driver.log_start_offset == taken[0].end_offset
                else:  # the older of the two kept: a fetch from the newer one's end reads on
                    assert driver.log_start_offset == taken[round_ - 1].end_offset
                    assert driver.core.log.snapshot_id == taken[round_ - 1]
                    batches = driver.core.log.read(taken[round_ - 1].end_offset, 100)
                    assert batches and batches[0].base_offset == taken[round_ - 1].end_offset
            assert driver.snapshots is not None
            assert driver.snapshots.store.snapshot_ids() == taken[1:]  # retention: 2
            assert driver.core.latest_snapshot == taken[2]  # what a follower behind is sent
            await driver.propose([b"after-the-last-snapshot"])
            return dict(recorder.state), taken
        finally:
            await driver.stop(resign=False)
            driver.log_store.close()

    state, taken = asyncio.run(scenario())

    async def restart() -> Recorder:
        recorder = Recorder()
        driver = await start_alone(tmp_path, recorder)
        try:
            for _ in range(300):
                if max(recorder.state, default=-1) >= max(state):
                    break
                await asyncio.sleep(0.01)
            assert driver.log_start_offset == taken[1].end_offset  # the log's start kept
            assert driver.core.latest_snapshot == taken[2]
            return recorder
        finally:
            await driver.stop(resign=False)
            driver.log_store.close()

    again = asyncio.run(restart())
    assert again.loaded == [taken[2]]  # the newest, not the one the log starts after
    assert min(again.applied) == taken[2].end_offset  # only what follows it replayed
    assert {k: v for k, v in again.state.items() if k in state} == state


def test_retention_never_deletes_the_snapshot_the_log_starts_after() -> None:
    store = MemorySnapshotStore()
    ids = [SnapshotId(end, 1) for end in (10, 20, 30, 40)]
    for snapshot_id in ids:
        store.write(snapshot_id, [])
    snapshots = LocalSnapshots(store, 2)
    # The log still starts after the oldest (its start could not move yet): it stays.
    assert snapshots.drop_beyond_retention(ids[0]) == [ids[1]]
    assert store.snapshot_ids() == [ids[0], ids[2], ids[3]]
    assert snapshots.drop_beyond_retention(ids[2]) == [ids[0]]
    assert store.snapshot_ids() == ids[2:]


def test_the_log_start_moves_only_to_a_committed_snapshot_the_log_holds() -> None:
    log = RaftLog(None)
    log.append(Batch(0, 1, [b"a"] * 10, 0))
    log.append(Batch(10, 2, [b"b"] * 10, 0))
    log.append(Batch(20, 2, [b"c"] * 10, 0))
    store = MemorySnapshotStore()
    snapshots = LocalSnapshots(store, 2, log)
    store.write(SnapshotId(20, 7), [])  # an epoch the log does not have there
    assert snapshots.log_start(log, high_watermark=30) is None
    store.write(SnapshotId(30, 2), [])
    assert snapshots.log_start(log, high_watermark=25) is None  # (30, 2) is not committed yet
    assert snapshots.log_start(log, high_watermark=30) == SnapshotId(30, 2)
    store.write(SnapshotId(10, 1), [])
    log.advance_start(SnapshotId(10, 1))
    store.delete(SnapshotId(20, 7))
    # The oldest kept is where the log starts already: it stays there.
    assert snapshots.log_start(log, high_watermark=30) is None


def test_a_restart_never_loads_a_snapshot_its_log_does_not_hold() -> None:
    """A downloaded snapshot whose install a crash cut short (the log not yet
    reset to it) is beyond the log or disagrees with it: the log's own is loaded."""
    log = RaftLog(SnapshotId(10, 1))
    log.append(Batch(10, 1, [b"a"] * 10, 0))
    log.append(Batch(20, 3, [b"b"] * 10, 0))  # uncommitted, maybe: not the leader's
    store = MemorySnapshotStore()
    for snapshot_id in (SnapshotId(10, 1), SnapshotId(20, 1), SnapshotId(28, 4)):
        store.write(snapshot_id, [])
    assert loadable(store, log) == SnapshotId(20, 1)
    store.write(SnapshotId(40, 4), [])  # beyond the log's end
    assert loadable(store, log) == SnapshotId(20, 1)
    store.delete(SnapshotId(20, 1))
    assert loadable(store, log) == SnapshotId(10, 1)
