"""Batches appended as they came, already in the on-disk format (`append_encoded`):
the broker's metadata log writes the bytes the active controller encoded once.
The file, index and epoch cache must be what `append` makes of the same
batches, recovery must read them back, and bytes that fail a check must be
refused before anything is written."""

from __future__ import annotations

import struct
from pathlib import Path

import google_crc32c
import pytest

from quorum.log.batch_format import (
    HEADER_SIZE,
    EncodedBatchError,
    OpaqueBatch,
    decode_encoded,
    encode_batch,
    encoded_record_count,
)
from quorum.log.file_log import FileLogStore
from quorum.raft.records import Batch

PREFIX = struct.Struct(">qIiBBIq")


def batches() -> list[Batch]:
    return [
        Batch(0, 1, (b"a" * 40, b"b" * 7), 1_000),
        Batch(2, 1, (b"c" * 90,), 1_001),
        Batch(3, 2, (b"leader change",), 1_002, control=True),
        Batch(4, 2, tuple(b"r%d" % i * 9 for i in range(5)), 1_003),
        Batch(9, 4, (b"d" * 60,), 1_004),
    ]


def directory_bytes(root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(root.iterdir()) if p.name != ".lock"}


def test_the_same_batches_make_the_same_files_either_way_and_read_back(tmp_path: Path) -> None:
    """Small segments, so both paths roll; then a restart reads what was written."""
    by_records, by_encoding = tmp_path / "records", tmp_path / "encoded"
    with FileLogStore(by_records, segment_bytes=200, index_interval_bytes=60) as log:
        for batch in batches():
            log.append([batch])
        log.flush(log.end_offset)
    with FileLogStore(by_encoding, segment_bytes=200, index_interval_bytes=60) as log:
        encoded = [decode_encoded(encode_batch(b)) for b in batches()]
        log.append_encoded(encoded[:2])
        log.append_encoded(encoded[2:])
        assert log.end_offset == 10
        assert [e.epoch for e in log.epoch_entries] == [1, 2, 4]
        assert log.read(4, 1 << 20)[0] == batches()[3]
        log.flush(log.end_offset)
    assert directory_bytes(by_encoding) == directory_bytes(by_records)
    assert len(list(by_encoding.glob("*.log"))) > 1
    with FileLogStore(by_encoding, segment_bytes=200) as log:
        _, recovered = log.recover()
        assert recovered == batches()
        assert log.end_offset_for_epoch(2).offset == 9


def test_the_decoded_batch_is_the_one_encoded() -> None:
    for batch in batches():
        encoded = decode_encoded(encode_batch(batch))
        assert encoded.to_batch() == batch
        assert (encoded.base_offset, encoded.next_offset) == (batch.base_offset, batch.next_offset)
        assert encoded_record_count(encoded.data) == len(batch.records)
    assert encoded_record_count(b"short") == 0


def corrupt(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0x01]) + data[at + 1 :]


def with_checksums(prefix: bytes, payload: bytes) -> bytes:
    """A batch whose two checksums hold, whatever its fields say."""
    crc = google_crc32c.extend(google_crc32c.value(prefix), payload)
    checked = prefix + struct.pack(">I", crc)
    return checked + struct.pack(">I", google_crc32c.value(checked)) + payload


@pytest.mark.parametrize(
    ("name", "damage"),
    [
        ("a header byte", lambda d: corrupt(d, 12)),
        ("the header checksum", lambda d: corrupt(d, HEADER_SIZE - 1)),
        ("a payload byte", lambda d: corrupt(d, len(d) - 3)),
        ("the payload checksum", lambda d: corrupt(d, 31)),
        ("a byte cut off", lambda d: d[:-1]),
        ("a byte too many", lambda d: d + b"\x00"),
        ("only part of the header", lambda d: d[:20]),
        ("nothing", lambda d: b""),
        (
            "record lengths that do not add up, checksums that hold",
            lambda d: with_checksums(
                PREFIX.pack(5, 4 + 10, 1, 1, 0, 1, 0), struct.pack(">I", 9) + b"x" * 10
            ),
        ),
        (
            "an unknown format, checksums that hold",
            lambda d: with_checksums(PREFIX.pack(5, 5, 1, 9, 0, 1, 0), b"x" * 5),
        ),
    ],
)
def test_damaged_bytes_are_refused_before_a_log_sees_them(
    tmp_path: Path, name: str, damage: object
) -> None:
    data = encode_batch(Batch(5, 1, (b"record one", b"record two"), 1_000))
    with pytest.raises(EncodedBatchError):
        decode_encoded(damage(data))  # type: ignore[operator]


def test_a_batch_out_of_order_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    with FileLogStore(tmp_path) as log:
        log.append_encoded([decode_encoded(encode_batch(batches()[0]))])
        end, size = log.end_offset, log.segments[-1].size_bytes
        good = decode_encoded(encode_batch(batches()[1]))
        gap = decode_encoded(encode_batch(Batch(7, 1, (b"x",), 1)))
        older = decode_encoded(encode_batch(Batch(3, 0, (b"x",), 1)))
        for refused in ([gap], [good, gap], [good, older]):
            with pytest.raises(ValueError):
                log.append_encoded(refused)
            assert (log.end_offset, log.segments[-1].size_bytes) == (end, size)
        log.append_encoded([good])
        assert log.end_offset == 3


def test_opaque_batches_go_through_as_they_came(tmp_path: Path) -> None:
    batch = OpaqueBatch(0, 0, (b"kafka batch" * 3,), 5, offset_count=4)
    with FileLogStore(tmp_path) as log:
        log.append_encoded([decode_encoded(encode_batch(batch))])
        assert log.end_offset == 4
    with FileLogStore(tmp_path) as log:
        assert log.recover()[1] == [batch]
