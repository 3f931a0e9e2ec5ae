"""A classic group's states and the one table of legal transitions (Kafka's
`GroupState.validPreviousStates`, kept as a table that is checked on every change).

    Empty --join--> PreparingRebalance --all joined / join timeout--> CompletingRebalance
    CompletingRebalance --leader's SyncGroup--> Stable
    CompletingRebalance | Stable --member joins, leaves or dies--> PreparingRebalance
    PreparingRebalance --everyone gone--> Empty
    any --DeleteGroups, partition unloaded--> Dead
"""

from __future__ import annotations

from enum import Enum


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_FROM: dict[GroupState, frozenset[GroupState]] = {
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


class IllegalTransition(Exception):
    """A programming error: the machine tried a move the table forbids."""


def check_transition(current: GroupState, target: GroupState) -> None:
    if current not in _FROM[target]:
        raise IllegalTransition(f"group state {current.value} -> {target.value}")


def parse_state(name: str) -> GroupState | None:
    """A state by Kafka's name, case-insensitively (ListGroups' states filter)."""
    for state in GroupState:
        if state.value.lower() == name.lower():
            return state
    return None
