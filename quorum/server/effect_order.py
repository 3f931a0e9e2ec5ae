"""Which of a round's effects the driver may skip without changing what is durable."""

from __future__ import annotations

from quorum.raft.effects import Effect, PersistQuorumState, RoleChanged


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
