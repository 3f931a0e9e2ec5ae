"""Read a node's metadata directory without a running node, changing nothing.

The offline tools must work beside a live process (which holds the directory
lock and may be appending), so they never open `FileLogStore`: segments are
read by the one segment reader recovery uses (`quorum/log/segment_reader.py`),
up to their last whole batch, and never repaired. A torn tail is reported, not cut;
corruption anywhere else is an error naming the file and position.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import click

from quorum.controller.metadata_image import MetadataImage
from quorum.controller.record_codec import decode
from quorum.log.errors import StorageCorruptionError, StorageError
from quorum.log.segment_reader import read_log
from quorum.raft.records import Batch, SnapshotId
from snapshots.errors import SnapshotCorruptionError
from snapshots.manifest import SnapshotManifest
from snapshots.naming import parse_snapshot_name, snapshot_name
from snapshots.reader import read_manifest, read_snapshot
from snapshots.records import Record

PARTITION_DIR = "__cluster_metadata-0"
SNAPSHOT_DIR = "snapshots"


class OfflineError(click.ClickException):
    """The directory cannot be read as asked: message on stderr, exit code 1."""

    exit_code = 1


@dataclass(frozen=True)
class SegmentBatches:
    path: Path
    batches: list[tuple[int, Batch]]  # (file position, batch)
    torn_reason: str | None


def partition_dir(directory: Path) -> Path:
    """`--dir` may name a node's metadata.log.dir or its `__cluster_metadata-0`."""
    for candidate in (directory / PARTITION_DIR, directory):
        if candidate.is_dir() and (
            any(candidate.glob("*.log")) or (candidate / SNAPSHOT_DIR).is_dir()
        ):
            return candidate
    raise OfflineError(
        f"{directory} is not a metadata log directory (no {PARTITION_DIR}/ with segments "
        "or snapshots)"
    )


def segments(directory: Path) -> Iterator[SegmentBatches]:
    """Every segment in offset order, each checked before any of it is returned."""
    try:
        for reader in read_log(directory):
            batches = [(b.position, b.decode()) for b in reader]
            yield SegmentBatches(reader.path, batches, reader.torn_reason)
    except StorageCorruptionError as err:
        raise OfflineError(f"corrupt metadata log: {err}") from err


class ReadOnlySnapshots:
    """The snapshots of a directory, read without `FileSnapshotStore`, whose opening
    tidies up (and would delete a live node's snapshot in progress)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def snapshot_ids(self) -> list[SnapshotId]:
        ids = (parse_snapshot_name(name) for name in os.listdir(self.root))
        return sorted((i for i in ids if i is not None), key=lambda i: (i.end_offset, i.epoch))

    def manifest(self, snapshot_id: SnapshotId) -> SnapshotManifest:
        manifest = read_manifest(self.root / snapshot_name(snapshot_id))
        if manifest.snapshot_id != snapshot_id:
            raise SnapshotCorruptionError(
                self.root / snapshot_name(snapshot_id),
                f"manifest names snapshot {manifest.snapshot_id}",
            )
        return manifest

    def read(self, snapshot_id: SnapshotId) -> Iterator[Record]:
        """Records in key order; the checksum is verified after the last one."""
        self.manifest(snapshot_id)
        return read_snapshot(self.root / snapshot_name(snapshot_id))


def snapshot_store(directory: Path) -> ReadOnlySnapshots | None:
    path = directory / SNAPSHOT_DIR
    return ReadOnlySnapshots(path) if path.is_dir() else None


def image_at(directory: Path, at_offset: int | None) -> MetadataImage:
    """The image as of `at_offset` (exclusive; None: everything on disk): the newest
    snapshot at or below it, then the log from there."""
    image = MetadataImage()
    store = snapshot_store(directory)
    base: SnapshotId | None = None
    if store is not None:
        usable = [s for s in store.snapshot_ids() if at_offset is None or s.end_offset <= at_offset]
        base = usable[-1] if usable else None
    try:
        if base is not None and store is not None:
            image.load_snapshot(store.read(base), base.end_offset)
    except (SnapshotCorruptionError, StorageError) as err:
        raise OfflineError(f"corrupt snapshot: {err}") from err
    start = base.end_offset if base is not None else 0
    log = list(segments(directory))
    first = log[0].batches[0][1].base_offset if log and log[0].batches else start
    if first > start:
        where = f"offset {at_offset}" if at_offset is not None else "the log start"
        raise OfflineError(
            f"the log on disk starts at offset {first} and no snapshot at or below {where} "
            f"covers the records before it"
        )
    for segment in log:
        for _, batch in segment.batches:
            for i, data in enumerate(batch.records, start=batch.base_offset):
                if i < start or (at_offset is not None and i >= at_offset):
                    continue
                if not batch.control:
                    image.apply_record(decode(data, i), i)
            end = batch.next_offset if at_offset is None else min(batch.next_offset, at_offset)
            image.advance_to(end)
    return image
