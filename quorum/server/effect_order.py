"""Which of a round's effects the driver may skip without changing what is
durable, and which it may run last without changing any outcome."""

from __future__ import annotations

from quorum.raft.effects import Effect, HighWatermarkChanged, PersistQuorumState, RoleChanged


def superseded_state_writes(effects: list[Effect]) -> set[int]:
    """Positions of quorum-state writes that a later one of the same round
    replaces before anything leaves the node.

    Granting a vote in a new epoch is two transitions (to the new epoch, then
    the vote), each persisting the quorum state; only the second needs to reach
    the disk, since nothing was sent or acknowledged in between, and a crash
    between them would find the older state either way. One fsync instead of
    two on every vote. Anything but a role change between the writes keeps both.
    """
    skipped: set[int] = set()
    pending: int | None = None
    for index, effect in enumerate(effects):
        if isinstance(effect, PersistQuorumState):
            if pending is not None:
                skipped.add(pending)
            pending = index
        elif not isinstance(effect, RoleChanged):
            pending = None
    return skipped


def commit_last(effects: list[Effect]) -> tuple[set[int], int | None]:
    """Positions of the round's high-watermark changes to run after its other
    effects, and the high watermark to act on then (None: keep the core's order).

    Answers to the fetches the round took are then woken first: the next batch
    reaching the followers is the commit cycle, while the commit's waiters and
    the apply are off it. The core has made every change of the round before
    the driver runs its effects, and the high watermark only grows and never
    passes a truncation, so the last change covers the others and resolves the
    same proposals the same way. A round that changes the role keeps the core's
    order (the listener sees commits and leader changes as the core made them).
    """
    if any(isinstance(effect, RoleChanged) for effect in effects):
        return set(), None
    moved = {i for i, effect in enumerate(effects) if isinstance(effect, HighWatermarkChanged)}
    last = max(moved, default=None)
    if last is None:
        return moved, None
    effect = effects[last]
    assert isinstance(effect, HighWatermarkChanged)
    return moved, effect.high_watermark
