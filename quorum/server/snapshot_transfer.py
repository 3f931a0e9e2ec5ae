"""Fetching the leader's snapshot (KIP-630 FetchSnapshot), chunk by chunk, into
the local store, where it is published only once complete and verified."""

from __future__ import annotations

import asyncio
from typing import Protocol

from quorum.raft.records import SnapshotId
from snapshots.api import SnapshotChunk, SnapshotStore

SNAPSHOT_CHUNK_BYTES = 1 << 20


class ChunkSource(Protocol):
    async def fetch_snapshot_chunk(
        self, leader: int, epoch: int, snapshot_id: SnapshotId, position: int, max_bytes: int
    ) -> SnapshotChunk: ...


async def download_snapshot(
    source: ChunkSource, store: SnapshotStore, leader: int, epoch: int, snapshot_id: SnapshotId
) -> None:
    """Raises whatever stopped it, after discarding what was written."""
    loop = asyncio.get_running_loop()
    installer = None
    try:
        position = 0
        while True:
            chunk = await source.fetch_snapshot_chunk(
                leader, epoch, snapshot_id, position, SNAPSHOT_CHUNK_BYTES
            )
            if installer is None:
                installer = store.begin_install(snapshot_id, chunk.total_size)
            installer.write_chunk(chunk.position, chunk.data)
            position = chunk.position + len(chunk.data)
            if chunk.last:
                break
        await loop.run_in_executor(None, installer.complete)
    except Exception:
        if installer is not None:
            installer.abort()
        raise
