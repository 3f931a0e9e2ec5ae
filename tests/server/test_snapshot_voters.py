"""kraft.version 1: a snapshot stores the voter set of its offsets, and a node
that starts from it (or installs it) keeps that set; the state machine never
sees the Raft layer's record."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

from quorum.controller.metadata_image import MetadataImage
from quorum.log.kraft_bootstrap import VOTERS_SNAPSHOT_KEY
from quorum.raft.client_api import LeaderAndEpoch, SnapshotReader
from quorum.raft.config import RaftConfig
from quorum.raft.log import RaftLog
from quorum.raft.node import RaftNode
from quorum.raft.records import Batch, SnapshotId
from quorum.raft.voters import Endpoint, Voter, VoterSet
from quorum.server.commit_delivery import ListenerContext
from quorum.server.local_snapshots import LocalSnapshots
from snapshots.store import FileSnapshotStore

VOTERS = VoterSet(
    tuple(Voter(n, f"dir-{n}", (Endpoint("CONTROLLER", "127.0.0.1", 9092 + n),)) for n in (1, 2, 4))
)
SNAPSHOT = SnapshotId(10, 3)


class Recorder:
    def __init__(self) -> None:
        self.keys: list[bytes] = []

    def handle_commit(self, batches: Sequence[Batch]) -> None:
        pass

    def handle_load_snapshot(self, reader: SnapshotReader) -> None:
        self.keys = [key for key, _ in reader.records]

    def handle_leader_change(self, leader: LeaderAndEpoch) -> None:
        pass


def test_the_voter_set_is_stored_with_a_snapshot_and_hidden_from_the_state_machine(
    tmp_path: Path,
) -> None:
    store = FileSnapshotStore(tmp_path)
    image = MetadataImage()
    LocalSnapshots(store, 2).write(SNAPSHOT, image.snapshot_records(), VOTERS)
    assert any(key == VOTERS_SNAPSHOT_KEY for key, _ in store.read(SNAPSHOT))

    reopened = LocalSnapshots(store, 2, RaftLog(SNAPSHOT))
    assert reopened.voters(SNAPSHOT) == VOTERS
    recorder = Recorder()
    reopened.load_start(ListenerContext(recorder, 0))
    assert VOTERS_SNAPSHOT_KEY not in recorder.keys
    # A broker loads the raw snapshot (FetchSnapshot): the image skips the record too.
    MetadataImage().load_snapshot(store.read(SNAPSHOT), SNAPSHOT.end_offset)

    config = RaftConfig(1, frozenset({1, 2, 3}), kraft_version=1)
    node = RaftNode(config, random.Random(0), 0, log=RaftLog(SNAPSHOT), snapshot_voters=VOTERS)
    assert node.voters == frozenset({1, 2, 4})
    assert node.current_voter_set() == VOTERS


def test_a_kraft_version_0_snapshot_carries_no_voter_set(tmp_path: Path) -> None:
    store = FileSnapshotStore(tmp_path)
    LocalSnapshots(store, 2).write(SNAPSHOT, MetadataImage().snapshot_records())
    assert LocalSnapshots(store, 2, RaftLog(SNAPSHOT)).voters(SNAPSHOT) is None
