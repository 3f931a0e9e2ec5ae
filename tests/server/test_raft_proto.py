"""Every core message survives the trip through its protobuf wire form."""

import pytest

from quorum.gen import raft_pb2 as pb
from quorum.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    ErrorCode,
    FetchRequest,
    FetchResponse,
    Message,
    VoteRequest,
    VoteResponse,
)
from quorum.raft.records import Batch, OffsetAndEpoch, SnapshotId
from quorum.server.raft_proto import from_proto, to_proto

MESSAGES: list[Message] = [
    VoteRequest(4, 2, 3, 120, pre_vote=True),
    VoteResponse(4, True, None, pre_vote=False),
    VoteResponse(5, False, 3, pre_vote=True, error=ErrorCode.FENCED_LEADER_EPOCH),
    BeginQuorumEpochRequest(6, 1),
    BeginQuorumEpochResponse(6, 1),
    EndQuorumEpochRequest(6, 1, (3, 2)),
    EndQuorumEpochResponse(6, None, ErrorCode.NOT_LEADER_OR_FOLLOWER),
    FetchRequest(2, 6, 300, 5, 290),
    FetchResponse(6, 1, 301, 0, (Batch(300, 6, (b"a", b""), 17, control=True),)),
    FetchResponse(6, 1, 301, 0, diverging_epoch=OffsetAndEpoch(250, 5)),
    FetchResponse(6, 1, 301, 200, snapshot_id=SnapshotId(200, 4)),
]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: type(m).__name__)
def test_round_trip(message: Message) -> None:
    wire = to_proto(message, "cluster-a")
    decoded = type(wire).FromString(wire.SerializeToString())  # type: ignore[attr-defined]
    assert from_proto(decoded) == message


def test_requests_carry_the_cluster_id() -> None:
    wire = to_proto(FetchRequest(2, 6, 300, 5, 290), "cluster-a")
    assert isinstance(wire, pb.FetchRequest) and wire.cluster_id == "cluster-a"
