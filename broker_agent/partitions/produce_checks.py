"""What a Produce is refused before anything is appended: Kafka's checks of a
partition's batches, pure (no I/O, no waiting), so the replica manager keeps
only the appending, the acks wait and the bookkeeping.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker_agent.partitions.api import AppendResult
from broker_agent.partitions.partition_log import LogConfig
from broker_agent.partitions.record_batch import InvalidRecordBatch, RecordBatchHeader
from broker_agent.partitions.record_codec import keyless_record
from broker_agent.replication.acks import AcksOutcome, check_before_append


def refuse_before_append(
    topic: str,
    partition: int,
    batches: list[tuple[RecordBatchHeader, bytes]],
    acks: int,
    isr: tuple[int, ...],
    config: LogConfig,
) -> AppendResult | None:
    """Kafka's checks of a produced partition before its batches are appended
    (size, no transactions, keys on a compacted topic, min.insync.replicas for
    acks=all); None when they pass."""
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


__all__ = ["refuse_before_append"]
