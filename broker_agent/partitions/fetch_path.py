"""Serving a Fetch: one partition's answer, the long poll over the requested
partitions, and the response's size limit.

Consumers (replica_id -1) read below the HW; followers read to the LEO, and
their fetch offsets move the HW and the ISR (the replica manager's callback,
which owns the ISR changes). Apart from the manager so the read side of a
replica can be followed on its own: what a fetch gets and when it is answered.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace

from kio.schema.errors import ErrorCode

from broker_agent.partitions.api import (
    CONSUMER_REPLICA_ID,
    DivergingEpoch,
    FetchPartition,
    FetchPartitionResult,
)
from broker_agent.partitions.partition import Partition
from broker_agent.replication.follower import diverging_epoch

OnFollowerFetch = Callable[[Partition, int, int], None]


def read_partition(
    part: Partition, replica_id: int, request: FetchPartition, on_follower_fetch: OnFollowerFetch
) -> FetchPartitionResult:
    """One partition's answer from the replica that leads it (already looked up)."""

    def fail(code: ErrorCode) -> FetchPartitionResult:
        return FetchPartitionResult(request.topic, request.partition, code)

    plog = part.log
    follower = replica_id != CONSUMER_REPLICA_ID
    state = part.leader_state
    assert state is not None
    if follower and replica_id not in part.assignment.replicas:
        return fail(ErrorCode.not_leader_or_follower)
    base = FetchPartitionResult(
        request.topic, request.partition, ErrorCode.none,
        part.high_watermark, part.high_watermark, plog.log_start_offset,
    )  # fmt: skip
    if request.last_fetched_epoch >= 0:
        diverging = diverging_epoch(
            plog.epoch_entries, plog.log_end_offset,
            request.fetch_offset, request.last_fetched_epoch,
        )  # fmt: skip
        if diverging is not None:
            return replace(base, diverging_epoch=DivergingEpoch(*diverging))
    if not plog.log_start_offset <= request.fetch_offset <= plog.log_end_offset:
        return replace(base, error=ErrorCode.offset_out_of_range)
    if follower:
        on_follower_fetch(part, replica_id, request.fetch_offset)
        upper = plog.log_end_offset
    else:
        upper = part.high_watermark
    records = plog.read(request.fetch_offset, request.partition_max_bytes, upper)
    return replace(
        base,
        high_watermark=part.high_watermark,
        last_stable_offset=part.high_watermark,
        records=records,
    )


async def long_poll(
    changed: Callable[[], list[asyncio.Event]],
    read: Callable[[], list[FetchPartitionResult]],
    follower: bool,
    deadline: float,
    min_bytes: int,
    max_bytes: int,
    closed: Callable[[], bool],
) -> list[FetchPartitionResult]:
    """`read` until it has `min_bytes`, an error or a diverging epoch, a moved HW
    (a follower), the loop's `deadline` or `closed`; woken by `changed`'s events."""
    loop = asyncio.get_running_loop()
    first_hws: list[int] | None = None
    while True:
        waits = changed()
        results = read()
        size = sum(len(r.records) for r in results)
        hws = [r.high_watermark for r in results]
        # A follower also wants a moved HW at once (it is what acks=all waits for).
        hw_moved = (
            first_hws is not None
            and follower
            and any(h > f for h, f in zip(hws, first_hws, strict=True))
        )
        first_hws = hws if first_hws is None else first_hws
        done = (
            size >= min_bytes
            or hw_moved
            or any(r.error is not ErrorCode.none or r.diverging_epoch for r in results)
            or loop.time() >= deadline
            or closed()
        )
        if done:
            return trim_to_max_bytes(results, max_bytes)
        remaining = (deadline - loop.time()) * 1000
        if not waits:  # nothing asked for is hosted here: only the deadline ends it
            await asyncio.sleep(remaining / 1000)
            continue
        wakers = [asyncio.ensure_future(e.wait()) for e in waits]
        try:
            await asyncio.wait(
                wakers, timeout=remaining / 1000, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            for w in wakers:
                w.cancel()


def trim_to_max_bytes(
    results: list[FetchPartitionResult], max_bytes: int
) -> list[FetchPartitionResult]:
    """The response's `max_bytes`: the first non-empty partition always gets its
    data (so one large batch still makes progress), the rest while it fits."""
    total = 0
    out: list[FetchPartitionResult] = []
    for result in results:
        size = len(result.records)
        if size and total and total + size > max_bytes:
            result = replace(result, records=b"")
        total += len(result.records)
        out.append(result)
    return out


__all__ = ["long_poll", "read_partition", "trim_to_max_bytes"]
