"""The receiving side of a snapshot transfer (KIP-630's FetchSnapshot).

Chunks are appended to a temporary sink in order; `complete` parses the whole
archive, checks it against its own checksum and the expected snapshot id, and
only then hands the records to the store to install. A corrupted or
incomplete transfer leaves the store exactly as it was.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import BinaryIO

from quorum.raft.records import SnapshotId
from snapshots.archive import ArchiveHeader, read_archive
from snapshots.errors import SnapshotCorruptionError, SnapshotTransferError
from snapshots.manifest import SnapshotManifest
from snapshots.records import Record

# Builds a state from the records as they are installed: one pass, not a read back.
Loader = Callable[[Iterable[Record]], None]
Installer = Callable[[ArchiveHeader, int, Iterator[Record], Loader | None], SnapshotManifest]


class SnapshotReceiver:
    def __init__(
        self,
        snapshot_id: SnapshotId,
        total_size: int,
        sink: BinaryIO,
        name: str,
        install: Installer,
        cleanup: Callable[[], None],
    ) -> None:
        self.snapshot_id = snapshot_id
        self.total_size = total_size
        self.name = name
        self._sink = sink
        self._install = install
        self._cleanup = cleanup
        self._received = 0
        self._done = False

    @property
    def received(self) -> int:
        """The position the next chunk must start at."""
        return self._received

    def write_chunk(self, position: int, data: bytes) -> None:
        if self._done:
            raise SnapshotTransferError(f"transfer of {self.name} is already finished")
        if position != self._received:
            raise SnapshotTransferError(
                f"{self.name}: chunk at position {position}, expected {self._received}"
            )
        if position + len(data) > self.total_size:
            raise SnapshotTransferError(
                f"{self.name}: chunk ends at {position + len(data)}, "
                f"past the size {self.total_size}"
            )
        self._sink.write(data)
        self._received += len(data)

    def complete(self, load: Loader | None = None) -> SnapshotManifest:
        """Validate the whole archive, then install it; the receiver is finished
        either way. With `load`, the records are also handed to it as they are
        installed (it must build aside: an exception after the last record, a
        checksum that does not match, means nothing was installed)."""
        if self._done:
            raise SnapshotTransferError(f"transfer of {self.name} is already finished")
        try:
            if self._received != self.total_size:
                raise SnapshotTransferError(
                    f"{self.name}: received {self._received} of {self.total_size} bytes"
                )
            self._sink.flush()
            header, checksum, records = read_archive(self._sink, self.total_size, self.name)
            if header.snapshot_id != self.snapshot_id:
                raise SnapshotCorruptionError(
                    self.name,
                    f"archive holds snapshot {header.snapshot_id}, not {self.snapshot_id}",
                )
            return self._install(header, checksum, records, load)
        finally:
            self.abort()

    def abort(self) -> None:
        """Drop whatever was received."""
        if not self._done:
            self._done = True
            self._cleanup()
