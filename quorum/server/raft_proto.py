"""The Raft core's message values to and from their protobuf wire form (the metadata
records' codec is `quorum.controller.record_codec`).

Kept in one place so the transport never hand-builds a message and the mapping
can be tested as a round trip.
"""

from __future__ import annotations

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

NO_LEADER = -1


def _leader_out(leader_id: int | None) -> int:
    return NO_LEADER if leader_id is None else leader_id


def _leader_in(leader_id: int) -> int | None:
    return None if leader_id < 0 else leader_id


def batch_to_proto(batch: Batch) -> pb.RecordBatch:
    return pb.RecordBatch(
        base_offset=batch.base_offset,
        leader_epoch=batch.epoch,
        records=list(batch.records),
        append_time_ms=batch.append_time_ms,
        control=batch.control,
    )


def batch_from_proto(batch: pb.RecordBatch) -> Batch:
    return Batch(
        batch.base_offset,
        batch.leader_epoch,
        tuple(batch.records),
        batch.append_time_ms,
        batch.control,
    )


def to_proto(message: Message, cluster_id: str) -> object:
    """The protobuf form of a core message; requests carry `cluster_id`."""
    match message:
        case VoteRequest():
            return pb.VoteRequest(
                cluster_id=cluster_id,
                candidate_epoch=message.candidate_epoch,
                candidate_id=message.candidate_id,
                last_offset_epoch=message.last_offset_epoch,
                last_offset=message.last_offset,
                pre_vote=message.pre_vote,
            )
        case VoteResponse():
            return pb.VoteResponse(
                error_code=message.error.value,
                epoch=message.epoch,
                vote_granted=message.vote_granted,
                leader_id=_leader_out(message.leader_id),
                pre_vote=message.pre_vote,
            )
        case BeginQuorumEpochRequest():
            return pb.BeginQuorumEpochRequest(
                cluster_id=cluster_id,
                leader_epoch=message.leader_epoch,
                leader_id=message.leader_id,
            )
        case BeginQuorumEpochResponse():
            return pb.BeginQuorumEpochResponse(
                error_code=message.error.value,
                epoch=message.epoch,
                leader_id=_leader_out(message.leader_id),
            )
        case EndQuorumEpochRequest():
            return pb.EndQuorumEpochRequest(
                cluster_id=cluster_id,
                leader_epoch=message.leader_epoch,
                leader_id=message.leader_id,
                preferred_successors=list(message.preferred_successors),
            )
        case EndQuorumEpochResponse():
            return pb.EndQuorumEpochResponse(
                error_code=message.error.value,
                epoch=message.epoch,
                leader_id=_leader_out(message.leader_id),
            )
        case FetchRequest():
            return pb.FetchRequest(
                cluster_id=cluster_id,
                replica_id=message.replica_id,
                epoch=message.epoch,
                fetch_offset=message.fetch_offset,
                last_fetched_epoch=message.last_fetched_epoch,
                known_high_watermark=message.known_high_watermark,
                replica_directory_id=message.replica_directory_id,
            )
        case FetchResponse():
            out = pb.FetchResponse(
                error_code=message.error.value,
                epoch=message.epoch,
                leader_id=_leader_out(message.leader_id),
                high_watermark=message.high_watermark,
                log_start_offset=message.log_start_offset,
                batches=[batch_to_proto(b) for b in message.batches],
            )
            if message.diverging_epoch is not None:
                out.diverging_epoch.CopyFrom(
                    pb.OffsetAndEpoch(
                        offset=message.diverging_epoch.offset, epoch=message.diverging_epoch.epoch
                    )
                )
            if message.snapshot_id is not None:
                out.snapshot_id.CopyFrom(
                    pb.SnapshotId(
                        end_offset=message.snapshot_id.end_offset, epoch=message.snapshot_id.epoch
                    )
                )
            return out
    raise TypeError(f"not a protocol message: {message!r}")


def from_proto(message: object) -> Message:
    """The core's value for a protobuf message (the caller checks the cluster id)."""
    match message:
        case pb.VoteRequest():
            return VoteRequest(
                message.candidate_epoch,
                message.candidate_id,
                message.last_offset_epoch,
                message.last_offset,
                message.pre_vote,
            )
        case pb.VoteResponse():
            return VoteResponse(
                message.epoch,
                message.vote_granted,
                _leader_in(message.leader_id),
                message.pre_vote,
                ErrorCode(message.error_code),
            )
        case pb.BeginQuorumEpochRequest():
            return BeginQuorumEpochRequest(message.leader_epoch, message.leader_id)
        case pb.BeginQuorumEpochResponse():
            return BeginQuorumEpochResponse(
                message.epoch, _leader_in(message.leader_id), ErrorCode(message.error_code)
            )
        case pb.EndQuorumEpochRequest():
            return EndQuorumEpochRequest(
                message.leader_epoch, message.leader_id, tuple(message.preferred_successors)
            )
        case pb.EndQuorumEpochResponse():
            return EndQuorumEpochResponse(
                message.epoch, _leader_in(message.leader_id), ErrorCode(message.error_code)
            )
        case pb.FetchRequest():
            return FetchRequest(
                message.replica_id,
                message.epoch,
                message.fetch_offset,
                message.last_fetched_epoch,
                message.known_high_watermark,
                message.replica_directory_id,
            )
        case pb.FetchResponse():
            diverging = (
                OffsetAndEpoch(message.diverging_epoch.offset, message.diverging_epoch.epoch)
                if message.HasField("diverging_epoch")
                else None
            )
            snapshot = (
                SnapshotId(message.snapshot_id.end_offset, message.snapshot_id.epoch)
                if message.HasField("snapshot_id")
                else None
            )
            return FetchResponse(
                message.epoch,
                _leader_in(message.leader_id),
                message.high_watermark,
                message.log_start_offset,
                tuple(batch_from_proto(b) for b in message.batches),
                diverging,
                snapshot,
                ErrorCode(message.error_code),
            )
    raise TypeError(f"not a quorum protobuf message: {type(message).__name__}")
