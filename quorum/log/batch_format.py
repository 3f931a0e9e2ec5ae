"""How one `Batch` is laid out on disk.

    offset  size  field
    0       8     base_offset      int64, big-endian like every field
    8       4     payload_length   bytes after the header
    12      4     leader_epoch     int32
    16      1     magic            format version (1)
    17      1     attributes       bit 0: control batch
    18      4     record_count     >= 1
    22      8     append_time_ms   int64, the leader's clock when it sealed the batch
    30      4     crc              CRC32C of bytes [0, 30) and of the payload
    34      4     header_crc       CRC32C of bytes [0, 34)
    38      ...   payload          record_count uint32 lengths, then the records

A batch of magic 2 (`OpaqueBatch`) holds one opaque payload instead of the
length table and records, and its `record_count` is the number of offsets the
payload spans: the data plane stores each Kafka record batch this way, as the
producer sent it, so a Fetch serves the stored bytes without re-encoding.

`crc` protects the whole batch. `header_crc` exists so recovery can tell a torn
write (a valid header whose payload runs past the end of the file) from a
damaged length field, which would otherwise look exactly like a torn write and
silently cut acknowledged batches. The record lengths come first so encoding
and decoding are a few C-level calls instead of a Python loop per record.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from itertools import accumulate

import google_crc32c

from quorum.raft.records import Batch

MAGIC = 1
MAGIC_OPAQUE = 2
HEADER_SIZE = 38
_PREFIX = struct.Struct(">qIiBBIq")  # the 30 bytes covered by both checksums
_CRC = struct.Struct(">I")
_HEADER = struct.Struct(">qIiBBIqII")
_CONTROL = 0x01
MAX_PAYLOAD_BYTES = 2**31 - 1 - HEADER_SIZE

assert _PREFIX.size == 30 and _HEADER.size == HEADER_SIZE


@dataclass(frozen=True, slots=True)
class BatchHeader:
    base_offset: int
    payload_length: int
    epoch: int
    magic: int
    control: bool
    record_count: int
    append_time_ms: int
    crc: int

    @property
    def size(self) -> int:
        """Bytes the whole batch takes on disk."""
        return HEADER_SIZE + self.payload_length

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.record_count


@dataclass(frozen=True, slots=True)
class OpaqueBatch(Batch):
    """A batch whose single payload (`records[0]`) spans `offset_count` offsets,
    stored with magic 2: its inner format is the caller's (Kafka record batches)."""

    offset_count: int = 1

    @property
    def payload(self) -> bytes:
        return self.records[0]

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.offset_count - 1

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.offset_count


class HeaderChecksumError(ValueError):
    """The header's own checksum does not match: its fields cannot be trusted."""


def encode_batch(batch: Batch) -> bytes:
    return b"".join(encode_batch_parts(batch))


def encode_batch_parts(batch: Batch) -> tuple[bytes, bytes, bytes]:
    """The encoded batch as (header, record lengths, records), for `writev`:
    joining them would copy every record once more."""
    records = batch.records
    count = len(records)
    if count == 0:
        raise ValueError(f"batch at offset {batch.base_offset} has no records")
    magic = MAGIC
    if isinstance(batch, OpaqueBatch):
        if count != 1 or batch.offset_count < 1:
            raise ValueError(f"opaque batch at offset {batch.base_offset} is malformed")
        magic, count, lengths, body = MAGIC_OPAQUE, batch.offset_count, b"", records[0]
    else:
        lengths = struct.pack(f">{count}I", *map(len, records))
        body = b"".join(records)
    payload_length = len(lengths) + len(body)
    if payload_length > MAX_PAYLOAD_BYTES:
        raise ValueError(f"batch at offset {batch.base_offset} is {payload_length} bytes")
    prefix = _PREFIX.pack(
        batch.base_offset,
        payload_length,
        batch.epoch,
        magic,
        _CONTROL if batch.control else 0,
        count,
        batch.append_time_ms,
    )
    crc = google_crc32c.extend(google_crc32c.extend(google_crc32c.value(prefix), lengths), body)
    checked = prefix + _CRC.pack(crc)
    return checked + _CRC.pack(google_crc32c.value(checked)), lengths, body


def parse_header(data: bytes, position: int) -> BatchHeader:
    """Decode the header at `position`; `data` must hold HEADER_SIZE bytes there.

    Raises HeaderChecksumError when the header's checksum is wrong.
    """
    fields = _HEADER.unpack_from(data, position)
    header_bytes = data[position : position + HEADER_SIZE - 4]
    if google_crc32c.value(header_bytes) != fields[8]:
        raise HeaderChecksumError("batch header checksum mismatch")
    base, payload_length, epoch, magic, attributes, count, append_time, crc, _ = fields
    return BatchHeader(
        base, payload_length, epoch, magic, bool(attributes & _CONTROL), count, append_time, crc
    )


def header_problem(header: BatchHeader) -> str | None:
    """A reason the (checksum-valid) header cannot be ours, or None."""
    if header.magic not in (MAGIC, MAGIC_OPAQUE):
        return f"unknown batch format {header.magic}"
    if header.record_count < 1:
        return "batch with no records"
    if header.magic == MAGIC and header.payload_length < 4 * header.record_count:
        return f"payload of {header.payload_length} bytes cannot hold {header.record_count} records"
    return None


def payload_crc_ok(data: bytes, position: int, header: BatchHeader) -> bool:
    """Whether the batch at `position` (wholly inside `data`) matches its CRC."""
    start = position + HEADER_SIZE
    crc = google_crc32c.value(data[position : position + _PREFIX.size])
    crc = google_crc32c.extend(crc, data[start : start + header.payload_length])
    return bool(crc == header.crc)


def decode_records(data: bytes, position: int, header: BatchHeader) -> tuple[bytes, ...]:
    """Split the payload of the batch at `position` into its records.

    Raises ValueError when the lengths do not add up to the payload size.
    """
    count = header.record_count
    start = position + HEADER_SIZE
    lengths = struct.unpack_from(f">{count}I", data, start)
    body = start + 4 * count
    if body + sum(lengths) != start + header.payload_length:
        raise ValueError("record lengths do not add up to the payload length")
    ends = list(accumulate(lengths, initial=body))
    return tuple(data[ends[i] : ends[i + 1]] for i in range(count))


def decode_batch(data: bytes, position: int, header: BatchHeader) -> Batch:
    if header.magic == MAGIC_OPAQUE:
        start = position + HEADER_SIZE
        return OpaqueBatch(
            base_offset=header.base_offset,
            epoch=header.epoch,
            records=(data[start : start + header.payload_length],),
            append_time_ms=header.append_time_ms,
            control=header.control,
            offset_count=header.record_count,
        )
    return Batch(
        base_offset=header.base_offset,
        epoch=header.epoch,
        records=decode_records(data, position, header),
        append_time_ms=header.append_time_ms,
        control=header.control,
    )
