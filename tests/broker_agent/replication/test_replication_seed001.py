"""Seed 001 on the pure rules: the HW walk-through and the two failure
scenarios of KIP-101 that leader-epoch truncation fixes."""

from __future__ import annotations

from replication_harness import (
    Replica,
    fetch,
    fetch_round,
    leader_handles_fetch,
    make_leader,
    produce,
    truncate_before_following,
)

from broker_agent.replication.follower import TruncationMode


def figures(*replicas: Replica) -> list[tuple[int, int]]:
    """(LEO, HW) of each replica, as the seed's diagrams give them."""
    return [(r.log_end_offset, r.high_watermark) for r in replicas]


def test_seed_001_walk_through_of_leo_and_hw() -> None:
    leader, f1, f2 = Replica(0), Replica(1), Replica(2)
    make_leader(leader, epoch=0, replicas=(0, 1, 2), isr=(0, 1, 2))
    # Initial state: nothing anywhere; the leader knows both followers at LEO 0.
    fetch_round(leader, [(f1, None), (f2, None)])
    assert figures(leader, f1, f2) == [(0, 0), (0, 0), (0, 0)]
    assert leader.leader is not None
    assert [leader.leader.follower_leo(r) for r in (1, 2)] == [0, 0]

    # The producer sends two records: leader LEO = 0 + 2 = 2, HW stays 0.
    produce(leader, "a", "b")
    assert figures(leader) == [(2, 0)]

    # Followers fetch at their LEO 0; HW = max[0, min(2, 0, 0)] = 0. Follower 1
    # gets both records, follower 2 one: HW = min[leader HW, LEO] = 0 for both.
    fetch_round(leader, [(f1, 2), (f2, 1)])
    assert figures(leader, f1, f2) == [(2, 0), (2, 0), (1, 0)]

    # Record C: leader LEO = 3.
    produce(leader, "c")
    assert figures(leader) == [(3, 0)]

    # The next fetches carry LEO 2 and 1: HW = max[0, min(3, 2, 1)] = 1. (The
    # seed's leader line prints 0 here, but its followers then take HW 1 from
    # the leader's answer, which only a leader HW of 1 gives.) Each follower
    # gets one more record: F1 LEO 3, HW min[1, 3] = 1; F2 LEO 2, HW min[1, 2] = 1.
    fetch_round(leader, [(f1, 1), (f2, 1)])
    assert figures(leader, f1, f2) == [(3, 1), (3, 1), (2, 1)]

    # "The followers keep fetching, until all replicas agree."
    fetch_round(leader, [(f1, None), (f2, None)])
    assert figures(leader, f1, f2) == [(3, 2), (3, 2), (3, 2)]
    fetch_round(leader, [(f1, None), (f2, None)])
    assert figures(leader, f1, f2) == [(3, 3), (3, 3), (3, 3)]
    assert f1.log == f2.log == leader.log


def test_leader_alone_in_the_isr_moves_the_hw_with_its_leo() -> None:
    leader = Replica(0)
    make_leader(leader, epoch=0, replicas=(0, 1), isr=(0,))
    produce(leader, "a", "b")
    assert figures(leader) == [(2, 2)]


def _acked_m2_with_follower_behind_on_hw() -> tuple[Replica, Replica]:
    """A leads, B follows, both in the ISR. m1 and m2 reach both, A's HW passes m2
    (so acks=all answered the producer), but B crashes before it learns HW 2."""
    a, b = Replica(0), Replica(1)
    make_leader(a, epoch=0, replicas=(0, 1), isr=(0, 1))
    produce(a, "m1")
    fetch(b, a)
    produce(a, "m2")
    fetch(b, a)
    assert figures(a, b) == [(2, 1), (2, 1)]
    # B's next fetch at 2 moves A's HW to 2: m2 is acknowledged. The answer
    # (HW 2) never reaches B, which crashes.
    leader_handles_fetch(a, 1, b.log_end_offset)
    assert figures(a, b) == [(2, 2), (2, 1)]
    return a, b


def test_seed_001_data_loss_with_high_watermark_truncation() -> None:
    a, b = _acked_m2_with_follower_behind_on_hw()
    # B restarts and truncates to its own HW 1: m2 goes. Then A dies and B,
    # still in the ISR, becomes the leader in epoch 1.
    assert truncate_before_following(b, a, TruncationMode.HIGH_WATERMARK) == 1
    make_leader(b, epoch=1, replicas=(0, 1), isr=(1,))
    produce(b, "m3")
    # The acknowledged m2 is not on the leader: consumers read m1, m3.
    assert b.values(b.high_watermark) == ["m1", "m3"]


def test_seed_001_no_data_loss_with_leader_epoch_truncation() -> None:
    a, b = _acked_m2_with_follower_behind_on_hw()
    # B restarts and asks A where its epoch 0 ends: at 2, so B keeps m2.
    assert truncate_before_following(b, a, TruncationMode.LEADER_EPOCH) == 2
    make_leader(b, epoch=1, replicas=(0, 1), isr=(1,))
    produce(b, "m3")
    assert b.values(b.high_watermark) == ["m1", "m2", "m3"]
    truncate_before_following(a, b, TruncationMode.LEADER_EPOCH)
    fetch(a, b)
    assert a.values() == b.values() == ["m1", "m2", "m3"]


def _diverging_after_restart() -> tuple[Replica, Replica]:
    """A has m1 and m2 with HW 2 (B had left the ISR, so A alone moved it); B has
    m1 with HW 1. Both crash; B comes back first and leads epoch 1, writing m3
    at offset 1; then A comes back as its follower."""
    a, b = Replica(0), Replica(1)
    make_leader(a, epoch=0, replicas=(0, 1), isr=(0, 1))
    produce(a, "m1")
    fetch(b, a)
    fetch(b, a)
    assert figures(a, b) == [(1, 1), (1, 1)]
    make_leader(a, epoch=0, replicas=(0, 1), isr=(0,))  # B shrunk out of the ISR
    produce(a, "m2")
    assert figures(a, b) == [(2, 2), (1, 1)]
    make_leader(b, epoch=1, replicas=(0, 1), isr=(1,))
    produce(b, "m3")
    return a, b


def test_seed_001_divergence_with_high_watermark_truncation() -> None:
    a, b = _diverging_after_restart()
    # A truncates to its HW 2: nothing goes, and it fetches from offset 2.
    assert truncate_before_following(a, b, TruncationMode.HIGH_WATERMARK) == 2
    produce(b, "m4")
    a.log.extend(b.log[a.log_end_offset :])  # what a plain fetch at offset 2 returns
    assert a.log_end_offset == b.log_end_offset == 3
    assert a.values() == ["m1", "m2", "m4"]
    assert b.values() == ["m1", "m3", "m4"]  # same offsets, different records


def test_seed_001_no_divergence_with_leader_epoch_truncation() -> None:
    a, b = _diverging_after_restart()
    # A asks B where epoch 0 ends: at 1 on B, so A drops m2.
    assert b.end_offset_for_epoch(0) == (0, 1)
    assert truncate_before_following(a, b, TruncationMode.LEADER_EPOCH) == 1
    produce(b, "m4")
    fetch(a, b)
    assert a.values() == b.values() == ["m1", "m3", "m4"]
    assert a.epochs == b.epochs
