"""When to take a snapshot (Kafka's `metadata.snapshot.max.*` settings).

A snapshot is due once `max_new_record_bytes` of committed records have been
applied since the last one, or once `max_interval_ms` has passed and at least
one record is new (an idle cluster does not snapshot the same image again).
Pure and clock-free: the caller passes `now_ms`, so the simulator can drive it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

KAFKA_DEFAULT_MAX_NEW_RECORD_BYTES = 20 * 1024 * 1024
KAFKA_DEFAULT_MAX_INTERVAL_MS = 60 * 60 * 1000


@dataclass(frozen=True, slots=True)
class SnapshotPolicy:
    """`max_interval_ms` of 0 disables the time trigger, as in Kafka."""

    max_new_record_bytes: int = KAFKA_DEFAULT_MAX_NEW_RECORD_BYTES
    max_interval_ms: int = KAFKA_DEFAULT_MAX_INTERVAL_MS

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> SnapshotPolicy:
        return cls(
            max_new_record_bytes=int(
                properties.get(
                    "metadata.snapshot.max.new.record.bytes", KAFKA_DEFAULT_MAX_NEW_RECORD_BYTES
                )
            ),
            max_interval_ms=int(
                properties.get("metadata.snapshot.max.interval.ms", KAFKA_DEFAULT_MAX_INTERVAL_MS)
            ),
        )

    def is_due(self, new_record_bytes: int, last_snapshot_ms: int, now_ms: int) -> bool:
        if new_record_bytes <= 0:
            return False
        if new_record_bytes >= self.max_new_record_bytes:
            return True
        return self.max_interval_ms > 0 and now_ms - last_snapshot_ms >= self.max_interval_ms


class SnapshotTrigger:
    """Counts committed bytes since the last snapshot and asks the policy."""

    def __init__(self, policy: SnapshotPolicy, now_ms: int) -> None:
        self.policy = policy
        self.new_record_bytes = 0
        self.last_snapshot_ms = now_ms

    def on_committed(self, records: Sequence[bytes]) -> None:
        self.new_record_bytes += sum(len(r) for r in records)

    def due(self, now_ms: int) -> bool:
        return self.policy.is_due(self.new_record_bytes, self.last_snapshot_ms, now_ms)

    def on_snapshot_taken(self, now_ms: int, covered_bytes: int) -> None:
        """A snapshot captured when `covered_bytes` had been counted is written.
        Records committed while it was written are not in it: they still count
        toward the next one (else the last writes before a quiet spell would
        never be snapshotted)."""
        self.new_record_bytes = max(0, self.new_record_bytes - covered_bytes)
        self.last_snapshot_ms = now_ms
