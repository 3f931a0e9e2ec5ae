"""A MetadataFetch answer's batches, checked whole before the cache writes or applies any.

The agent asks for each batch in the metadata log's on-disk format
(`MetadataBatch.encoded`): the active controller encodes a commit's batches
once for every broker, and the broker's log writes those bytes as they are
instead of encoding the same batch again (it did, in every one of N agents, for
every commit). Those bytes come from another process, so each is checked as
recovery would check it once written (both checksums, its size, record lengths
that add up), and against what the answer says of it (base offset, epoch,
append time, control), before anything is written or applied: a batch that
fails is refused as any other malformed answer (`MalformedAnswer`, a
ValueError; the agent counts an apply error and stops), and the cache is left
as it was. A controller that predates the field answers with records, which
are taken as before.
"""

from __future__ import annotations

from collections.abc import Sequence

from quorum.gen import broker_pb2 as bpb
from quorum.log.batch_format import (
    EncodedBatch,
    EncodedBatchError,
    decode_encoded,
    encoded_record_count,
)
from quorum.raft.records import Batch


class MalformedAnswer(ValueError):
    """A fetched batch that cannot be what the answer says it is."""


def record_count(batches: Sequence[bpb.MetadataBatch]) -> int:
    """The records an answer holds, as its batches say (for the trace: not yet checked)."""
    return sum(len(b.records) or encoded_record_count(b.encoded) for b in batches)


def fetched(batches: Sequence[bpb.MetadataBatch]) -> list[EncodedBatch] | list[Batch]:
    """The answer's batches: checked encodings, or (from a controller that predates
    them) batches of records. Raises MalformedAnswer."""
    encoded: list[EncodedBatch] = []
    plain: list[Batch] = []
    for b in batches:
        data = b.encoded
        if not data:
            plain.append(
                Batch(b.base_offset, b.epoch, tuple(b.records), b.append_time_ms, b.control)
            )
            continue
        try:
            batch = decode_encoded(data)
        except EncodedBatchError as exc:
            raise MalformedAnswer(f"batch at offset {b.base_offset}: {exc}") from None
        if batch.opaque:
            raise MalformedAnswer(f"batch at offset {b.base_offset} is not a metadata batch")
        told = (b.base_offset, b.epoch, b.append_time_ms, b.control)
        found = (batch.base_offset, batch.epoch, batch.append_time_ms, batch.control)
        if told != found or b.records:
            raise MalformedAnswer(
                f"batch at offset {b.base_offset}: the answer says (base offset, epoch, append "
                f"time, control) {told}{' and has records' if b.records else ''}, its "
                f"encoding {found}"
            )
        encoded.append(batch)
    if encoded and plain:
        raise MalformedAnswer("an answer mixes encoded batches with records")
    return encoded or plain


__all__ = ["MalformedAnswer", "fetched", "record_count"]
