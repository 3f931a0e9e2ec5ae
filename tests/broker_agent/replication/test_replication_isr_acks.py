"""ISR by lag (seed 000, `replica.lag.time.max.ms`) and acks=all with
min.insync.replicas (seed 003), on the pure rules."""

from __future__ import annotations

from broker_agent.replication import leader as rules
from broker_agent.replication.acks import AcksOutcome, check_before_append, check_replicated
from broker_agent.replication.epochs import EpochEndOffset, EpochEntry
from broker_agent.replication.follower import diverging_epoch, truncation_offset_by_epoch

LAG_MS = 30_000


def leader_of_three(now_ms: int = 0) -> rules.LeaderState:
    state = rules.become_leader(0, 5, 10, (0, 1, 2), (0, 1, 2), 0, 0, now_ms)
    return rules.on_local_append(state, 10)


def test_follower_that_stops_fetching_leaves_the_isr_after_the_lag_time() -> None:
    state = leader_of_three()
    state = rules.update_follower_fetch_state(state, 1, 10, now_ms=1_000)
    state = rules.update_follower_fetch_state(state, 2, 10, now_ms=1_000)
    state = rules.on_local_append(state, 20)
    state = rules.update_follower_fetch_state(state, 1, 20, now_ms=2_000)
    # Follower 2 has not caught up with LEO 20 since t=1000.
    state, change = rules.maybe_shrink_isr(state, 1_000 + LAG_MS, LAG_MS)
    assert change is None
    state, change = rules.maybe_shrink_isr(state, 1_001 + LAG_MS, LAG_MS)
    assert change == rules.IsrChange((0, 1), leader_epoch=5, partition_epoch=10)
    # Until the controller commits it, the HW still waits for follower 2.
    state, _ = rules.maybe_increment_leader_hw(state)
    assert state.high_watermark == 10


def test_a_follower_fetching_but_never_caught_up_leaves_too() -> None:
    """Time, not message count: fetching busily is not enough when every fetch
    stays short of where the leader was at the previous one (Kafka's rule)."""
    state = leader_of_three()
    for i, t in enumerate(range(0, LAG_MS + 2_000, 1_000)):
        state = rules.on_local_append(state, state.log_end_offset + 10)
        state = rules.update_follower_fetch_state(state, 1, state.log_end_offset, t)
        state = rules.update_follower_fetch_state(state, 2, 5 * i, t)
    _, change = rules.maybe_shrink_isr(state, LAG_MS + 1_000, LAG_MS)
    assert change is not None and change.new_isr == (0, 1)


def test_follower_rejoins_once_it_reaches_the_hw_in_the_current_epoch() -> None:
    state = rules.become_leader(0, 5, 10, (0, 1, 2), (0, 1), 40, 30, now_ms=0)
    state = rules.update_follower_fetch_state(state, 1, 40, 0)
    state, _ = rules.maybe_increment_leader_hw(state)
    assert state.high_watermark == 40 and state.leader_epoch_start_offset == 40
    state = rules.update_follower_fetch_state(state, 2, 35, 0)
    assert rules.maybe_expand_isr(state, 2)[1] is None  # below the HW
    state = rules.update_follower_fetch_state(state, 2, 40, 0)
    state, change = rules.maybe_expand_isr(state, 2)
    assert change == rules.IsrChange((0, 1, 2), 5, 10)
    assert rules.maybe_expand_isr(state, 2)[1] is None  # already pending
    # Committed metadata settles it.
    state = rules.update_metadata(state, 11, (0, 1, 2), (0, 1, 2), 0)
    assert state.isr == (0, 1, 2) and state.pending_isr is None


def test_a_refused_isr_change_is_asked_again() -> None:
    state = leader_of_three()
    state = rules.update_follower_fetch_state(state, 1, 10, 0)
    state, change = rules.maybe_shrink_isr(state, LAG_MS + 1, LAG_MS)
    assert change is not None
    state = rules.isr_change_failed(state)
    assert rules.maybe_shrink_isr(state, LAG_MS + 2, LAG_MS)[1] == change


def test_hw_never_moves_back_and_waits_for_unknown_followers() -> None:
    state = leader_of_three()
    state = rules.update_follower_fetch_state(state, 1, 10, 0)
    assert rules.maybe_increment_leader_hw(state)[1] is None  # follower 2 unknown
    state = rules.update_follower_fetch_state(state, 2, 10, 0)
    state, hw = rules.maybe_increment_leader_hw(state)
    assert hw == 10
    state = rules.update_follower_fetch_state(state, 2, 4, 0)  # truncated follower
    assert rules.maybe_increment_leader_hw(state) == (state, None)
    assert state.high_watermark == 10


def test_seed_003_acks_all_needs_min_insync_replicas_before_append() -> None:
    # RF 2, min.insync.replicas=2: with one replica down the ISR is (1,).
    assert check_before_append(-1, isr_size=1, min_insync_replicas=2) is (
        AcksOutcome.NOT_ENOUGH_REPLICAS
    )
    assert check_before_append(1, isr_size=1, min_insync_replicas=2) is AcksOutcome.OK
    assert check_before_append(0, isr_size=1, min_insync_replicas=2) is AcksOutcome.OK
    # min.insync.replicas=1 restores writes.
    assert check_before_append(-1, isr_size=1, min_insync_replicas=1) is AcksOutcome.OK


def test_seed_003_isr_shrinking_while_waiting_is_after_append() -> None:
    assert check_replicated(11, high_watermark=10, isr_size=2, min_insync_replicas=2) is (
        AcksOutcome.PENDING
    )
    assert check_replicated(11, high_watermark=11, isr_size=2, min_insync_replicas=2) is (
        AcksOutcome.OK
    )
    assert check_replicated(11, high_watermark=11, isr_size=1, min_insync_replicas=2) is (
        AcksOutcome.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    )


def test_diverging_epoch_in_a_fetch() -> None:
    leader = [EpochEntry(0, 0), EpochEntry(2, 5)]
    assert diverging_epoch(leader, 9, fetch_offset=5, last_fetched_epoch=0) is None
    assert diverging_epoch(leader, 9, fetch_offset=7, last_fetched_epoch=0) == (0, 5)
    assert diverging_epoch(leader, 9, fetch_offset=7, last_fetched_epoch=1) == (0, 5)
    assert diverging_epoch(leader, 9, fetch_offset=7, last_fetched_epoch=2) is None
    assert diverging_epoch(leader, 9, fetch_offset=0, last_fetched_epoch=-1) is None
    # The follower with epoch 1 at offsets 5..6 cuts to where epoch 0 ends on both.
    follower = [EpochEntry(0, 0), EpochEntry(1, 5)]
    assert truncation_offset_by_epoch(follower, 7, 3, EpochEndOffset(0, 5)) == 5
