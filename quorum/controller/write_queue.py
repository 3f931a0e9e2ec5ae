"""The active controller's write path: validate, turn into records, commit, reply.

Writes are queued and handled one at a time. Each is validated against the
committed image, turned into records, and proposed as one Raft proposal, which
the core never splits across batches, so it commits or vanishes whole. The next
write is validated only after the previous one has committed and been applied,
so validation never races the image. Reads come from the committed image.

Only a leader whose own epoch has committed (so every earlier entry is committed
and applied) accepts writes; others answer NOT_CONTROLLER.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Generator
from typing import TypeVar

from quorum.controller.metadata_image import MetadataImage
from quorum.controller.record_codec import encode
from quorum.gen import metadata_pb2 as md

T = TypeVar("T")

PREPARE_CHUNK = 1000
ENCODE_CHUNK = 2000  # records encoded between two pauses (a few ms)

Built = tuple[list[md.MetadataRecord], T]
# A build returns its records and result, or is a generator that pauses (yields)
# between slices of its work and returns them (`topic_ops.create_topics_in_slices`).
Build = Callable[[], Built[T] | Generator[None, None, Built[T]]]


class NotController(Exception):
    def __init__(self, leader_id: int | None) -> None:
        super().__init__(f"not the active controller (leader: {leader_id})")
        self.leader_id = leader_id


class WriteQueue:
    """Serialises writes and proposes each as one atomic batch."""

    def __init__(
        self,
        image: MetadataImage,
        node_id: int,
        propose: Callable[[list[bytes]], Awaitable[object]],
        ready: Callable[[], bool],
        leader_id: Callable[[], int | None],
        epoch: Callable[[], int] = lambda: 0,
    ) -> None:
        self.image = image
        self._epoch = epoch
        self.node_id = node_id
        self._propose = propose
        self._ready = ready
        self._leader_id = leader_id
        self._lock = asyncio.Lock()
        self._changed = asyncio.Event()
        self.on_timing: list[Callable[[float, float], None]] = []

    @property
    def active(self) -> bool:
        return self._ready()

    async def submit(self, build: Build[T], wait_ready_s: float = 2.0) -> T:
        result, _ = await self.submit_at(build, wait_ready_s)
        return result

    async def submit_at(self, build: Build[T], wait_ready_s: float = 2.0) -> tuple[T, int]:
        """The write's result and the metadata offset that shows it: the offset
        after its last record, or the applied offset it was validated against when
        it wrote nothing (a broker that has applied up to there sees the outcome:
        read-your-writes for the brokers that forward Kafka's admin requests)."""
        enqueued = time.monotonic()
        async with self._lock:
            started = time.monotonic()
            await self.wait_active(wait_ready_s)
            offset = self.image.applied_offset
            epoch = self._epoch()
            records, result = await self._build(build, epoch)
            if records:
                offset = await self._propose_and_prepare(records, epoch)
            for observe in self.on_timing:
                observe(started - enqueued, time.monotonic() - started)
            return result, offset

    async def _pause(self, epoch: int) -> None:
        """Let the loop serve others between slices of one write's build or encode.
        The image cannot change meanwhile unless the leadership did (every write
        goes through this queue, one at a time), so a write that sees the same
        epoch with this node still leading proposes exactly what an unpaused
        build would have; otherwise it is dropped whole, before any proposal."""
        await asyncio.sleep(0)
        leader = self._leader_id()
        if leader != self.node_id or self._epoch() != epoch:
            raise NotController(leader if leader != self.node_id else None)

    async def _build(self, build: Build[T], epoch: int) -> Built[T]:
        built = build()
        if not isinstance(built, Generator):
            return built
        try:
            while True:
                try:
                    next(built)
                except StopIteration as done:
                    return done.value  # type: ignore[no-any-return]
                await self._pause(epoch)
        finally:
            built.close()

    async def _propose_and_prepare(self, records: list[md.MetadataRecord], epoch: int) -> int:
        """Encode in chunks (pausing between them), propose as one batch, then
        prepare the image for applying these records while they replicate
        (`MetadataImage.prepare`), in chunks so the loop keeps serving; the apply
        at commit then takes the prepared entries.

        The write's own task awaits the commit and the prepare runs beside it:
        the commit then resumes the write in the loop turn that applies it, ahead
        of the brokers' parked fetches it also wakes, so the reply leaves before
        their answers (a task in between cost it a turn, behind them: a forwarding
        broker then read its reply only after applying the same records)."""
        data: list[bytes] = []
        for start in range(0, len(records), ENCODE_CHUNK):
            if start:
                await self._pause(epoch)
            data.extend(encode(r) for r in records[start : start + ENCODE_CHUNK])
        preparing = asyncio.ensure_future(self._prepare(records, data))
        try:
            committed = await self._propose(data)  # appended now, before the prepare runs
        finally:
            preparing.cancel()  # no chunk runs after this: its task resumes only to stop
            self.image.forget_prepared()
        last = getattr(committed, "last_offset", None)
        return self.image.applied_offset if last is None else int(last) + 1

    async def _prepare(self, records: list[md.MetadataRecord], data: list[bytes]) -> None:
        for start in range(0, len(records), PREPARE_CHUNK):
            end = start + PREPARE_CHUNK
            self.image.prepare(records[start:end], data[start:end])
            await asyncio.sleep(0)

    def notify(self) -> None:
        """A commit or a leadership change: whoever waits in `wait_active` looks again."""
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_active(self, wait_s: float = 2.0) -> None:
        """A leader that has just won needs a moment to commit its own epoch; it
        is woken by `notify`, never by polling."""
        deadline = time.monotonic() + wait_s
        while not self._ready():
            leader = self._leader_id()
            remaining = deadline - time.monotonic()
            if leader != self.node_id or remaining <= 0:
                raise NotController(leader if leader != self.node_id else None)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), remaining)
