"""acks=all with min.insync.replicas (seed 003).

Before appending, a leader whose ISR is smaller than the topic's
`min.insync.replicas` refuses an acks=all write with NOT_ENOUGH_REPLICAS
(nothing is appended). After appending, the write completes when the HW passes
it; if by then the ISR shrank below the minimum, the records are stored but the
producer hears NOT_ENOUGH_REPLICAS_AFTER_APPEND (it may retry, and duplicate).
acks=1 and acks=0 ignore the ISR entirely.
"""

from __future__ import annotations

from enum import Enum

ACKS_ALL = -1


class AcksOutcome(Enum):
    OK = "NONE"
    PENDING = "PENDING"
    NOT_ENOUGH_REPLICAS = "NOT_ENOUGH_REPLICAS"
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = "NOT_ENOUGH_REPLICAS_AFTER_APPEND"


def check_before_append(acks: int, isr_size: int, min_insync_replicas: int) -> AcksOutcome:
    """Kafka's `Partition.appendRecordsToLeader` check."""
    if acks == ACKS_ALL and isr_size < min_insync_replicas:
        return AcksOutcome.NOT_ENOUGH_REPLICAS
    return AcksOutcome.OK


def check_replicated(
    required_offset: int, high_watermark: int, isr_size: int, min_insync_replicas: int
) -> AcksOutcome:
    """Kafka's `checkEnoughReplicasReachOffset` for an acks=all write that must
    reach `required_offset` (its last offset + 1)."""
    if high_watermark < required_offset:
        return AcksOutcome.PENDING
    if isr_size < min_insync_replicas:
        return AcksOutcome.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    return AcksOutcome.OK
