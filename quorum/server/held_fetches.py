"""The fetches a leader holds (long polls) get an answer the moment it stops leading.

The core parks a caught-up follower's Fetch in its `LeaderState` and forgets
it when that state goes (resignation, a higher epoch, check-quorum); the
follower's call would then wait out its whole deadline on a node that can no
longer answer it. As in Kafka's `KafkaRaftClient` (its fetch purgatory is
completed when the node stops leading), each such call is answered at once
with KIP-595's error and this node's new view: FENCED_LEADER_EPOCH with the
new epoch and leader when the epoch moved on, NOT_LEADER_OR_FOLLOWER when the
leader resigned within its epoch. The follower's core then follows the new
leader, or starts an election, without waiting for a timeout.

The driver observes the change through the core's `RoleChanged` effect; the
core itself is untouched.
"""

from __future__ import annotations

from quorum.raft.effects import Role, RoleChanged
from quorum.raft.fetching import fetch_error
from quorum.raft.messages import FetchResponse


class HeldFetches:
    """Remembers the epoch this node leads, to answer its held fetches when that ends."""

    def __init__(self) -> None:
        self._led_epoch: int | None = None

    def role_changed(self, change: RoleChanged) -> int | None:
        """The epoch this node just stopped leading, or None (it still leads, or
        did not lead): the fetches it holds are owed an answer."""
        if change.role is Role.LEADER:
            self._led_epoch = change.epoch
            return None
        led, self._led_epoch = self._led_epoch, None
        return led


def released_fetch_answer(
    led_epoch: int, change: RoleChanged, high_watermark: int, log_start_offset: int
) -> FetchResponse:
    """The answer to a fetch held in `led_epoch` by a node that now has `change`'s role.

    A resigned node is still its epoch's leader on record but names no leader:
    the follower must elect one (Kafka's ResignedState does the same)."""
    leader = None if change.role is Role.RESIGNED else change.leader_id
    return FetchResponse(
        change.epoch,
        leader,
        high_watermark,
        log_start_offset,
        error=fetch_error(led_epoch, change.epoch),
    )
