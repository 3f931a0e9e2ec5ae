"""RocksDB settings for snapshot databases, which are written once and then only read.

Each snapshot is its own database, built fresh and never modified: rocksdict
0.3.x's `Rdict.snapshot()` iterators also return writes made after the
snapshot, so point-in-time reads of a live database cannot be trusted. The
write-ahead log is off because durability comes from flushing the memtables,
fsyncing every file and publishing the directory by rename.
"""

from __future__ import annotations

from pathlib import Path

from rocksdict import AccessType, Options, Rdict, WriteOptions

WRITE_BUFFER_BYTES = 128 * 1024 * 1024


def open_for_writing(path: Path) -> Rdict:
    options = Options(raw_mode=True)
    options.set_write_buffer_size(WRITE_BUFFER_BYTES)
    options.set_disable_auto_compactions(True)  # key-ordered inserts: flushed files never overlap
    options.set_keep_log_file_num(1)
    options.set_error_if_exists(True)
    return Rdict(str(path), options)


def open_read_only(path: Path) -> Rdict:
    options = Options(raw_mode=True)
    options.set_keep_log_file_num(1)
    return Rdict(str(path), options, access_type=AccessType.read_only())


def no_wal() -> WriteOptions:
    write_options = WriteOptions()
    write_options.disable_wal = True  # type: ignore[method-assign, assignment]  # a property at runtime
    return write_options
