"""ISR changes sent to the controller in batches, one AlterPartition at a time.

Kafka's AlterPartitionManager does the same: every change queued while a request
is in flight leaves with the next one, so a follower that restarts with 1,000
replicas is taken back into their ISRs within a few requests, where one request
per partition cost the controller one commit each.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from broker_agent.partitions.api import REFUSED, IsrChanger, IsrChangeRequest, IsrChangeResult
from broker_agent.partitions.partition import Partition

log = logging.getLogger("broker_agent.partitions.replica_manager")

# Partitions per AlterPartition: well below the controllers' default
# `controller.max.partitions.per.request` (10,000); more wait for the next one.
ISR_CHANGES_PER_REQUEST = 1_000

Settle = Callable[[Partition, IsrChangeResult], None]


class IsrChangeSender:
    """The queue of ISR changes and the task sending it; each answer is handed to
    `settle` unless newer metadata settled that partition's change meanwhile."""

    def __init__(
        self,
        broker_id: int,
        changer: IsrChanger,
        settle: Settle,
        tasks: set[asyncio.Task[None]],
        closed: Callable[[], bool],
    ) -> None:
        self.broker_id = broker_id
        self._changer = changer
        self._settle = settle
        self._tasks = tasks  # the owner's, cancelled when it closes
        self._closed = closed
        self._queue: list[tuple[Partition, IsrChangeRequest]] = []
        self._sender: asyncio.Task[None] | None = None

    def send(self, part: Partition, request: IsrChangeRequest) -> None:
        part.isr_change_in_flight = request
        self._queue.append((part, request))
        if self._sender is None or self._sender.done():
            task = asyncio.get_running_loop().create_task(self._send_queued())
            self._sender = task
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _send_queued(self) -> None:
        while self._queue and not self._closed():
            await asyncio.sleep(0)  # the rest of this fetch answer's / tick's changes
            batch = self._queue[:ISR_CHANGES_PER_REQUEST]
            del self._queue[: len(batch)]
            try:
                results = await self._changer.alter_partitions(
                    self.broker_id, [request for _, request in batch]
                )
            except Exception as exc:
                log.info("broker %d: AlterPartition failed: %s", self.broker_id, exc)
                results = [REFUSED] * len(batch)
            log.info(
                "broker %d: AlterPartition of %d partitions: %d accepted",
                self.broker_id, len(batch), sum(r.accepted for r in results),
            )  # fmt: skip
            for (part, request), result in zip(batch, results, strict=True):
                if part.isr_change_in_flight is not request:
                    continue  # newer metadata settled it meanwhile
                part.isr_change_in_flight = None
                self._settle(part, result)
