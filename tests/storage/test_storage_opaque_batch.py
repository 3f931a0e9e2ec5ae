"""Opaque batches (magic 2): one payload spanning several offsets, as the data
plane stores Kafka record batches. They share the log's checksums, index,
epoch cache and torn-tail recovery with ordinary batches."""

from __future__ import annotations

from pathlib import Path

import pytest

from quorum.log.batch_format import OpaqueBatch, encode_batch
from quorum.log.file_log import FileLogStore


def opaque(base: int, count: int, epoch: int = 0, fill: bytes = b"k") -> OpaqueBatch:
    return OpaqueBatch(base, epoch, (fill * (10 + count),), 1_000 + base, offset_count=count)


def test_opaque_batches_span_their_offset_count_and_read_back_byte_for_byte(
    tmp_path: Path,
) -> None:
    with FileLogStore(tmp_path, segment_bytes=200) as log:
        log.append([opaque(0, 5), opaque(5, 3, epoch=1, fill=b"x")])
        log.append([opaque(8, 1, epoch=1)])
        assert log.end_offset == 9
        read = log.read(6, 1_000)
        assert (read[0].base_offset, read[0].next_offset) == (5, 8)
        assert isinstance(read[0], OpaqueBatch) and read[0].payload == b"x" * 13
        assert log.end_offset_for_epoch(0).offset == 5
    with FileLogStore(tmp_path, segment_bytes=200) as log:
        _, batches = log.recover()
        assert [(b.base_offset, b.next_offset, b.epoch) for b in batches] == [
            (0, 5, 0),
            (5, 8, 1),
            (8, 9, 1),
        ]
        log.truncate(6)  # inside the second batch: it goes whole
        assert log.end_offset == 5


def test_a_torn_opaque_tail_is_cut_on_open(tmp_path: Path) -> None:
    with FileLogStore(tmp_path) as log:
        log.append([opaque(0, 4), opaque(4, 4)])
        log.flush(log.end_offset)
        path = log.segment_paths[-1]
    size = path.stat().st_size
    with path.open("r+b") as f:
        f.truncate(size - 3)
    with FileLogStore(tmp_path) as log:
        assert log.end_offset == 4


def test_an_opaque_batch_must_hold_exactly_one_payload() -> None:
    with pytest.raises(ValueError):
        encode_batch(OpaqueBatch(0, 0, (b"a", b"b"), 0, offset_count=2))
