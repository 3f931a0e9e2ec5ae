"""Writing a snapshot: a new RocksDB database in a temp directory, published by rename.

    <root>/.tmp-<name>-<random>/db/...       RocksDB files
    <root>/.tmp-<name>-<random>/manifest.json
      -- fsync every file and both directories, then rename to --
    <root>/<end offset>-<epoch>.snapshot/

A crash before the rename leaves only a temp directory, which the store
removes when it opens; after the rename (and the fsync of `<root>`) the
snapshot is complete. Readers never see a half-written snapshot.
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from collections.abc import Iterable, Iterator
from itertools import pairwise
from pathlib import Path

from rocksdict import Rdict, WriteBatch

from quorum.common.fsutil import fsync_dir, fsync_path, write_atomically
from quorum.raft.records import SnapshotId
from snapshots import rocks
from snapshots.errors import SnapshotCorruptionError, SnapshotExistsError
from snapshots.manifest import MANIFEST_FILE, SnapshotManifest
from snapshots.naming import snapshot_name
from snapshots.records import Record, RecordChecksum

WRITE_BATCH_RECORDS = 10_000
TEMP_PREFIX = ".tmp-"
DB_DIR = "db"


def write_snapshot(
    root: Path,
    snapshot_id: SnapshotId,
    records: Iterable[Record],
    *,
    expected_checksum: int | None = None,
    now_ms: int | None = None,
) -> SnapshotManifest:
    """Write and publish a snapshot of `records` (any order; stored sorted).

    With `expected_checksum` (an installed transfer), the snapshot is published
    only if the records match it.
    """
    name = snapshot_name(snapshot_id)
    final = root / name
    if final.exists():
        raise SnapshotExistsError(f"{final} already exists")
    temp = root / f"{TEMP_PREFIX}{name}-{uuid.uuid4().hex[:8]}"
    temp.mkdir()
    try:
        checksum = _write_database(temp / DB_DIR, records)
        if expected_checksum is not None and checksum.value != expected_checksum:
            raise SnapshotCorruptionError(
                final,
                f"records have checksum {checksum.value:#010x}, expected {expected_checksum:#010x}",
            )
        manifest = SnapshotManifest(
            snapshot_id=snapshot_id,
            record_count=checksum.count,
            data_bytes=checksum.data_bytes,
            checksum=checksum.value,
            created_time_ms=time.time_ns() // 1_000_000 if now_ms is None else now_ms,
        )
        write_atomically(temp / MANIFEST_FILE, manifest.to_json())
        os.rename(temp, final)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    fsync_dir(root)
    return manifest


def _write_database(path: Path, records: Iterable[Record]) -> RecordChecksum:
    """Stream `records` into a new database a chunk at a time, never holding them
    all (a million partitions' records were a 250 MB list). Input in strictly
    increasing key order (what an image yields) is checksummed as it goes; any
    other order is checksummed afterwards from the database, which stores keys
    sorted, and a duplicate key shows as fewer records there than were given."""
    checksum = RecordChecksum()
    db = rocks.open_for_writing(path)
    given, in_order, previous = 0, True, b""
    try:
        write_options = rocks.no_wal()
        for chunk in _chunks(records, WRITE_BATCH_RECORDS):
            batch = WriteBatch(raw_mode=True)
            for key, value in chunk:
                batch.put(key, value)
            db.write(batch, write_options)
            if in_order:
                keys = [previous] + [key for key, _ in chunk] if given else [k for k, _ in chunk]
                in_order = all(a < b for a, b in pairwise(keys))
                if in_order:
                    checksum.update(chunk)
            previous = chunk[-1][0]
            given += len(chunk)
        db.flush()
        if not in_order:
            checksum = _checksum_in_key_order(db)
            if checksum.count != given:
                raise ValueError(
                    f"duplicate snapshot keys: {given} records, {checksum.count} distinct keys"
                )
    finally:
        db.close()
    for entry in os.listdir(path):
        fsync_path(path / entry)
    fsync_dir(path)
    return checksum


def _chunks(records: Iterable[Record], size: int) -> Iterator[list[Record]]:
    chunk: list[Record] = []
    for record in records:
        chunk.append(record)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _checksum_in_key_order(db: Rdict) -> RecordChecksum:
    checksum = RecordChecksum()
    chunk: list[Record] = []
    for key, value in db.items():
        chunk.append((key, value))
        if len(chunk) == WRITE_BATCH_RECORDS:
            checksum.update(chunk)
            chunk = []
    checksum.update(chunk)
    return checksum
