"""Kafka's record-batch codecs, for the few places a broker reads inside a batch
(the log cleaner, ListOffsets by time, the keyless-record check of a compacted
topic): gzip (1), snappy (2), lz4 (3) and zstd (4), attributes bits 0-2.

What the clients write, and what this module writes back when the cleaner
rewrites a batch in its own codec:

* snappy: Java's producer frames it as xerial's stream (an 8-byte magic, two
  int32 versions, then int32-length-prefixed raw snappy blocks); librdkafka may
  write one raw block. Both are read; xerial's framing (32 KiB blocks) is written,
  which every client reads.
* lz4: the LZ4 frame format. Written with independent 64 KiB blocks and neither
  content size nor checksums, as Kafka's own `KafkaLZ4BlockOutputStream` does.
* zstd: a standard zstd frame.

A batch's records never decompress to more than `MAX_DECOMPRESSED_BYTES` here:
every codec is read with its output bounded before it is allocated (gzip, lz4,
zstd) or after its declared size is checked (snappy). A batch over the bound (a
compression bomb a client produced, or more than a broker should hold for one
batch) raises `UnsupportedCompression`, as an unknown codec does: the caller
leaves it whole, which never loses a record. Corrupt data raises
`InvalidRecordBatch`.
"""

from __future__ import annotations

import struct
import zlib

import cramjam
import lz4.frame

from broker_agent.partitions.record_batch import InvalidRecordBatch

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODECS = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}

MAX_DECOMPRESSED_BYTES = 64 << 20

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024
_INT32 = struct.Struct(">i")
_ZSTD_FIRST_GUESS = 1 << 16  # output buffer bytes tried first, grown fourfold


class UnsupportedCompression(Exception):
    """A codec this broker does not read, or records larger than it reads."""


def decompress(codec: int, data: bytes, limit: int | None = None) -> bytes:
    """The records section of a batch compressed with `codec`, at most `limit`
    bytes (`MAX_DECOMPRESSED_BYTES` unless given)."""
    if limit is None:
        limit = MAX_DECOMPRESSED_BYTES
    if codec == NONE:
        return data
    name = CODECS.get(codec)
    if name is None:
        raise UnsupportedCompression(f"compression codec {codec}")
    try:
        if codec == GZIP:
            out = _gunzip(data, limit)
        elif codec == SNAPPY:
            out = _unsnappy(data, limit)
        elif codec == LZ4:
            out = _unlz4(data, limit)
        else:
            out = _unzstd(data, limit)
    except (zlib.error, RuntimeError, cramjam.DecompressionError, struct.error) as exc:
        raise InvalidRecordBatch(f"{name} records: {exc}") from None
    if len(out) > limit:
        raise UnsupportedCompression(f"{name} records over {limit} bytes decompressed")
    return out


def compress(codec: int, data: bytes) -> bytes:
    """`data` compressed as `codec` writes it for every client to read."""
    if codec == NONE:
        return data
    if codec == GZIP:
        packer = zlib.compressobj(wbits=16 + zlib.MAX_WBITS)
        return packer.compress(data) + packer.flush()
    if codec == SNAPPY:
        out = [_XERIAL_HEADER]
        for start in range(0, len(data), _XERIAL_BLOCK):
            block = bytes(cramjam.snappy.compress_raw(data[start : start + _XERIAL_BLOCK]))
            out += (_INT32.pack(len(block)), block)
        return b"".join(out)
    if codec == LZ4:
        return lz4.frame.compress(  # type: ignore[no-any-return]
            data,
            block_size=lz4.frame.BLOCKSIZE_MAX64KB,
            block_linked=False,
            content_checksum=False,
            store_size=False,
        )
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data))
    raise UnsupportedCompression(f"compression codec {codec}")


def _gunzip(data: bytes, limit: int) -> bytes:
    unpacker = zlib.decompressobj(16 + zlib.MAX_WBITS)
    out = unpacker.decompress(data, limit + 1)
    if len(out) <= limit and not unpacker.eof:
        raise InvalidRecordBatch("gzip records: a truncated stream")
    return out


def _unsnappy(data: bytes, limit: int) -> bytes:
    """Raw snappy blocks say their size first: all are checked before any is read."""
    blocks = _xerial_blocks(data) if data.startswith(XERIAL_MAGIC) else [data]
    if sum(cramjam.snappy.decompress_raw_len(b) for b in blocks) > limit:
        raise UnsupportedCompression(f"snappy records over {limit} bytes decompressed")
    return b"".join(bytes(cramjam.snappy.decompress_raw(b)) for b in blocks)


def _xerial_blocks(data: bytes) -> list[bytes]:
    blocks = []
    position = len(_XERIAL_HEADER)
    while position < len(data):
        (size,) = _INT32.unpack_from(data, position)
        position += _INT32.size
        if size < 0 or position + size > len(data):
            raise InvalidRecordBatch("snappy records: a block past the end")
        blocks.append(data[position : position + size])
        position += size
    return blocks


def _unlz4(data: bytes, limit: int) -> bytes:
    unpacker = lz4.frame.LZ4FrameDecompressor()
    out: bytes = unpacker.decompress(data, max_length=limit + 1)
    if len(out) <= limit and not unpacker.eof:
        raise InvalidRecordBatch("lz4 records: a truncated frame")
    return out


def _unzstd(data: bytes, limit: int) -> bytes:
    """Into a buffer grown fourfold from a guess (a zstd frame need not say its
    size), never larger than `limit` + 1 bytes."""
    size = min(limit + 1, max(_ZSTD_FIRST_GUESS, 4 * len(data)))
    while True:
        buffer = bytearray(size)
        try:
            written = cramjam.zstd.decompress_into(data, buffer)
        except cramjam.DecompressionError as exc:
            if "buffer" not in str(exc):  # corrupt, not too small a buffer
                raise
            if size > limit:
                raise UnsupportedCompression(
                    f"zstd records over {limit} bytes decompressed"
                ) from None
            size = min(limit + 1, size * 4)
            continue
        return bytes(memoryview(buffer)[:written])


__all__ = [
    "CODECS",
    "GZIP",
    "LZ4",
    "MAX_DECOMPRESSED_BYTES",
    "SNAPPY",
    "ZSTD",
    "UnsupportedCompression",
    "compress",
    "decompress",
]
