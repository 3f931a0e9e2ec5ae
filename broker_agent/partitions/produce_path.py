"""A Produce on the leader, around the append itself: what is refused before
anything is appended (Kafka's checks of a partition's batches, pure), and when
the answer goes (acks 0 and 1 at once, -1 once the HW covers the batch). The
replica manager keeps the append and the bookkeeping.
"""

from __future__ import annotations

import asyncio
import contextlib

from kio.schema.errors import ErrorCode

from broker_agent.partitions.api import AppendResult
from broker_agent.partitions.partition import Partition, Role
from broker_agent.partitions.partition_log import LogConfig
from broker_agent.partitions.record_batch import InvalidRecordBatch, RecordBatchHeader
from broker_agent.partitions.record_codec import keyless_record
from broker_agent.replication.acks import AcksOutcome, check_before_append, check_replicated


def refuse_before_append(
    topic: str,
    partition: int,
    batches: list[tuple[RecordBatchHeader, bytes]],
    acks: int,
    isr: tuple[int, ...],
    config: LogConfig,
) -> AppendResult | None:
    """Kafka's checks of a produced partition before its batches are appended
    (one batch, size, no transactions, keys on a compacted topic,
    min.insync.replicas for acks=all); None when they pass."""
    if len(batches) != 1:  # Produce v3+ (the versions served), as Kafka checks it
        return AppendResult(
            ErrorCode.invalid_record,
            error_message="a produce request must carry exactly one record batch "
            f"per partition, not {len(batches)}",
        )
    for header, data in batches:
        if len(data) > config.max_message_bytes:
            return AppendResult(
                ErrorCode.message_too_large,
                error_message=f"batch of {len(data)} bytes is over max.message.bytes "
                f"{config.max_message_bytes}",
            )
        if header.is_transactional or header.is_control:
            return AppendResult(
                ErrorCode.invalid_record, error_message="transactions are not supported"
            )
        try:
            keyless = config.compact and keyless_record(data)
        except InvalidRecordBatch as exc:
            return AppendResult(ErrorCode.corrupt_message, error_message=str(exc))
        if keyless:
            return AppendResult(
                ErrorCode.invalid_record,
                error_message=f"Compacted topic cannot accept message without key in "
                f"topic partition {topic}-{partition}.",
            )
    if (
        check_before_append(acks, len(isr), config.min_insync_replicas)
        is AcksOutcome.NOT_ENOUGH_REPLICAS
    ):
        return AppendResult(
            ErrorCode.not_enough_replicas,
            error_message=f"ISR {list(isr)} is smaller than min.insync.replicas "
            f"{config.min_insync_replicas}",
        )
    return None


async def await_acks(
    part: Partition, base: int, end: int, acks: int, timeout_ms: int
) -> AppendResult:
    """Answer per acks: 0 and 1 at once, -1 once the HW passes `end`."""
    if acks != -1:
        return AppendResult(ErrorCode.none, base, -1, part.log.log_start_offset)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_ms / 1000
    epoch = part.leader_epoch
    while True:
        if part.role is not Role.LEADER or part.leader_epoch != epoch:
            return AppendResult(ErrorCode.not_leader_or_follower, base)
        outcome = check_replicated(
            end, part.high_watermark, len(part.isr), part.log.config.min_insync_replicas
        )
        if outcome is AcksOutcome.OK:
            return AppendResult(ErrorCode.none, base, -1, part.log.log_start_offset)
        if outcome is AcksOutcome.NOT_ENOUGH_REPLICAS_AFTER_APPEND:
            return AppendResult(ErrorCode.not_enough_replicas_after_append, base)
        remaining = deadline - loop.time()
        if remaining <= 0:
            return AppendResult(ErrorCode.request_timed_out, base)
        changed = part.changed
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(changed.wait(), remaining)


__all__ = ["await_acks", "refuse_before_append"]
