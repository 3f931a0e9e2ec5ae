"""The records inside a Kafka record batch (magic 2), for the log cleaner: read
each record's offset, timestamp, key and whether it is a tombstone, and write a
batch back holding only some of them.

    record:  length varint | attributes int8 | timestampDelta varlong |
             offsetDelta varint | key (varint length, -1 = null) |
             value (varint length, -1 = null: a tombstone) | headers

Rewriting follows Kafka's cleaner (`MemoryRecords.filterTo`): the batch keeps
its base offset and its last offset delta (so the producer's last sequence is
unchanged), its partition leader epoch, producer id, epoch and base sequence;
the record count, max timestamp, length and CRC-32C are recomputed. Records are
copied as they are, since their offset and timestamp deltas are relative to the
unchanged base, except when the batch gets a delete horizon (KIP-534: attribute
bit 6, and `baseTimestamp` then holds the horizon): their timestamp deltas are
re-encoded against it. Uncompressed and gzip batches are rewritten; other codecs
are left whole (`UnsupportedCompression`), which never loses a latest value.
kio's record readers are not used: they round timestamps to seconds.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import google_crc32c

from broker_agent.partitions.record_batch import (
    HEADER_SIZE,
    InvalidRecordBatch,
    RecordBatchHeader,
    parse_header,
)

COMPRESSION_MASK = 0x07
GZIP = 1
LOG_APPEND_TIME_FLAG = 0x08
DELETE_HORIZON_FLAG = 0x40
NO_TIMESTAMP = -1
_CRC_START = 21
_TAIL = struct.Struct(">hiqqqhii")  # attributes .. recordsCount
_PREFIX = struct.Struct(">qiibI")  # baseOffset, batchLength, epoch, magic, crc


class UnsupportedCompression(Exception):
    """A codec this broker cannot decompress (snappy, lz4, zstd)."""


@dataclass(frozen=True, slots=True)
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    tombstone: bool
    value_span: tuple[int, int]  # where the value sits in `body`
    body: bytes  # attributes .. headers, without the length prefix
    timestamp_span: tuple[int, int]  # where timestampDelta sits in `body`


def value_of(record: Record) -> bytes | None:
    start, end = record.value_span
    return None if record.tombstone else record.body[start:end]


def read_varint(data: bytes | memoryview, position: int) -> tuple[int, int]:
    """A zigzag varint (or varlong) and the position after it."""
    value = shift = 0
    while True:
        if position >= len(data):
            raise InvalidRecordBatch("record ends inside a varint")
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (value >> 1) ^ -(value & 1), position
        shift += 7
        if shift > 63:
            raise InvalidRecordBatch("varint longer than 10 bytes")


def write_varint(value: int) -> bytes:
    zigzag = (value << 1) ^ (value >> 63)
    out = bytearray()
    while zigzag >= 0x80:
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    out.append(zigzag)
    return bytes(out)


def has_delete_horizon(header: RecordBatchHeader) -> bool:
    return bool(header.attributes & DELETE_HORIZON_FLAG)


def records_of(batch: bytes) -> tuple[RecordBatchHeader, list[Record]]:
    """Every record of one stored batch. Raises UnsupportedCompression or
    InvalidRecordBatch."""
    header = parse_header(batch)
    payload = _decompressed(header, batch[HEADER_SIZE : header.size])
    records: list[Record] = []
    position = 0
    for _ in range(header.records_count):
        length, position = read_varint(payload, position)
        end = position + length
        if length < 1 or end > len(payload):
            raise InvalidRecordBatch(f"record of {length} bytes does not fit its batch")
        body = payload[position:end]
        at = 1
        ts_delta, ts_end = read_varint(body, at)
        offset_delta, at = read_varint(body, ts_end)
        key_length, at = read_varint(body, at)
        key = None if key_length < 0 else body[at : at + key_length]
        at += max(key_length, 0)
        value_length, at = read_varint(body, at)
        records.append(
            Record(
                header.base_offset + offset_delta,
                header.base_timestamp + ts_delta,
                key,
                value_length < 0,
                (at, at + max(value_length, 0)),
                body,
                (1, ts_end),
            )
        )
        position = end
    if position != len(payload):
        raise InvalidRecordBatch("records do not add up to the batch length")
    return header, records


def rewrite_batch(
    header: RecordBatchHeader, kept: Sequence[Record], delete_horizon_ms: int | None
) -> bytes:
    """The batch holding only `kept` (possibly none: Kafka's empty batch that keeps
    a producer's last sequence), with a delete horizon when one is given."""
    attributes = header.attributes
    base_timestamp = header.base_timestamp
    bodies: list[bytes] = []
    if delete_horizon_ms is not None:
        attributes |= DELETE_HORIZON_FLAG
        base_timestamp = delete_horizon_ms
    for record in kept:
        body = record.body
        if base_timestamp != header.base_timestamp:
            start, end = record.timestamp_span
            body = body[:start] + write_varint(record.timestamp - base_timestamp) + body[end:]
        bodies.append(write_varint(len(body)) + body)
    if header.attributes & LOG_APPEND_TIME_FLAG:
        max_timestamp = header.max_timestamp
    else:
        max_timestamp = max((r.timestamp for r in kept), default=header.max_timestamp)
    records = _compressed(header, b"".join(bodies)) if kept else b""
    tail = _TAIL.pack(
        attributes,
        header.last_offset_delta,
        base_timestamp,
        max_timestamp,
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
        len(kept),
    )
    crc = google_crc32c.extend(google_crc32c.value(tail), records)
    prefix = _PREFIX.pack(
        header.base_offset,
        HEADER_SIZE - 12 + len(records),
        header.partition_leader_epoch,
        header.magic,
        crc,
    )
    return prefix + tail + records


def keyless_record(batch: bytes) -> bool:
    """Whether a produced batch holds a record without a key (refused by a
    compacted topic, as Kafka does). A codec this broker cannot read says no."""
    try:
        _, records = records_of(batch)
    except UnsupportedCompression:
        return False
    return any(r.key is None for r in records)


def _decompressed(header: RecordBatchHeader, data: bytes) -> bytes:
    codec = header.attributes & COMPRESSION_MASK
    if codec == 0:
        return data
    if codec == GZIP:
        try:
            return zlib.decompress(data, 16 + zlib.MAX_WBITS)
        except zlib.error as exc:
            raise InvalidRecordBatch(f"gzip records: {exc}") from None
    raise UnsupportedCompression(f"compression codec {codec}")


def _compressed(header: RecordBatchHeader, data: bytes) -> bytes:
    if header.attributes & COMPRESSION_MASK == GZIP:
        compressor = zlib.compressobj(wbits=16 + zlib.MAX_WBITS)
        return compressor.compress(data) + compressor.flush()
    return data
