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
re-encoded against it. Batches are read and rewritten in their own codec (gzip,
snappy, lz4, zstd: `compression.py`); a batch this broker does not read (an unknown
codec, or records over `MAX_DECOMPRESSED_BYTES`) is left whole
(`UnsupportedCompression`), which never loses a latest value.
kio's record readers are not used: they round timestamps to seconds.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import NamedTuple

import google_crc32c

from broker_agent.partitions.compression import (
    UnsupportedCompression,
    compress,
    decompress,
)
from broker_agent.partitions.record_batch import (
    HEADER_SIZE,
    InvalidRecordBatch,
    RecordBatchHeader,
    parse_header,
)

COMPRESSION_MASK = 0x07
LOG_APPEND_TIME_FLAG = 0x08
DELETE_HORIZON_FLAG = 0x40
NO_TIMESTAMP = -1
_CRC_START = 21
_TAIL = struct.Struct(">hiqqqhii")  # attributes .. recordsCount
_PREFIX = struct.Struct(">qiibI")  # baseOffset, batchLength, epoch, magic, crc


class Record(NamedTuple):
    """One record, pointing into its batch's (decompressed) records: a tuple, not
    a dataclass, because the cleaner makes one per record it reads."""

    offset: int
    timestamp: int
    key: bytes | None
    tombstone: bool
    records: bytes  # the batch's records section
    start: int  # where this record's length prefix starts in `records`
    body_start: int  # attributes .. headers: [body_start, end)
    end: int
    timestamp_end: int  # timestampDelta is [body_start + 1, timestamp_end)
    value_start: int
    value_length: int

    @property
    def body(self) -> bytes:
        return self.records[self.body_start : self.end]

    @property
    def framed(self) -> bytes:
        """The record as stored: length prefix and body."""
        return self.records[self.start : self.end]


def value_of(record: Record) -> bytes | None:
    if record.tombstone:
        return None
    return record.records[record.value_start : record.value_start + record.value_length]


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


def _varint(data: bytes, position: int) -> tuple[int, int]:
    """read_varint with the one- and two-byte cases (nearly every varint in a
    record) unrolled: this is the cleaner's hot path."""
    b = data[position]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), position + 1
    c = data[position + 1]
    if c < 0x80:
        value = (b & 0x7F) | (c << 7)
        return (value >> 1) ^ -(value & 1), position + 2
    return read_varint(data, position)


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
    size = len(payload)
    base_offset, base_timestamp = header.base_offset, header.base_timestamp
    try:
        for _ in range(header.records_count):
            start = position
            length, position = _varint(payload, position)
            body_start, end = position, position + length
            if length < 1 or end > size:
                raise InvalidRecordBatch(f"record of {length} bytes does not fit its batch")
            at = position + 1
            ts_delta, at = _varint(payload, at)
            ts_end = at
            offset_delta, at = _varint(payload, at)
            key_length, at = _varint(payload, at)
            if key_length >= 0:
                key: bytes | None = payload[at : at + key_length]
                at += key_length
            else:
                key = None
            value_length, at = _varint(payload, at)
            if at + max(value_length, 0) > end:
                raise InvalidRecordBatch("record fields run past its length")
            records.append(
                Record(
                    base_offset + offset_delta,
                    base_timestamp + ts_delta,
                    key,
                    value_length < 0,
                    payload,
                    start,
                    body_start,
                    end,
                    ts_end,
                    at,
                    value_length,
                )
            )
            position = end
    except IndexError:
        raise InvalidRecordBatch("records end inside a record") from None
    if position != size:
        raise InvalidRecordBatch("records do not add up to the batch length")
    return header, records


class KeyScan(NamedTuple):
    """What the cleaner needs of every record of a batch, in plain lists (no
    object per record): its offset, key and whether it is a tombstone."""

    header: RecordBatchHeader
    offsets: list[int]
    keys: list[bytes | None]
    tombstones: list[bool]


def scan_keys(batch: bytes) -> KeyScan:
    """`records_of` reduced to offsets, keys and tombstones: the cleaner's map
    pass and its keep-or-drop decision read every record, so this loop reads
    only those fields, with one-byte varints decoded inline. Raises
    UnsupportedCompression or InvalidRecordBatch."""
    header = parse_header(batch)
    payload = _decompressed(header, batch[HEADER_SIZE : header.size])
    offsets: list[int] = []
    keys: list[bytes | None] = []
    tombstones: list[bool] = []
    size = len(payload)
    base_offset = header.base_offset
    position = 0
    varint = _varint
    try:
        for _ in range(header.records_count):
            # Lengths of up to 8 KiB fit two varint bytes: decoded inline.
            b = payload[position]
            if b < 0x80:
                length, position = (b >> 1) ^ -(b & 1), position + 1
            elif payload[position + 1] < 0x80:
                v = (b & 0x7F) | (payload[position + 1] << 7)
                length, position = (v >> 1) ^ -(v & 1), position + 2
            else:
                length, position = varint(payload, position)
            end = position + length
            if length < 1 or end > size:
                raise InvalidRecordBatch(f"record of {length} bytes does not fit its batch")
            b = payload[position + 1]  # timestampDelta, after the attributes
            at = position + 2 if b < 0x80 else varint(payload, position + 1)[1]
            b = payload[at]
            if b < 0x80:
                offset_delta, at = (b >> 1) ^ -(b & 1), at + 1
            else:
                offset_delta, at = varint(payload, at)
            b = payload[at]
            if b < 0x80:
                key_length, at = (b >> 1) ^ -(b & 1), at + 1
            else:
                key_length, at = varint(payload, at)
            if key_length >= 0:
                keys.append(payload[at : at + key_length])
                at += key_length
            else:
                keys.append(None)
            b = payload[at]
            if b < 0x80:
                value_length, at = (b >> 1) ^ -(b & 1), at + 1
            elif payload[at + 1] < 0x80:
                v = (b & 0x7F) | (payload[at + 1] << 7)
                value_length, at = (v >> 1) ^ -(v & 1), at + 2
            else:
                value_length, at = varint(payload, at)
            if at + max(value_length, 0) > end:
                raise InvalidRecordBatch("record fields run past its length")
            offsets.append(base_offset + offset_delta)
            tombstones.append(value_length < 0)
            position = end
    except IndexError:
        raise InvalidRecordBatch("records end inside a record") from None
    if position != size:
        raise InvalidRecordBatch("records do not add up to the batch length")
    return KeyScan(header, offsets, keys, tombstones)


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
        if base_timestamp == header.base_timestamp:
            bodies.append(record.framed)  # deltas unchanged: copied as stored
            continue
        data, ts_start = record.records, record.body_start + 1
        body = (
            data[record.body_start : ts_start]
            + write_varint(record.timestamp - base_timestamp)
            + data[record.timestamp_end : record.end]
        )
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
    return decompress(header.attributes & COMPRESSION_MASK, data)


def _compressed(header: RecordBatchHeader, data: bytes) -> bytes:
    return compress(header.attributes & COMPRESSION_MASK, data)
