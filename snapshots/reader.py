"""Reading a snapshot back, in key order, checked against its manifest."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from snapshots import rocks
from snapshots.errors import SnapshotCorruptionError
from snapshots.manifest import MANIFEST_FILE, SnapshotManifest
from snapshots.records import Record, RecordChecksum
from snapshots.writer import DB_DIR

CHUNK_RECORDS = 10_000


def read_manifest(directory: Path) -> SnapshotManifest:
    return SnapshotManifest.load(directory / MANIFEST_FILE)


def read_snapshot(directory: Path) -> Iterator[Record]:
    """Yield every record in key order.

    The checksum can only be known after the last record, so a mismatch is
    raised then (as SnapshotCorruptionError naming the snapshot): a caller
    must not use what it built from the records until the iterator is
    exhausted. RocksDB's own block checksums usually fail earlier.
    """
    manifest = read_manifest(directory)
    checksum = RecordChecksum()
    try:
        db = rocks.open_read_only(directory / DB_DIR)
    except Exception as exc:  # rocksdict raises plain exceptions
        raise SnapshotCorruptionError(directory, f"cannot open snapshot database: {exc}") from exc
    try:
        items = db.items()
        while True:
            try:
                chunk: list[Record] = []
                for key, value in items:
                    assert isinstance(key, bytes) and isinstance(value, bytes)  # raw mode
                    chunk.append((key, value))
                    if len(chunk) == CHUNK_RECORDS:
                        break
            except Exception as exc:
                raise SnapshotCorruptionError(directory, f"snapshot database: {exc}") from exc
            if not chunk:
                break
            checksum.update(chunk)
            yield from chunk
    finally:
        db.close()
    if checksum.count != manifest.record_count or checksum.value != manifest.checksum:
        raise SnapshotCorruptionError(
            directory,
            f"found {checksum.count} records with checksum {checksum.value:#010x}, manifest says "
            f"{manifest.record_count} with {manifest.checksum:#010x}",
        )
