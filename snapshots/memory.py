"""In-memory snapshot store for the simulator and unit tests.

Same contract as the file store, including the transfer archive format, so a
simulated follower exercises the same validation as a real one.
"""

from __future__ import annotations

import io
import time
from collections.abc import Iterable, Iterator

from quorum.raft.records import SnapshotId
from snapshots.api import SnapshotChunk
from snapshots.archive import ArchiveHeader, write_archive
from snapshots.errors import SnapshotExistsError, SnapshotNotFoundError
from snapshots.manifest import SnapshotManifest
from snapshots.naming import snapshot_name
from snapshots.records import Record, RecordChecksum, sorted_records
from snapshots.retention import retain_latest
from snapshots.transfer import Loader, SnapshotReceiver


class MemorySnapshotStore:
    def __init__(self) -> None:
        self._snapshots: dict[SnapshotId, tuple[SnapshotManifest, tuple[Record, ...]]] = {}
        self._archives: dict[SnapshotId, bytes] = {}

    def snapshot_ids(self) -> list[SnapshotId]:
        return sorted(self._snapshots, key=lambda i: (i.end_offset, i.epoch))

    def latest(self) -> SnapshotId | None:
        ids = self.snapshot_ids()
        return ids[-1] if ids else None

    def manifest(self, snapshot_id: SnapshotId) -> SnapshotManifest:
        return self._get(snapshot_id)[0]

    def write(self, snapshot_id: SnapshotId, records: Iterable[Record]) -> SnapshotManifest:
        if snapshot_id in self._snapshots:
            raise SnapshotExistsError(f"snapshot {snapshot_id} already exists")
        ordered = tuple(sorted_records(records))
        checksum = RecordChecksum()
        checksum.update(ordered)
        manifest = SnapshotManifest(
            snapshot_id,
            checksum.count,
            checksum.data_bytes,
            checksum.value,
            time.time_ns() // 1_000_000,
        )
        self._snapshots[snapshot_id] = (manifest, ordered)
        return manifest

    def read(self, snapshot_id: SnapshotId) -> Iterator[Record]:
        return iter(self._get(snapshot_id)[1])

    def delete(self, snapshot_id: SnapshotId) -> None:
        self._get(snapshot_id)
        del self._snapshots[snapshot_id]
        self._archives.pop(snapshot_id, None)

    def retain_latest(self, count: int) -> list[SnapshotId]:
        return retain_latest(self, count)

    def read_chunk(self, snapshot_id: SnapshotId, position: int, max_bytes: int) -> SnapshotChunk:
        archive = self._archives.get(snapshot_id)
        if archive is None:
            manifest, records = self._get(snapshot_id)
            out = io.BytesIO()
            header = ArchiveHeader(snapshot_id, manifest.record_count, manifest.data_bytes)
            write_archive(out, header, records)
            archive = self._archives[snapshot_id] = out.getvalue()
        if not 0 <= position <= len(archive) or max_bytes <= 0:
            raise ValueError(f"bad chunk request: position {position}, max_bytes {max_bytes}")
        data = archive[position : position + max_bytes]
        return SnapshotChunk(snapshot_id, position, data, len(archive))

    def begin_install(self, snapshot_id: SnapshotId, total_size: int) -> SnapshotReceiver:
        sink = io.BytesIO()

        def install(
            header: ArchiveHeader, checksum: int, records: Iterator[Record], load: Loader | None
        ) -> SnapshotManifest:
            received = list(records)  # validates the archive's checksum
            if load is not None:
                load(received)
            return self.write(header.snapshot_id, received)

        return SnapshotReceiver(
            snapshot_id,
            total_size,
            sink,
            f"memory:{snapshot_name(snapshot_id)}",
            install,
            sink.close,
        )

    def _get(self, snapshot_id: SnapshotId) -> tuple[SnapshotManifest, tuple[Record, ...]]:
        try:
            return self._snapshots[snapshot_id]
        except KeyError:
            raise SnapshotNotFoundError(f"no snapshot {snapshot_id}") from None
