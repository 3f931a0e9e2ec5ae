"""The voter-majority arithmetic, kept apart so it can be tested alone."""

from __future__ import annotations

from collections.abc import Iterable


def majority_size(voter_count: int) -> int:
    return voter_count // 2 + 1


def majority_offset(durable_end_offsets: Iterable[int], voter_count: int) -> int:
    """The largest offset that at least a majority of voters have durably stored.

    Voters we have not heard from count as offset 0.
    """
    offsets = sorted(durable_end_offsets, reverse=True)
    offsets.extend([0] * (voter_count - len(offsets)))
    return offsets[majority_size(voter_count) - 1]
