"""A transport for a single-voter driver: it commits on its own flush, so the
real driver runs with no peers, and any message it tries to send is a bug."""

from __future__ import annotations

from quorum.raft.messages import Message
from quorum.raft.records import SnapshotId
from quorum.server.driver import RaftDriver
from snapshots.api import SnapshotChunk


class NoPeers:
    def bind(self, driver: RaftDriver) -> None:
        pass

    def send_request(self, destination: int, message: Message) -> None:
        raise AssertionError(f"a single voter has no one to send {message} to")

    async def fetch_snapshot_chunk(
        self, leader: int, epoch: int, snapshot_id: SnapshotId, position: int, max_bytes: int
    ) -> SnapshotChunk:
        raise AssertionError("no snapshot to fetch")
