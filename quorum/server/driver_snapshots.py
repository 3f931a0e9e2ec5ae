"""The Raft driver's snapshots: taking one of the committed state (written by a
worker thread, then the log before it may go), serving a stored one in chunks to
a peer or a broker, and downloading and installing the leader's.

A mixin of `RaftDriver` (quorum/server/driver.py), which owns the core, the
stores, the loop and the listeners these use.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING

from quorum.raft.node import RaftNode
from quorum.raft.records import SnapshotId
from quorum.server.commit_delivery import ListenerContext
from quorum.server.local_snapshots import LocalSnapshots
from quorum.server.poll_idle import PollIdleRatio
from quorum.server.snapshot_transfer import download_snapshot
from snapshots.api import SnapshotChunk
from snapshots.errors import SnapshotNotFoundError

if TYPE_CHECKING:
    from quorum.log.api import LogStore
    from quorum.raft.client_api import SnapshotRecord
    from quorum.raft.config import RaftConfig
    from quorum.server.driver import Transport

log = logging.getLogger("quorum.server.driver")


class DriverSnapshots:
    """Snapshot taking, serving and installing; `RaftDriver` supplies the state."""

    core: RaftNode
    config: RaftConfig
    snapshots: LocalSnapshots | None
    log_store: LogStore
    transport: Transport
    clock: Callable[[], int]
    poll_idle: PollIdleRatio
    _loop: asyncio.AbstractEventLoop | None
    _closed: bool
    _background: set[asyncio.Future[None]]
    _listeners: list[ListenerContext]

    @property
    def node_id(self) -> int:
        raise NotImplementedError

    def _process(self) -> None:
        raise NotImplementedError

    def _schedule_process(self) -> None:
        raise NotImplementedError

    def latest_snapshot(self) -> SnapshotId | None:
        return self.snapshots.store.latest() if self.snapshots is not None else None

    def create_snapshot(
        self, end_offset: int, capture: Callable[[], Iterable[SnapshotRecord]]
    ) -> Awaitable[bool] | None:
        loop, snapshots = self._loop, self.snapshots
        if snapshots is None or loop is None or self._closed or snapshots.running:
            return None
        epoch = self.core.log.epoch_at(end_offset - 1)
        if epoch is None:
            return None
        snapshot_id = SnapshotId(end_offset, epoch)
        with self.poll_idle:
            records = capture()
        snapshots.running = True  # until the worker has written it, or failed
        voters = self.core.voter_set_at(end_offset)  # None while the voters are static
        written = loop.run_in_executor(None, snapshots.write, snapshot_id, records, voters)
        task = asyncio.ensure_future(self._snapshot_written(snapshot_id, written))
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    async def read_snapshot_chunk(
        self, snapshot_id: SnapshotId, position: int, max_bytes: int
    ) -> SnapshotChunk:
        """A piece of a stored snapshot, read in a worker thread (a peer's or a
        broker's FetchSnapshot). Raises SnapshotNotFoundError, or ValueError for a
        position past its end."""
        if self.snapshots is None:
            raise SnapshotNotFoundError(f"node {self.node_id} keeps no snapshots")
        return await self.snapshots.read_chunk(snapshot_id, position, max_bytes)

    async def _snapshot_written(
        self, snapshot_id: SnapshotId, written: asyncio.Future[None]
    ) -> bool:
        assert self._loop is not None
        try:
            await written
        except Exception as err:  # a failed snapshot costs nothing but log length
            log.error("snapshot %s failed: %s", snapshot_id, err)
            return False
        if self._closed:
            return False
        snapshots = self.snapshots
        assert snapshots is not None
        snapshots.written(snapshot_id)
        log.info(
            "snapshot at offset %d epoch %d written", snapshot_id.end_offset, snapshot_id.epoch
        )
        if snapshot_id.end_offset <= self.core.log.end_offset:
            self.core.note_latest_snapshot(snapshot_id)
        start = snapshots.log_start(self.core.log, self.core.high_watermark)
        if start is not None:
            self.core.on_snapshot_taken(start)
            self._process()
        deleted = await self._loop.run_in_executor(
            None, snapshots.drop_beyond_retention, self.core.log.snapshot_id
        )
        if deleted:
            log.info("deleted snapshots beyond retention: %s", deleted)
        await self._loop.run_in_executor(None, self.log_store.enforce_retention)
        return True

    async def _fetch_snapshot(self, leader: int, snapshot_id: SnapshotId) -> None:
        """Download the leader's snapshot in chunks, install it, tell the core."""
        assert self._loop is not None
        snapshots = self.snapshots
        if snapshots is None:
            self.core.on_snapshot_failed(self.clock())
            self._schedule_process()
            return
        try:
            epoch = self.core.epoch
            await download_snapshot(self.transport, snapshots.store, leader, epoch, snapshot_id)
            await self._loop.run_in_executor(None, snapshots.install, snapshot_id, self._listeners)
        except Exception as err:
            log.warning("fetching snapshot %s from %d failed: %s", snapshot_id, leader, err)
            if not self._closed:
                self.core.on_snapshot_failed(self.clock())
                self._schedule_process()
            return
        if self._closed:
            return
        log.info("installed snapshot at offset %d from node %d", snapshot_id.end_offset, leader)
        voters = snapshots.voters(snapshot_id)  # None from a kraft.version 0 leader
        self.core.on_snapshot_installed(snapshot_id, self.clock(), voters)
        self._process()
