"""The transition table: which role may follow which, on what trigger.

`RaftNode._transition` consults `TRANSITIONS` before every change of state and
raises `IllegalTransition` for anything not listed, so this table is the
protocol's state machine, not a description of it (h11's `_state.py` style).
A test runs the simulator over many seeds and checks every transition it takes
is listed here.

    from                            trigger              to                epoch
    unattached, follower,
      resigned, candidate           ELECTION_TIMEOUT     prospective       same
    prospective                     PRE_VOTE_WON         candidate         +1, votes for itself
    prospective                     PRE_VOTE_LOST        follower (of the  same
                                                         leader it knew)
                                                         or unattached
    candidate                       VOTE_WON             leader            same
    leader                          RESIGN               resigned          same
    unattached, follower,
      prospective, resigned         PREFERRED_SUCCESSOR  candidate         +1
    unattached, prospective         VOTE_GRANTED         unattached        same
    any                             HIGHER_EPOCH         unattached,       higher
                                                         follower
    any                             BEGIN_QUORUM_EPOCH   follower          same or higher
    unattached                      LEADER_DISCOVERED    follower (or      same
                                                         unattached: see
                                                         TRANSITIONS)
    follower, resigned,
      prospective, candidate        LEADER_LOST          unattached        same

Observers (not voters) are only ever unattached or followers, with one
exception (KIP-853): a leader that a voter change removed resigns once the
change commits, and as an observer leaves `resigned` on LEADER_LOST; a node
that learns it is no voter while it runs (a snapshot it was downloading
arrives) leaves `prospective` or `candidate` the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from quorum.raft.effects import Role
from quorum.raft.messages import MAX_EPOCH


class Trigger(Enum):
    ELECTION_TIMEOUT = "election timeout"
    """The role's timer fired (a follower's fetch timeout included)."""
    PRE_VOTE_WON = "pre-vote won"
    PRE_VOTE_LOST = "pre-vote lost"
    """A majority refused, or the round's timer fired."""
    VOTE_WON = "vote won"
    RESIGN = "resign"
    """Check-quorum failed, or a graceful shutdown handed leadership on."""
    PREFERRED_SUCCESSOR = "preferred successor"
    """Named first in an EndQuorumEpoch: start the election at once."""
    VOTE_GRANTED = "vote granted"
    HIGHER_EPOCH = "higher epoch"
    """A Vote, EndQuorumEpoch or a response proved a later epoch exists."""
    BEGIN_QUORUM_EPOCH = "begin quorum epoch"
    LEADER_DISCOVERED = "leader discovered"
    """A fetch answer named the leader of our epoch (how observers find it)."""
    LEADER_LOST = "leader lost"
    """An observer's leader went silent or could not be reached (or a removed
    leader, resigned, goes looking for its successor)."""


class EpochRule(Enum):
    SAME = "same"
    NEXT = "next"
    HIGHER = "higher"
    SAME_OR_HIGHER = "same or higher"

    def allows(self, old: int, new: int) -> bool:
        match self:
            case EpochRule.SAME:
                return new == old
            case EpochRule.NEXT:
                return new == old + 1
            case EpochRule.HIGHER:
                return new > old
            case EpochRule.SAME_OR_HIGHER:
                return new >= old


U, P, C, L, F, R = (
    Role.UNATTACHED,
    Role.PROSPECTIVE,
    Role.CANDIDATE,
    Role.LEADER,
    Role.FOLLOWER,
    Role.RESIGNED,
)
ALL_ROLES = frozenset(Role)

EPOCH_RULES: dict[Trigger, EpochRule] = {
    Trigger.ELECTION_TIMEOUT: EpochRule.SAME,
    Trigger.PRE_VOTE_WON: EpochRule.NEXT,
    Trigger.PRE_VOTE_LOST: EpochRule.SAME,
    Trigger.VOTE_WON: EpochRule.SAME,
    Trigger.RESIGN: EpochRule.SAME,
    Trigger.PREFERRED_SUCCESSOR: EpochRule.NEXT,
    Trigger.VOTE_GRANTED: EpochRule.SAME,
    Trigger.HIGHER_EPOCH: EpochRule.HIGHER,
    Trigger.BEGIN_QUORUM_EPOCH: EpochRule.SAME_OR_HIGHER,
    Trigger.LEADER_DISCOVERED: EpochRule.SAME,
    Trigger.LEADER_LOST: EpochRule.SAME,
}


def _rows(
    sources: frozenset[Role] | set[Role], trigger: Trigger, targets: set[Role]
) -> dict[tuple[Role, Trigger], frozenset[Role]]:
    return {(source, trigger): frozenset(targets) for source in sources}


TRANSITIONS: dict[tuple[Role, Trigger], frozenset[Role]] = {
    **_rows({U, F, R, C}, Trigger.ELECTION_TIMEOUT, {P}),
    **_rows({P}, Trigger.PRE_VOTE_WON, {C}),
    **_rows({P}, Trigger.PRE_VOTE_LOST, {F, U}),
    **_rows({C}, Trigger.VOTE_WON, {L}),
    **_rows({L}, Trigger.RESIGN, {R}),
    **_rows({U, F, P, R}, Trigger.PREFERRED_SUCCESSOR, {C}),
    **_rows({U, P}, Trigger.VOTE_GRANTED, {U}),
    **_rows(ALL_ROLES, Trigger.HIGHER_EPOCH, {U, F}),
    **_rows(ALL_ROLES, Trigger.BEGIN_QUORUM_EPOCH, {F}),
    # To unattached only when the answer names this very node, which no honest
    # peer does while this node is unattached in that epoch.
    **_rows({U}, Trigger.LEADER_DISCOVERED, {F, U}),
    **_rows({F, R, P, C}, Trigger.LEADER_LOST, {U}),
}
"""(from role, trigger) -> the roles it may lead to. Anything else is illegal."""

OBSERVER_ROLES = frozenset({U, F})


class IllegalTransition(AssertionError):
    """The core tried a transition the table does not allow: a programming error."""


@dataclass(frozen=True, slots=True)
class Transition:
    """One change of state, as the node is about to make it."""

    source: Role
    trigger: Trigger
    target: Role
    old_epoch: int
    new_epoch: int
    voter: bool


def check_transition(transition: Transition) -> None:
    """Raise IllegalTransition unless the table allows `transition`."""
    t = transition
    if t.new_epoch < t.old_epoch:
        raise IllegalTransition(f"epoch would go back from {t.old_epoch} to {t.new_epoch}")
    if t.new_epoch > MAX_EPOCH:
        raise IllegalTransition(f"epoch {t.new_epoch} is above MAX_EPOCH: the edge must refuse it")
    allowed = TRANSITIONS.get((t.source, t.trigger), frozenset())
    if t.target not in allowed:
        raise IllegalTransition(
            f"illegal transition {t.source.value} -> {t.target.value} on {t.trigger.value}"
        )
    if not EPOCH_RULES[t.trigger].allows(t.old_epoch, t.new_epoch):
        raise IllegalTransition(
            f"{t.trigger.value} may not move the epoch from {t.old_epoch} to {t.new_epoch}"
        )
    if not t.voter and t.target not in OBSERVER_ROLES and t.trigger is not Trigger.RESIGN:
        raise IllegalTransition(f"an observer cannot become {t.target.value}")
