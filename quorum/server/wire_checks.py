"""Range checks for the numbers in a quorum request, run before the core sees it.

The core trusts its inputs (it asserts on impossible ones), so everything a peer or
a hostile client can put on the wire is checked here first: offsets and ids must
not be negative, and an epoch must be one the core may enter (`MAX_EPOCH`, so that
its successor still fits the wire's int32).
"""

from __future__ import annotations

from quorum.raft.messages import MAX_EPOCH

__all__ = ["MAX_EPOCH", "epoch_problems", "negative_problems", "request_problems"]


def negative_problems(**fields: int) -> list[str]:
    return [
        f"{name} must not be negative, got {value}" for name, value in fields.items() if value < 0
    ]


def epoch_problems(**epochs: int) -> list[str]:
    return [
        f"{name} must be between 0 and {MAX_EPOCH}, got {value}"
        for name, value in epochs.items()
        if not 0 <= value <= MAX_EPOCH
    ]


def request_problems(epochs: dict[str, int], others: dict[str, int]) -> list[str]:
    """Every problem with a request's epochs and its other non-negative numbers."""
    return epoch_problems(**epochs) + negative_problems(**others)
