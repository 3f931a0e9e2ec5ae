import pytest

from quorum.raft.log import RaftLog
from quorum.raft.records import Batch, OffsetAndEpoch, SnapshotId


def batch(base: int, epoch: int, n: int = 2) -> Batch:
    return Batch(base, epoch, tuple(b"r%d" % (base + i) for i in range(n)), 0)


def make_log() -> RaftLog:
    log = RaftLog()
    for base, epoch in ((0, 1), (2, 1), (4, 2), (6, 4)):
        log.append(batch(base, epoch))
    return log


def test_end_offset_for_epoch_answers_the_leader_epoch_lookup() -> None:
    log = make_log()
    assert log.end_offset_for_epoch(1) == OffsetAndEpoch(4, 1)
    assert log.end_offset_for_epoch(2) == OffsetAndEpoch(6, 2)
    # Epoch 3 never had entries here: the largest epoch below it is 2.
    assert log.end_offset_for_epoch(3) == OffsetAndEpoch(6, 2)
    assert log.end_offset_for_epoch(4) == OffsetAndEpoch(8, 4)
    assert log.end_offset_for_epoch(0) == OffsetAndEpoch(0, 0)


def test_append_must_be_contiguous_and_epochs_non_decreasing() -> None:
    log = make_log()
    with pytest.raises(ValueError):
        log.append(batch(9, 4))
    with pytest.raises(ValueError):
        log.append(batch(8, 3))


def test_truncate_drops_entries_and_their_epochs() -> None:
    log = make_log()
    log.truncate_to(4)
    assert log.end_offset_and_epoch() == OffsetAndEpoch(4, 1)
    assert log.end_offset_for_epoch(4) == OffsetAndEpoch(4, 1)
    with pytest.raises(ValueError):
        log.truncate_to(3)  # inside a batch


def test_read_returns_whole_batches_from_the_offset() -> None:
    log = make_log()
    assert [b.base_offset for b in log.read(3, 1)] == [2]
    assert [b.base_offset for b in log.read(2, 100)] == [2, 4, 6]
    assert log.read(8, 10) == ()


def test_advance_start_keeps_the_tail_and_the_snapshot_epoch() -> None:
    log = make_log()
    log.advance_start(SnapshotId(4, 1))
    assert log.start_offset == 4
    assert log.batch_at(2) is None
    assert log.epoch_at(3) == 1
    assert log.end_offset_for_epoch(2) == OffsetAndEpoch(6, 2)
    # An epoch older than anything kept is unknown: the caller must send a snapshot.
    assert log.end_offset_for_epoch(0).offset == -1


def test_reset_to_snapshot_empties_the_log() -> None:
    log = make_log()
    log.reset_to_snapshot(SnapshotId(20, 5))
    assert log.end_offset_and_epoch() == OffsetAndEpoch(20, 5)
    assert log.read(20, 10) == ()
