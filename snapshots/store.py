"""Snapshots on disk, one RocksDB database per snapshot id.

    <root>/00000000000000001234-0000000005.snapshot/   published (writer.py)
    <root>/.archives/<name>.archive                    transfer archives, built on demand
                                                       (or with the snapshot: archive_on_write)
    <root>/.tmp-*                                      unfinished writes and transfers
    <root>/.deleted-*                                  deletions in progress

Anything starting with a dot is invisible to listings and cleaned up on open.
Deletion renames first so a snapshot disappears atomically, then removes.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from quorum.common.fsutil import fsync_dir
from quorum.raft.records import SnapshotId
from snapshots.api import SnapshotChunk
from snapshots.archive import ArchiveHeader, write_archive
from snapshots.errors import SnapshotCorruptionError, SnapshotNotFoundError
from snapshots.manifest import SnapshotManifest
from snapshots.naming import parse_snapshot_name, snapshot_name
from snapshots.reader import read_manifest, read_snapshot
from snapshots.records import Record
from snapshots.retention import retain_latest
from snapshots.transfer import Loader, SnapshotReceiver
from snapshots.writer import (
    TEMP_PREFIX,
    WRITE_BATCH_RECORDS,
    SnapshotWriter,
    chunks,
    write_snapshot,
)

ARCHIVE_DIR = ".archives"
DELETED_PREFIX = ".deleted-"


class FileSnapshotStore:
    def __init__(self, root: str | Path, *, archive_on_write: bool = False) -> None:
        """`archive_on_write`: a store that serves its snapshots (a controller's)
        writes each one's transfer archive with it, not on the first fetch."""
        self.root = Path(root)
        self.archive_on_write = archive_on_write
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / ARCHIVE_DIR).mkdir(exist_ok=True)
        self._remove_leftovers()

    def snapshot_ids(self) -> list[SnapshotId]:
        ids = (parse_snapshot_name(name) for name in os.listdir(self.root))
        return sorted((i for i in ids if i is not None), key=lambda i: (i.end_offset, i.epoch))

    def latest(self) -> SnapshotId | None:
        ids = self.snapshot_ids()
        return ids[-1] if ids else None

    def path(self, snapshot_id: SnapshotId) -> Path:
        return self.root / snapshot_name(snapshot_id)

    def manifest(self, snapshot_id: SnapshotId) -> SnapshotManifest:
        manifest = read_manifest(self._existing(snapshot_id))
        if manifest.snapshot_id != snapshot_id:
            raise SnapshotCorruptionError(
                self.path(snapshot_id), f"manifest names snapshot {manifest.snapshot_id}"
            )
        return manifest

    def write(self, snapshot_id: SnapshotId, records: Iterable[Record]) -> SnapshotManifest:
        archive = self._archive_path(snapshot_id) if self.archive_on_write else None
        return write_snapshot(self.root, snapshot_id, records, archive=archive)

    def read(self, snapshot_id: SnapshotId) -> Iterator[Record]:
        self.manifest(snapshot_id)  # fail early on a missing or foreign snapshot
        return read_snapshot(self.path(snapshot_id))

    def delete(self, snapshot_id: SnapshotId) -> None:
        path = self._existing(snapshot_id)
        self._archive_path(snapshot_id).unlink(missing_ok=True)
        doomed = self.root / f"{DELETED_PREFIX}{path.name}-{uuid.uuid4().hex[:8]}"
        os.rename(path, doomed)
        fsync_dir(self.root)
        shutil.rmtree(doomed)

    def retain_latest(self, count: int) -> list[SnapshotId]:
        return retain_latest(self, count)

    # ------------------------------------------------------------- transfer

    def archive_size(self, snapshot_id: SnapshotId) -> int:
        return self._archive(snapshot_id).stat().st_size

    def read_chunk(self, snapshot_id: SnapshotId, position: int, max_bytes: int) -> SnapshotChunk:
        archive = self._archive(snapshot_id)
        size = archive.stat().st_size
        if not 0 <= position <= size or max_bytes <= 0:
            raise ValueError(f"bad chunk request: position {position}, max_bytes {max_bytes}")
        with archive.open("rb") as f:
            f.seek(position)
            data = f.read(min(max_bytes, size - position))
        return SnapshotChunk(snapshot_id, position, data, size)

    def begin_install(self, snapshot_id: SnapshotId, total_size: int) -> SnapshotReceiver:
        name = snapshot_name(snapshot_id)
        temp = self.root / f"{TEMP_PREFIX}recv-{name}-{uuid.uuid4().hex[:8]}"
        sink: BinaryIO = temp.open("w+b")

        def install(
            header: ArchiveHeader, checksum: int, records: Iterator[Record], load: Loader | None
        ) -> SnapshotManifest:
            if load is None:
                return write_snapshot(
                    self.root, header.snapshot_id, records, expected_checksum=checksum
                )
            writer = SnapshotWriter(self.root, header.snapshot_id)
            try:
                written = _written(writer, records)
                load(written)
                for _ in written:  # whatever `load` left: all of it is checked and stored
                    pass
                return writer.publish(expected_checksum=checksum)
            except BaseException:
                writer.abort()
                raise

        def cleanup() -> None:
            sink.close()
            temp.unlink(missing_ok=True)

        return SnapshotReceiver(snapshot_id, total_size, sink, str(temp), install, cleanup)

    # ------------------------------------------------------------ internals

    def _existing(self, snapshot_id: SnapshotId) -> Path:
        path = self.path(snapshot_id)
        if not path.is_dir():
            raise SnapshotNotFoundError(f"no snapshot {snapshot_id} in {self.root}")
        return path

    def _archive_path(self, snapshot_id: SnapshotId) -> Path:
        return self.root / ARCHIVE_DIR / (snapshot_name(snapshot_id) + ".archive")

    def _archive(self, snapshot_id: SnapshotId) -> Path:
        """The transfer archive, built on first use from a verified read."""
        path = self._archive_path(snapshot_id)
        if path.exists():
            return path
        manifest = self.manifest(snapshot_id)
        header = ArchiveHeader(snapshot_id, manifest.record_count, manifest.data_bytes)
        temp = path.with_name(f"{TEMP_PREFIX}{path.name}-{uuid.uuid4().hex[:8]}")
        try:
            with temp.open("wb") as out:
                # read() raises after the last record if the snapshot is damaged,
                # so a corrupt snapshot is never published as an archive.
                write_archive(out, header, self.read(snapshot_id))
                out.flush()
                os.fsync(out.fileno())
            os.rename(temp, path)
        except BaseException:
            temp.unlink(missing_ok=True)
            raise
        return path

    def _remove_leftovers(self) -> None:
        for directory in (self.root, self.root / ARCHIVE_DIR):
            for name in os.listdir(directory):
                if name.startswith((TEMP_PREFIX, DELETED_PREFIX)):
                    path = directory / name
                    if path.is_dir():
                        shutil.rmtree(path)
                    else:
                        path.unlink()


def _written(writer: SnapshotWriter, records: Iterable[Record]) -> Iterator[Record]:
    """`records`, each chunk stored by `writer` before it is handed on."""
    for chunk in chunks(records, WRITE_BATCH_RECORDS):
        writer.put(chunk)
        yield from chunk
