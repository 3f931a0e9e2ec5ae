"""Diverging-epoch truncation cuts whole batches, and a follower below the log start
is sent the latest snapshot (quorum/raft/fetching.py)."""

from quorum.raft.fetching import check_fetch_position, truncation_offset
from quorum.raft.log import RaftLog
from quorum.raft.messages import FetchRequest
from quorum.raft.records import Batch, OffsetAndEpoch, SnapshotId


def test_a_diverging_offset_inside_one_of_our_batches_drops_the_whole_batch() -> None:
    """Found by the simulator (lossy seed 238): our last epoch (3) is newer than
    any the leader holds, so it answers with its epoch 2 ending at 1; we have no
    epoch 2, and our epoch 1 batch [0, 2) spans offset 1. The leader does not
    hold that batch as it is, so all of it goes."""
    log = RaftLog()
    log.append(Batch(0, 1, (b"a", b"b"), 0))
    log.append(Batch(2, 3, (b"c",), 0))
    assert truncation_offset(log, OffsetAndEpoch(1, 2), high_watermark=0) == 0


def test_a_diverging_offset_on_a_batch_boundary_is_kept() -> None:
    log = RaftLog()
    log.append(Batch(0, 1, (b"a", b"b"), 0))
    log.append(Batch(2, 1, (b"c",), 0))
    log.append(Batch(3, 3, (b"d",), 0))
    assert truncation_offset(log, OffsetAndEpoch(2, 2), high_watermark=2) == 2


def test_a_follower_below_the_log_start_is_sent_the_latest_snapshot() -> None:
    """KIP-630: the leader names its latest snapshot, not the older one its log
    starts after (the log keeps one retained interval below the latest)."""
    log = RaftLog(SnapshotId(10, 1))
    log.append(Batch(10, 1, tuple(b"x" for _ in range(10)), 0))
    log.append(Batch(20, 2, tuple(b"y" for _ in range(10)), 0))
    behind = FetchRequest(replica_id=2, epoch=2, fetch_offset=4, last_fetched_epoch=1,
                          known_high_watermark=0)  # fmt: skip
    answer = check_fetch_position(log, behind, 2, 1, 30, latest_snapshot=SnapshotId(25, 2))
    assert answer is not None and answer.snapshot_id == SnapshotId(25, 2)
    assert answer.log_start_offset == 10
    # A follower at or past the log start reads on, whatever the latest snapshot.
    at_start = FetchRequest(replica_id=2, epoch=2, fetch_offset=10, last_fetched_epoch=1,
                            known_high_watermark=0)  # fmt: skip
    assert check_fetch_position(log, at_start, 2, 1, 30, latest_snapshot=SnapshotId(25, 2)) is None
    # Without one newer than the log start's, the log start's is named.
    old = check_fetch_position(log, behind, 2, 1, 30, latest_snapshot=SnapshotId(10, 1))
    assert old is not None and old.snapshot_id == SnapshotId(10, 1)
