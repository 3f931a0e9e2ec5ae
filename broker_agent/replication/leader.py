"""The partition leader's rules (seed 001's HW walk-through, seed 000's ISR).

Named after the methods of Kafka's `Partition.scala` whose meaning they keep:

* `update_follower_fetch_state`: a follower's fetch at offset X says its LEO is X
  (the seed: "the follower sends its LEO as the fetch offset"); it is caught up
  when X reaches the leader's LEO, or the LEO the leader had at its previous fetch.
* `maybe_increment_leader_hw`: HW = max(HW, min(LEO over the ISR)), the seed's
  `Math.max[HW, min(LeaderLEO, F1-LEO, F2-LEO)]`; with the leader alone in the
  ISR the HW follows its LEO.
* `maybe_shrink_isr`: an ISR follower that has not caught up with the leader's
  LEO within `replica.lag.time.max.ms` is out of sync (time, not message count:
  a count threshold either evicts healthy followers on every burst or never
  evicts a stuck one; Kafka dropped `replica.lag.max.messages` in 0.9).
* `maybe_expand_isr`: a follower outside the ISR rejoins once its LEO reaches
  the HW and the start of the current leader epoch.

ISR changes are requests: the leader asks the controller (AlterPartition) and
keeps the *maximal* ISR (current plus what it asked to add) for the HW until
the change comes back in committed metadata, as Kafka's `PendingExpandIsr` does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

UNKNOWN_OFFSET = -1


@dataclass(frozen=True, slots=True)
class FollowerProgress:
    """What the leader knows of one follower (Kafka's `Replica` state)."""

    log_end_offset: int = UNKNOWN_OFFSET
    last_caught_up_time_ms: int = 0
    last_fetch_time_ms: int = 0
    last_fetch_leader_log_end_offset: int = UNKNOWN_OFFSET


@dataclass(frozen=True, slots=True)
class LeaderState:
    """One partition as its leader sees it."""

    leader_id: int
    leader_epoch: int
    partition_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    log_end_offset: int
    high_watermark: int
    leader_epoch_start_offset: int
    followers: Mapping[int, FollowerProgress]
    pending_isr: tuple[int, ...] | None = None  # asked for, not yet committed

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        """The ISR the HW must wait for: the committed one plus pending additions."""
        if self.pending_isr is None:
            return self.isr
        return tuple(sorted(set(self.isr) | set(self.pending_isr)))

    def follower_leo(self, replica_id: int) -> int:
        if replica_id == self.leader_id:
            return self.log_end_offset
        return self.followers.get(replica_id, FollowerProgress()).log_end_offset


@dataclass(frozen=True, slots=True)
class IsrChange:
    """An AlterPartition to send: the ISR the leader wants, at the partition epoch it read."""

    new_isr: tuple[int, ...]
    leader_epoch: int
    partition_epoch: int


def become_leader(
    leader_id: int,
    leader_epoch: int,
    partition_epoch: int,
    replicas: Iterable[int],
    isr: Iterable[int],
    log_end_offset: int,
    high_watermark: int,
    now_ms: int,
) -> LeaderState:
    """A replica takes the lead: every follower's LEO is unknown until it fetches;
    ISR followers count as caught up now, so none is evicted before it could fetch."""
    isr_t = tuple(isr)
    followers = {
        r: FollowerProgress(last_caught_up_time_ms=now_ms if r in isr_t else 0)
        for r in replicas
        if r != leader_id
    }
    return LeaderState(
        leader_id=leader_id,
        leader_epoch=leader_epoch,
        partition_epoch=partition_epoch,
        replicas=tuple(replicas),
        isr=isr_t,
        log_end_offset=log_end_offset,
        high_watermark=min(high_watermark, log_end_offset),
        leader_epoch_start_offset=log_end_offset,
        followers=followers,
    )


def update_metadata(
    state: LeaderState,
    partition_epoch: int,
    replicas: Iterable[int],
    isr: Iterable[int],
    now_ms: int,
) -> LeaderState:
    """Committed metadata changed the ISR or replicas in the same leader epoch.

    A pending ISR change is settled by it (applied or refused, the leader looks
    again); replicas new to the assignment start unknown."""
    replicas_t = tuple(replicas)
    followers = {
        r: state.followers.get(r, FollowerProgress(last_caught_up_time_ms=now_ms))
        for r in replicas_t
        if r != state.leader_id
    }
    return replace(
        state,
        partition_epoch=partition_epoch,
        replicas=replicas_t,
        isr=tuple(isr),
        followers=followers,
        pending_isr=None,
    )


def on_local_append(state: LeaderState, log_end_offset: int) -> LeaderState:
    """The leader appended: its own LEO moves (the seed's `LEO=LEO+2`)."""
    return replace(state, log_end_offset=log_end_offset)


def update_follower_fetch_state(
    state: LeaderState, follower_id: int, fetch_offset: int, now_ms: int
) -> LeaderState:
    """A follower fetched at `fetch_offset`: that is its LEO now."""
    previous = state.followers.get(follower_id, FollowerProgress())
    caught_up = previous.last_caught_up_time_ms
    if fetch_offset >= state.log_end_offset:
        caught_up = max(caught_up, now_ms)
    elif fetch_offset >= previous.last_fetch_leader_log_end_offset >= 0:
        caught_up = max(caught_up, previous.last_fetch_time_ms)
    progress = FollowerProgress(
        log_end_offset=fetch_offset,
        last_caught_up_time_ms=caught_up,
        last_fetch_time_ms=now_ms,
        last_fetch_leader_log_end_offset=state.log_end_offset,
    )
    return replace(state, followers={**state.followers, follower_id: progress})


def maybe_increment_leader_hw(state: LeaderState) -> tuple[LeaderState, int | None]:
    """HW = max(HW, min LEO over the (maximal) ISR); the new HW if it moved.

    A follower whose LEO the leader does not know yet holds the HW where it is.
    """
    lowest = state.log_end_offset
    for replica in state.maximal_isr:
        leo = state.follower_leo(replica)
        if leo == UNKNOWN_OFFSET:
            return state, None
        lowest = min(lowest, leo)
    if lowest <= state.high_watermark:
        return state, None
    return replace(state, high_watermark=lowest), lowest


def out_of_sync_replicas(state: LeaderState, now_ms: int, replica_lag_time_max_ms: int) -> set[int]:
    """ISR followers that have not caught up to the leader's LEO within the lag time."""
    out: set[int] = set()
    for replica in state.isr:
        if replica == state.leader_id:
            continue
        progress = state.followers.get(replica, FollowerProgress())
        if progress.log_end_offset == state.log_end_offset:
            continue
        if now_ms - progress.last_caught_up_time_ms > replica_lag_time_max_ms:
            out.add(replica)
    return out


def maybe_shrink_isr(
    state: LeaderState, now_ms: int, replica_lag_time_max_ms: int
) -> tuple[LeaderState, IsrChange | None]:
    """On a tick: the ISR change that drops lagging followers, if any is due and
    no other change is in flight."""
    if state.pending_isr is not None:
        return state, None
    lagging = out_of_sync_replicas(state, now_ms, replica_lag_time_max_ms)
    if not lagging:
        return state, None
    new_isr = tuple(r for r in state.isr if r not in lagging)
    change = IsrChange(new_isr, state.leader_epoch, state.partition_epoch)
    # Kafka keeps the larger (current) ISR for the HW until the shrink commits.
    return replace(state, pending_isr=state.isr), change


def is_follower_in_sync(state: LeaderState, follower_id: int) -> bool:
    """Caught up for the ISR: reached the HW, in the current leader epoch."""
    leo = state.follower_leo(follower_id)
    return leo >= state.high_watermark and leo >= state.leader_epoch_start_offset


def maybe_expand_isr(state: LeaderState, follower_id: int) -> tuple[LeaderState, IsrChange | None]:
    """After a follower's fetch: the ISR change that adds it back, if it is due."""
    if (
        state.pending_isr is not None
        or follower_id in state.isr
        or follower_id not in state.replicas
        or not is_follower_in_sync(state, follower_id)
    ):
        return state, None
    new_isr = tuple(r for r in state.replicas if r in state.isr or r == follower_id)
    change = IsrChange(new_isr, state.leader_epoch, state.partition_epoch)
    return replace(state, pending_isr=new_isr), change


def isr_change_failed(state: LeaderState) -> LeaderState:
    """The controller refused (stale partition epoch) or could not be reached:
    forget the pending change; the next tick or fetch asks again on fresh state."""
    return replace(state, pending_isr=None)
