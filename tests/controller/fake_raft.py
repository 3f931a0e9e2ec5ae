"""A Raft client that commits every proposal at once, and a QuorumController on
it: the controller's tests need nothing of Raft but the seam
(`quorum.raft.client_api`)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from quorum.common.meta_properties import random_uuid
from quorum.controller.controller import QuorumController
from quorum.controller.metadata_image import MetadataImage
from quorum.gen import broker_pb2 as bpb
from quorum.raft.client_api import LeaderAndEpoch, NotLeaderError, RaftListener
from quorum.raft.config import ProposeResult
from quorum.raft.records import Batch, SnapshotId


class FakeRaft:
    """Commits every proposal at once, as a single-voter quorum would."""

    def __init__(self, node_id: int = 1, leading: bool = True) -> None:
        self._node_id = node_id
        self.leading = leading
        self.batches: list[Batch] = []
        self.listeners: list[RaftListener] = []

    @property
    def node_id(self) -> int:
        return self._node_id

    async def propose(self, records: list[bytes]) -> ProposeResult:
        if not self.leading:
            raise NotLeaderError(1, 2)
        base = self.log_end_offset
        self.batches.append(Batch(base, 1, tuple(records), 1000))
        for listener in self.listeners:
            listener.handle_commit([self.batches[-1]])
        return ProposeResult(1, base, base + len(records) - 1)

    def leader_and_epoch(self) -> LeaderAndEpoch:
        return LeaderAndEpoch(self._node_id if self.leading else 2, 1)

    @property
    def high_watermark(self) -> int:
        return self.log_end_offset

    @property
    def log_end_offset(self) -> int:
        return self.batches[-1].next_offset if self.batches else 0

    @property
    def log_start_offset(self) -> int:
        return 0

    @property
    def leader_committed_epoch(self) -> bool:
        return self.leading

    def read_committed(self, offset: int, max_records: int) -> Sequence[Batch]:
        return [b for b in self.batches if b.next_offset > offset]

    def latest_snapshot(self) -> SnapshotId | None:
        return None

    def create_snapshot(self, end_offset: int, capture: object) -> None:
        return None

    def register(self, listener: RaftListener) -> None:
        self.listeners.append(listener)


def controller(raft: FakeRaft) -> QuorumController:
    image = MetadataImage()
    return QuorumController(raft, image, "cluster-a", {1: "a:1", 2: "b:2"})


def register(c: QuorumController, broker_id: int) -> int:
    request = bpb.RegisterBrokerRequest(
        broker_id=broker_id,
        incarnation_id=random_uuid(),
        listeners=[
            bpb.Listener(name="PLAINTEXT", host="h", port=9092, security_protocol="PLAINTEXT")
        ],
    )
    return asyncio.run(c.register_broker(request)).broker_epoch
