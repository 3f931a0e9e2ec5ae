"""When segments that a snapshot already covers may be deleted.

KRaft keeps some of the log below the latest snapshot (`metadata.max.retention.bytes`,
`metadata.max.retention.ms`); the defaults here delete such segments as soon as
the log start moves past them, which is what a node that never serves those
offsets again wants. Only whole segments strictly below the log start are ever
candidates, and the segment being appended to never is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

KAFKA_DEFAULT_MAX_BYTES = 100 * 1024 * 1024
KAFKA_DEFAULT_MAX_MS = 7 * 24 * 60 * 60 * 1000


@dataclass(frozen=True, slots=True)
class RetiredSegment:
    """A segment wholly below the log start."""

    size_bytes: int
    last_append_time_ms: int


@dataclass(frozen=True, slots=True)
class LogRetention:
    """-1 means "no limit" for either setting, as in Kafka."""

    max_bytes: int = 0
    max_ms: int = -1

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> LogRetention:
        """Kafka's property names and defaults (100 MiB, 7 days)."""
        return cls(
            max_bytes=int(properties.get("metadata.max.retention.bytes", KAFKA_DEFAULT_MAX_BYTES)),
            max_ms=int(properties.get("metadata.max.retention.ms", KAFKA_DEFAULT_MAX_MS)),
        )

    def deletable(self, retired: Sequence[RetiredSegment], log_bytes: int, now_ms: int) -> int:
        """How many of the oldest retired segments to delete.

        `retired` is oldest first; `log_bytes` is the size of every segment,
        retired or not. A segment goes when the log is over the byte limit or
        the segment's newest batch is older than the time limit.
        """
        count = 0
        for segment in retired:
            over_bytes = self.max_bytes >= 0 and log_bytes > self.max_bytes
            too_old = self.max_ms >= 0 and now_ms - segment.last_append_time_ms > self.max_ms
            if not (over_bytes or too_old):
                break
            count += 1
            log_bytes -= segment.size_bytes
        return count
