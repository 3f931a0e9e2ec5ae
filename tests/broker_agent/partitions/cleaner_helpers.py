"""Real partition logs in temporary directories for the log cleaner's tests:
batches written with kio's record writer, logs read back with kio's reader
(which checks every batch's CRC-32C)."""

from __future__ import annotations

import datetime
import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kio.records.readers import read_batch
from kio.records.schema import NewRecordBatch, Record
from kio.records.writers import write_new_batch
from kio.schema.errors import ErrorCode
from kio.static.primitive import TZAwareMicros, i8, i16, i32, i64

from broker_agent.partitions.partition_log import LogConfig, PartitionLog
from broker_agent.partitions.producer_state import ProducerStateTable
from broker_agent.partitions.record_batch import parse_header, split_batches
from broker_agent.partitions.replica_manager import ReplicaManager

BASE_TIME_MS = 1_700_000_000_000
KeyValue = tuple[bytes | None, bytes | None]


def make_batch(
    records: Sequence[KeyValue],
    *,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    timestamp_ms: int = BASE_TIME_MS,
) -> bytes:
    ts = TZAwareMicros.parse(datetime.datetime.fromtimestamp(timestamp_ms / 1000, datetime.UTC))
    batch = NewRecordBatch(
        producer_id=i64(producer_id),
        producer_epoch=i16(producer_epoch),
        base_sequence=i32(base_sequence),
        records=tuple(
            Record(attributes=i8(0), timestamp=ts, offset=i64(i), key=k, value=v, headers=())
            for i, (k, v) in enumerate(records)
        ),
        attributes=i16(0),
    )
    buffer = io.BytesIO()
    write_new_batch(buffer, batch)
    return buffer.getvalue()


def compact_config(**changes: object) -> LogConfig:
    values: dict[str, object] = {
        "segment_bytes": 4096,
        "cleanup_policy": "compact",
        "min_cleanable_dirty_ratio": 0.0,
    }
    values.update(changes)
    return LogConfig(**values)  # type: ignore[arg-type]


def open_log(directory: Path, config: LogConfig | None = None) -> PartitionLog:
    return PartitionLog(directory, config or compact_config(), BASE_TIME_MS)


def produce(plog: PartitionLog, batch: bytes, epoch: int = 0) -> int:
    return plog.append_as_leader(split_batches(batch), epoch, BASE_TIME_MS)


def producers_of(plog: PartitionLog) -> ProducerStateTable:
    table = ProducerStateTable()
    table.rebuild(plog.batch_headers())
    return table


@dataclass(frozen=True)
class Stored:
    offset: int
    key: bytes | None
    value: bytes | None


def read_all(plog: PartitionLog, from_offset: int = 0) -> list[Stored]:
    """Every record from `from_offset` as a consumer would fetch it, each batch's
    CRC checked by kio's reader."""
    return records_in(plog.read(from_offset, 1 << 30, plog.log_end_offset))


def records_in(data: bytes) -> list[Stored]:
    """The records of a Fetch answer's record set (kio's reader checks each CRC)."""
    out: list[Stored] = []
    position = 0
    while position < len(data):
        batch, size = read_batch(data, position)
        out.extend(Stored(r.offset, r.key, r.value) for r in batch.records)
        position += size
    return out


def batch_headers(plog: PartitionLog) -> list[tuple[int, int, int, int, int]]:
    """(base offset, last offset delta, producer id, epoch, base sequence) per batch."""
    data = plog.read(0, 1 << 30, plog.log_end_offset)
    out = []
    for header, _ in split_batches(data, allow_empty=True):
        out.append(
            (
                header.base_offset,
                header.last_offset_delta,
                header.producer_id,
                header.producer_epoch,
                header.base_sequence,
            )
        )
    assert [parse_header(raw).crc for _, raw in split_batches(data, allow_empty=True)]
    return out


def latest_per_key(records: Sequence[Stored]) -> dict[bytes | None, Stored]:
    latest: dict[bytes | None, Stored] = {}
    for record in records:
        latest[record.key] = record
    return latest


T = "changelog"
KEYS = 30


async def produce_updates(
    leader: ReplicaManager, rounds: int, first_round: int = 0, topic: str = T
) -> None:
    """`rounds` values of each of KEYS keys, one record a batch; the last round
    deletes every tenth key (tombstones)."""
    for r in range(first_round, first_round + rounds):
        for k in range(KEYS):
            value = None if (k % 10 == 0 and r == first_round + rounds - 1) else b"r%d" % r
            batch = make_batch([(b"key-%d" % k, value)])
            result = await leader.append(topic, 0, batch, 1, 1_000)
            assert result.error is ErrorCode.none, result
