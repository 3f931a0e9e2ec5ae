"""Committed batches to the Raft listeners (Kafka's `ListenerContext`).

Each listener is owed the committed batches from its own next offset: after a
snapshot load, from the snapshot's end. They come in chunks of about
`APPLY_CHUNK_RECORDS` records, whole batches cut at the high watermark (never
an uncommitted record) and at the listener's offset (never one twice).
"""

from __future__ import annotations

from dataclasses import dataclass

from quorum.raft.client_api import RaftListener
from quorum.raft.log import RaftLog
from quorum.raft.records import Batch

APPLY_CHUNK_RECORDS = 8192


@dataclass
class ListenerContext:
    """A listener and the offset of the next committed record it is owed."""

    listener: RaftListener
    next_offset: int


def deliver_committed(context: ListenerContext, raft_log: RaftLog, high_watermark: int) -> None:
    """Hand the listener every committed batch it has not had; an exception from
    the listener propagates (the caller stops the node)."""
    offset = max(context.next_offset, raft_log.start_offset)
    while offset < high_watermark:
        chunk: list[Batch] = []
        for batch in raft_log.read(offset, APPLY_CHUNK_RECORDS):
            if batch.base_offset >= high_watermark:
                break
            skip = max(0, offset - batch.base_offset)
            keep = min(len(batch.records), high_watermark - batch.base_offset)
            if skip or keep < len(batch.records):
                batch = Batch(
                    batch.base_offset + skip,
                    batch.epoch,
                    batch.records[skip:keep],
                    batch.append_time_ms,
                    batch.control,
                )
            chunk.append(batch)
            offset = batch.next_offset
        if not chunk:
            break
        context.next_offset = offset
        context.listener.handle_commit(chunk)
