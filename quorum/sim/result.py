"""What one simulator run reports."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SimulationResult:
    seed: int
    mix: str
    recovery_ms: float
    acked: int
    commits: int
    elections: int
    max_epoch: int
    refused: int = 0
    forged: int = 0
    max_epoch_gap: int = 0
    voter_changes: int = 0
    voter_changes_committed: int = 0
    final_voters: tuple[int, ...] = ()
