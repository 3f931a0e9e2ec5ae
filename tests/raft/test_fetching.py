"""Diverging-epoch truncation cuts whole batches (quorum/raft/fetching.py)."""

from quorum.raft.fetching import truncation_offset
from quorum.raft.log import RaftLog
from quorum.raft.records import Batch, OffsetAndEpoch


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
