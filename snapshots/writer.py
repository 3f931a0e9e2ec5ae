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
from collections.abc import Iterable
from pathlib import Path

from rocksdict import WriteBatch

from quorum.common.fsutil import fsync_dir, fsync_path, write_atomically
from quorum.raft.records import SnapshotId
from snapshots import rocks
from snapshots.errors import SnapshotCorruptionError, SnapshotExistsError
from snapshots.manifest import MANIFEST_FILE, SnapshotManifest
from snapshots.naming import snapshot_name
from snapshots.records import Record, RecordChecksum, sorted_records

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
    ordered = sorted_records(records)
    temp = root / f"{TEMP_PREFIX}{name}-{uuid.uuid4().hex[:8]}"
    temp.mkdir()
    try:
        checksum = _write_database(temp / DB_DIR, ordered)
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


def _write_database(path: Path, ordered: list[Record]) -> RecordChecksum:
    checksum = RecordChecksum()
    db = rocks.open_for_writing(path)
    try:
        write_options = rocks.no_wal()
        for start in range(0, len(ordered), WRITE_BATCH_RECORDS):
            chunk = ordered[start : start + WRITE_BATCH_RECORDS]
            batch = WriteBatch(raw_mode=True)
            for key, value in chunk:
                batch.put(key, value)
            db.write(batch, write_options)
            checksum.update(chunk)
        db.flush()
    finally:
        db.close()
    for entry in os.listdir(path):
        fsync_path(path / entry)
    fsync_dir(path)
    return checksum
