"""The leader-epoch lookup when a log no longer holds its oldest epochs (a
compacted log, or a replica that copied one): an epoch older than every entry
ends where the oldest known epoch starts, as Kafka's epoch cache answers, so a
follower holding the cleaned-away records keeps them and fetches on."""

from __future__ import annotations

from broker_agent.replication.epochs import (
    UNDEFINED,
    EpochEndOffset,
    EpochEntry,
    end_offset_for_epoch,
)
from broker_agent.replication.follower import diverging_epoch, truncation_offset_by_epoch

ENTRIES = [EpochEntry(3, 50), EpochEntry(5, 120)]


def test_an_epoch_older_than_every_entry_ends_at_the_oldest_start() -> None:
    assert end_offset_for_epoch(ENTRIES, 1, 200) == EpochEndOffset(1, 50)
    assert end_offset_for_epoch(ENTRIES, 3, 200) == EpochEndOffset(3, 120)
    assert end_offset_for_epoch(ENTRIES, 4, 200) == EpochEndOffset(3, 120)
    assert end_offset_for_epoch(ENTRIES, 9, 200) == EpochEndOffset(5, 200)


def test_undefined_only_for_an_undefined_epoch_or_an_empty_cache() -> None:
    assert end_offset_for_epoch(ENTRIES, -1, 200) == UNDEFINED
    assert end_offset_for_epoch([], 0, 200) == UNDEFINED


def test_a_follower_behind_a_compacted_leader_keeps_its_records() -> None:
    # The follower holds epoch 0 up to 150; the leader copied a log whose epoch 0
    # was cleaned away, so its cache starts with epoch 1 at 150.
    leader = [EpochEntry(1, 150)]
    answer = end_offset_for_epoch(leader, 0, 300)
    assert answer == EpochEndOffset(0, 150)
    assert truncation_offset_by_epoch([EpochEntry(0, 0)], 150, 90, answer) == 150
    assert diverging_epoch(leader, 300, 150, 0) is None  # the Fetch goes on at 150
    # Records of epoch 0 past where epoch 1 began on the leader did diverge.
    assert diverging_epoch(leader, 300, 160, 0) == EpochEndOffset(0, 150)
    assert truncation_offset_by_epoch([EpochEntry(0, 0)], 160, 90, answer) == 150


def test_a_follower_whose_epochs_the_leader_never_had_cuts_them() -> None:
    # The follower's log starts in epochs 3 and 4, which the leader never had:
    # the leader's epoch 2 runs from 40 to 120, so offsets 50-99 diverged.
    answer = end_offset_for_epoch([EpochEntry(2, 40), EpochEntry(5, 120)], 4, 300)
    assert answer == EpochEndOffset(2, 120)
    assert truncation_offset_by_epoch([EpochEntry(3, 50), EpochEntry(4, 80)], 100, 0, answer) == 50
