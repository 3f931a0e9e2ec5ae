"""Kafka record batches (magic 2) at the byte level: what a leader checks and
stamps before storing a batch as the producer sent it.

    offset  size  field
    0       8     baseOffset            set by the leader (outside the CRC)
    8       4     batchLength           bytes after this field
    12      4     partitionLeaderEpoch  set by the leader (outside the CRC)
    16      1     magic                 2
    17      4     crc                   CRC-32C of bytes [21, end)
    21      2     attributes            bits 0-2 compression, 3 timestamp type,
                                        4 transactional, 5 control
    23      4     lastOffsetDelta
    27      8     baseTimestamp
    35      8     maxTimestamp
    43      8     producerId
    51      2     producerEpoch
    53      4     baseSequence
    57      4     recordsCount
    61      ...   records (compressed as the attributes say)

Only the header is decoded: records stay as sent (possibly compressed), so
appending costs one CRC and two stamps, never a re-encode. kio's readers decode
whole batches (the tests use its writers to build them).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import google_crc32c

HEADER_SIZE = 61
MAGIC = 2
_LOG_OVERHEAD = 12  # baseOffset + batchLength
_CRC_START = 21
_HEADER = struct.Struct(">qiibIhiqqqhii")
_BASE_OFFSET = struct.Struct(">q")
_LEADER_EPOCH = struct.Struct(">i")
NO_PRODUCER_ID = -1
CONTROL_FLAG = 0x20
CODEC_BITS = 0x07  # the attributes' compression codec
MAX_CODEC = 4  # zstd: 5-7 name no codec, and a consumer could not read the batch
TRANSACTIONAL_FLAG = 0x10

assert _HEADER.size == HEADER_SIZE


class InvalidRecordBatch(ValueError):
    """Bytes that are not a valid batch; `corrupt` when the CRC or framing is
    wrong (CORRUPT_MESSAGE), else a well-formed batch Kafka would refuse
    (INVALID_RECORD)."""

    def __init__(self, detail: str, *, corrupt: bool = True) -> None:
        super().__init__(detail)
        self.corrupt = corrupt


@dataclass(frozen=True, slots=True)
class RecordBatchHeader:
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        return _LOG_OVERHEAD + self.batch_length

    @property
    def offset_count(self) -> int:
        return self.last_offset_delta + 1

    @property
    def last_sequence(self) -> int:
        return (self.base_sequence + self.last_offset_delta) % 2**31

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG)


def parse_header(data: bytes | memoryview, position: int = 0) -> RecordBatchHeader:
    if len(data) - position < HEADER_SIZE:
        raise InvalidRecordBatch(f"{len(data) - position} bytes cannot hold a batch header")
    return RecordBatchHeader(*_HEADER.unpack_from(data, position))


def split_batches(
    data: bytes, *, allow_empty: bool = False
) -> list[tuple[RecordBatchHeader, bytes]]:
    """Every batch in a Produce request's (or a Fetch answer's) record set,
    checked: framing, magic, CRC, offset delta and record count. `allow_empty`:
    a leader's answer may hold batches compaction emptied (kept for their
    producer's sequence), which no producer may send."""
    out: list[tuple[RecordBatchHeader, bytes]] = []
    position = 0
    view = memoryview(data)
    while position < len(data):
        header = parse_header(data, position)
        end = position + header.size
        if header.batch_length < HEADER_SIZE - _LOG_OVERHEAD or end > len(data):
            raise InvalidRecordBatch(
                f"batch length {header.batch_length} does not fit the {len(data)} bytes sent"
            )
        if header.magic != MAGIC:
            raise InvalidRecordBatch(f"record batch magic {header.magic}, only 2 is served")
        if google_crc32c.value(bytes(view[position + _CRC_START : end])) != header.crc:
            raise InvalidRecordBatch("record batch CRC-32C mismatch")
        if header.attributes & CODEC_BITS > MAX_CODEC:
            raise InvalidRecordBatch(
                f"compression codec {header.attributes & CODEC_BITS} (attributes bits 0-2): "
                "Kafka defines 0-4"
            )
        if header.last_offset_delta < 0 or header.records_count < (0 if allow_empty else 1):
            raise InvalidRecordBatch(
                f"batch with {header.records_count} records and last offset delta "
                f"{header.last_offset_delta}",
                corrupt=False,
            )
        out.append((header, bytes(view[position:end])))
        position = end
    if not out:
        raise InvalidRecordBatch("no record batch")
    return out


def stamp(batch: bytes, base_offset: int, partition_leader_epoch: int) -> bytes:
    """The batch with the leader's base offset and leader epoch (outside the CRC)."""
    out = bytearray(batch)
    _BASE_OFFSET.pack_into(out, 0, base_offset)
    _LEADER_EPOCH.pack_into(out, 12, partition_leader_epoch)
    return bytes(out)
