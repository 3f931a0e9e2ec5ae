"""Producer ids for InitProducerId, from blocks the active controller allocates.

As a Kafka broker's ProducerIdManager does: the broker asks the controller
(`AllocateProducerIds`, committed in the metadata log so no id is handed out
twice across brokers or restarts) for a block, hands ids out of it one by one,
and asks for the next block when it is used up. Concurrent callers share one
outstanding allocation.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable


class ProducerIdSource:
    def __init__(self, allocate: Callable[[], Awaitable[tuple[int, int]]]) -> None:
        """`allocate` returns a new block as (first id, length)."""
        self._allocate = allocate
        self._next = 0
        self._end = 0
        self._lock = asyncio.Lock()

    async def next_id(self) -> int:
        async with self._lock:
            if self._next >= self._end:
                start, length = await self._allocate()
                if length <= 0:
                    raise RuntimeError(f"the controller allocated an empty block at {start}")
                self._next, self._end = start, start + length
            producer_id = self._next
            self._next += 1
            return producer_id
