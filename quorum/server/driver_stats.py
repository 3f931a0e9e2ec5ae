"""What the Raft driver counts and times, for the metrics endpoint to read."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from quorum.raft.records import SnapshotId


@dataclass
class DriverStats:
    """Counters the metrics endpoint reads at scrape time."""

    elections: int = 0
    flushes: int = 0
    records_appended: int = 0
    fetches_by_replica: dict[int, int] = field(default_factory=dict)


@dataclass
class SnapshotStats:
    taken: int = 0
    installed: int = 0
    latest_offset: int = -1
    latest_epoch: int = -1

    def note(self, snapshot_id: SnapshotId) -> None:
        if snapshot_id.end_offset >= self.latest_offset:
            self.latest_offset = snapshot_id.end_offset
            self.latest_epoch = snapshot_id.epoch


class LatencyObserver(Protocol):
    """Where latencies go as they happen (the Prometheus histograms)."""

    def commit(self, seconds: float) -> None: ...

    def election(self, seconds: float) -> None: ...

    def flush(self, seconds: float) -> None: ...


class NoLatencies:
    def commit(self, seconds: float) -> None:
        pass

    def election(self, seconds: float) -> None:
        pass

    def flush(self, seconds: float) -> None:
        pass
