"""Pure decisions of pull replication, kept apart so each can be read alone.

The leader answers a Fetch with records, a diverging epoch (the follower must
truncate) or its snapshot id (the follower must start over from it); the
follower truncates to where the logs agree. None of this depends on the role
machinery, only on the log and the request.
"""

from __future__ import annotations

from quorum.raft.log import RaftLog
from quorum.raft.messages import ErrorCode, FetchRequest, FetchResponse
from quorum.raft.records import OffsetAndEpoch, SnapshotId


def check_fetch_position(
    log: RaftLog,
    req: FetchRequest,
    epoch: int,
    leader_id: int,
    high_watermark: int,
    latest_snapshot: SnapshotId | None = None,
) -> FetchResponse | None:
    """Answer a snapshot id or a diverging epoch when the follower's log disagrees.
    The snapshot named is the newest stored (`latest_snapshot`), as KIP-630's
    leader names its latest, else the one the log starts after."""
    snapshot = log.snapshot_id
    if latest_snapshot is not None and (
        snapshot is None or latest_snapshot.end_offset > snapshot.end_offset
    ):
        snapshot = latest_snapshot
    found = log.end_offset_for_epoch(req.last_fetched_epoch)
    # Below our log start, or an epoch older than any we kept: we cannot say
    # where the follower diverges, so it must start over from our snapshot.
    if (req.fetch_offset < log.start_offset or found.offset < 0) and snapshot is not None:
        return FetchResponse(
            epoch, leader_id, high_watermark, log.start_offset, snapshot_id=snapshot
        )
    if found.epoch < req.last_fetched_epoch or req.fetch_offset > found.offset:
        diverging = OffsetAndEpoch(max(found.offset, 0), max(found.epoch, 0))
        return FetchResponse(
            epoch, leader_id, high_watermark, log.start_offset, diverging_epoch=diverging
        )
    return None


def fetch_error(request_epoch: int, epoch: int) -> ErrorCode:
    """Why a node that is not this epoch's leader refuses a Fetch."""
    if request_epoch < epoch:
        return ErrorCode.FENCED_LEADER_EPOCH
    if request_epoch > epoch:
        return ErrorCode.UNKNOWN_LEADER_EPOCH
    return ErrorCode.NOT_LEADER_OR_FOLLOWER


def truncation_offset(log: RaftLog, diverging: OffsetAndEpoch, high_watermark: int) -> int:
    """Where a follower cuts its log for the leader's diverging epoch: the smaller
    of the leader's end of that epoch and ours, never below our log start.
    Committed entries are never cut: a leader asking for that is a bug."""
    mine = log.end_offset_for_epoch(diverging.epoch)
    end = min(diverging.offset, mine.offset) if mine.offset >= 0 else diverging.offset
    end = max(end, log.start_offset)
    # Whole batches only. Our last epoch may be older than the leader's answer
    # (it names the largest epoch it holds up to ours), so the offset can fall
    # inside one of our batches that the leader does not hold: drop it whole,
    # as Kafka truncates a segment at the batch containing the offset.
    containing = log.batch_at(end)
    if containing is not None and containing.base_offset < end:
        end = containing.base_offset
    if end < high_watermark:
        raise AssertionError(f"truncation to {end} below high watermark {high_watermark}")
    return end


def batch_bounds(sizes: list[int], limit: int) -> list[tuple[int, int]]:
    """Cut queued proposals into batches of at most `limit` records, never splitting
    one proposal: a batch is what a crash keeps or loses whole, so a proposal the
    controller meant as one atomic change must not straddle two. A proposal larger
    than `limit` gets a batch of its own."""
    bounds: list[tuple[int, int]] = []
    start = end = 0
    for size in sizes:
        if end > start and end - start + size > limit:
            bounds.append((start, end))
            start = end
        end += size
    if end > start:
        bounds.append((start, end))
    return bounds
