"""When the controller snapshots its image (Kafka's `SnapshotGenerator`, KIP-630).

Committed record bytes are counted as they are applied; once
`metadata.snapshot.max.new.record.bytes` of them have come in, or
`metadata.snapshot.max.interval.ms` has passed with at least one new record,
the image is captured at a batch boundary (on the loop, so later applies cannot
leak in) and handed to Raft, which writes it off the loop, drops snapshots
beyond retention and lets the log be truncated before it. One at a time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

from quorum.common.clocks import monotonic_ms
from quorum.controller.metadata_image import MetadataImage
from quorum.raft.client_api import RaftClient, SnapshotId
from snapshots.policy import SnapshotPolicy, SnapshotTrigger

CHECK_S = 1.0


class SnapshotGenerator:
    def __init__(
        self,
        raft: RaftClient,
        image: MetadataImage,
        policy: SnapshotPolicy,
        clock_ms: Callable[[], int] = monotonic_ms,
    ) -> None:
        self.raft = raft
        self.image = image
        self.clock_ms = clock_ms
        self.trigger = SnapshotTrigger(policy, clock_ms())
        latest = raft.latest_snapshot()
        self.latest_end = latest.end_offset if latest is not None else -1
        self.running = False
        self._tasks: set[asyncio.Task[None]] = set()

    def on_committed(self, records: Sequence[bytes]) -> None:
        self.trigger.on_committed(records)

    def on_loaded(self, snapshot_id: SnapshotId) -> None:
        self.latest_end = max(self.latest_end, snapshot_id.end_offset)

    def maybe_start(self) -> None:
        """Start a snapshot of the image as it is now, if one is due and possible."""
        end = self.image.applied_offset
        if self.running or end <= max(self.latest_end, 0):
            return
        if not self.trigger.due(self.clock_ms()):
            return
        covered = self.trigger.new_record_bytes
        written = self.raft.create_snapshot(end, self.image.snapshot_records)
        if written is None:
            return
        self.running = True
        task = asyncio.ensure_future(self._finish(written, end, covered))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _finish(self, written: Awaitable[bool], end: int, covered: int) -> None:
        try:
            if await written:
                # Records committed while it was written still count toward the next.
                self.trigger.on_snapshot_taken(self.clock_ms(), covered)
                self.latest_end = max(self.latest_end, end)
                self.image.forget_changes_before(self.latest_end)
        finally:
            self.running = False

    async def run_forever(self) -> None:
        """`metadata.snapshot.max.interval.ms` must fire on a quiet log too, when no
        commit arrives to ask whether a snapshot is due."""
        while True:
            await asyncio.sleep(CHECK_S)
            self.maybe_start()
