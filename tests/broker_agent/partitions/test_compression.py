"""Kafka's codecs inside a batch (`compression.py`): each reads what the clients
write and writes what they read, and no batch decompresses past the bound."""

from __future__ import annotations

import os
import struct

import cramjam
import pytest

from broker_agent.partitions import compression
from broker_agent.partitions.compression import (
    GZIP,
    LZ4,
    SNAPPY,
    ZSTD,
    UnsupportedCompression,
    compress,
    decompress,
)
from broker_agent.partitions.record_batch import InvalidRecordBatch

CODECS = [GZIP, SNAPPY, LZ4, ZSTD]
DATA = b"".join(b"key-%d=value-%d;" % (i % 97, i) for i in range(20_000)) + os.urandom(5_000)


@pytest.mark.parametrize("codec", CODECS, ids=["gzip", "snappy", "lz4", "zstd"])
def test_what_is_written_reads_back(codec: int) -> None:
    packed = compress(codec, DATA)
    assert len(packed) < len(DATA)
    assert decompress(codec, packed) == DATA


def test_other_writers_are_read() -> None:
    """kafka-python's gzip and lz4 encoders, a raw snappy block (librdkafka's) and
    xerial's framing (Java's) built by hand from raw blocks."""
    import kafka.codec

    assert decompress(GZIP, kafka.codec.gzip_encode(DATA)) == DATA
    assert decompress(LZ4, kafka.codec.lz4_encode(DATA)) == DATA
    assert decompress(SNAPPY, bytes(cramjam.snappy.compress_raw(DATA))) == DATA
    halves = [DATA[: len(DATA) // 2], DATA[len(DATA) // 2 :]]
    blocks = [bytes(cramjam.snappy.compress_raw(h)) for h in halves]
    xerial = compression.XERIAL_MAGIC + struct.pack(">ii", 1, 1)
    xerial += b"".join(struct.pack(">i", len(b)) + b for b in blocks)
    assert decompress(SNAPPY, xerial) == DATA
    assert decompress(ZSTD, bytes(cramjam.zstd.compress(DATA))) == DATA


def test_what_is_written_is_read_by_another_reader() -> None:
    """Our lz4 frames as Kafka writes them (independent blocks, no stored size)
    read by kafka-python's decoder; our snappy is xerial's framing."""
    import kafka.codec

    assert kafka.codec.lz4_decode(compress(LZ4, DATA)) == DATA
    assert kafka.codec.gzip_decode(compress(GZIP, DATA)) == DATA
    assert compress(SNAPPY, DATA).startswith(compression.XERIAL_MAGIC)


@pytest.mark.parametrize("codec", CODECS, ids=["gzip", "snappy", "lz4", "zstd"])
def test_a_bomb_is_refused_before_it_is_held(codec: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Records that would decompress past the bound are not read (the caller keeps
    the batch whole): a megabyte of zeros against a 64 KiB bound here."""
    bomb = compress(codec, bytes(1 << 20))
    assert len(bomb) < 64 << 10
    monkeypatch.setattr(compression, "MAX_DECOMPRESSED_BYTES", 64 << 10)
    with pytest.raises(UnsupportedCompression, match="over 65536 bytes"):
        decompress(codec, bomb)
    monkeypatch.setattr(compression, "MAX_DECOMPRESSED_BYTES", 1 << 20)
    assert decompress(codec, bomb) == bytes(1 << 20)  # exactly the bound is read


@pytest.mark.parametrize("codec", CODECS, ids=["gzip", "snappy", "lz4", "zstd"])
def test_corrupt_records_are_invalid(codec: int) -> None:
    packed = compress(codec, DATA)
    for bad in (packed[: len(packed) // 2], b"\x01\x02garbage" * 9):
        with pytest.raises((InvalidRecordBatch, UnsupportedCompression)):
            decompress(codec, bad)
    with pytest.raises(InvalidRecordBatch):
        decompress(codec, packed[: len(packed) // 2])


def test_an_unknown_codec_is_unsupported() -> None:
    for codec in (5, 6, 7):
        with pytest.raises(UnsupportedCompression, match=f"codec {codec}"):
            decompress(codec, DATA)
