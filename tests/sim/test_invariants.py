"""Each checker, fed a planted bad history, must object."""

import pytest

from quorum.sim.invariants import (
    AcknowledgedDurability,
    CommittedAgreement,
    InvariantViolation,
    MonotonicEpoch,
    MonotonicHighWatermark,
    SingleLeaderPerEpoch,
    SingleVoterChange,
    VoterChangeQuorum,
)


def test_single_leader_per_epoch() -> None:
    checker = SingleLeaderPerEpoch()
    checker.on_leader(1, 3)
    checker.on_leader(1, 3)
    checker.on_leader(2, 4)
    with pytest.raises(InvariantViolation, match="two leaders in epoch 3"):
        checker.on_leader(2, 3)


def test_monotonic_epoch_across_restarts() -> None:
    checker = MonotonicEpoch()
    checker.on_epoch(1, 5)
    with pytest.raises(InvariantViolation, match="went back"):
        checker.on_epoch(1, 4)


def test_monotonic_high_watermark_within_an_incarnation() -> None:
    checker = MonotonicHighWatermark()
    checker.on_high_watermark(1, 1, 10)
    checker.on_high_watermark(1, 2, 3)  # a restart may start lower
    with pytest.raises(InvariantViolation, match="went back"):
        checker.on_high_watermark(1, 2, 2)


def test_committed_agreement() -> None:
    checker = CommittedAgreement()
    checker.on_commit(1, 7, 2, b"a")
    checker.on_commit(2, 7, 2, b"a")
    with pytest.raises(InvariantViolation, match="offset 7"):
        checker.on_commit(3, 7, 3, b"b")
    with pytest.raises(InvariantViolation, match="below its high watermark"):
        checker.on_truncate(1, 5, 8)


def test_acknowledged_durability() -> None:
    checker = AcknowledgedDurability()
    checker.on_ack(3, b"x")
    checker.check_state(1, {3: b"x"}, 4)
    checker.check_state(2, {}, 3)  # has not applied offset 3 yet
    with pytest.raises(InvariantViolation, match="lost"):
        checker.check_state(3, {3: b"y"}, 10)


def test_single_voter_change() -> None:
    checker = SingleVoterChange()
    checker.on_high_watermark(10)
    checker.on_voters_appended(1, 12, [4, 12])  # the change at 4 is committed
    with pytest.raises(InvariantViolation, match="while the one at 12 is uncommitted"):
        checker.on_voters_appended(1, 15, [4, 12, 15])
    checker.on_high_watermark(13)
    checker.on_voters_appended(2, 15, [12, 15])


def test_voter_change_quorum() -> None:
    checker = VoterChangeQuorum()
    checker.on_voters_committed(5, frozenset({1, 2, 3, 4}), {1, 2, 4, 5})
    with pytest.raises(InvariantViolation, match="only \\[1, 2\\] of the new set"):
        checker.on_voters_committed(9, frozenset({1, 2, 3, 4}), {1, 2, 5})
