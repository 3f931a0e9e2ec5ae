"""Proposals waiting for their commit: resolved when the high watermark passes
their last offset with their own epoch still there, failed when the log that
held them is truncated or rewritten by another leader."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

from quorum.raft.client_api import ProposalFailed
from quorum.raft.config import ProposeResult


@dataclass
class _Waiter:
    epoch: int
    last_offset: int
    future: asyncio.Future[ProposeResult]
    result: ProposeResult
    proposed_at: float


class CommitWaiters:
    def __init__(self) -> None:
        self._waiters: list[_Waiter] = []

    def add(self, result: ProposeResult, future: asyncio.Future[ProposeResult]) -> None:
        self._waiters.append(
            _Waiter(result.epoch, result.last_offset, future, result, time.monotonic())
        )

    def complete(
        self,
        high_watermark: int,
        epoch_at: Callable[[int], int | None],
        observe: Callable[[float], None],
    ) -> None:
        """Resolve every proposal below `high_watermark` whose entries are still
        its own (`epoch_at` its last offset); `observe` gets each commit latency."""
        still: list[_Waiter] = []
        now = time.monotonic()
        for waiter in self._waiters:
            if waiter.last_offset >= high_watermark:
                still.append(waiter)
            elif waiter.future.done():
                continue
            elif epoch_at(waiter.last_offset) == waiter.epoch:
                waiter.future.set_result(waiter.result)
                observe(now - waiter.proposed_at)
            else:
                waiter.future.set_exception(ProposalFailed("replaced by another leader's entries"))
        self._waiters = still

    def fail_from(self, offset: int) -> None:
        """The log was truncated at `offset`: proposals at or past it are gone."""
        still = []
        for waiter in self._waiters:
            if waiter.result.first_offset >= offset or waiter.last_offset >= offset:
                if not waiter.future.done():
                    waiter.future.set_exception(ProposalFailed("truncated"))
            else:
                still.append(waiter)
        self._waiters = still

    def fail_all(self, error: Exception) -> None:
        for waiter in self._waiters:
            if not waiter.future.done():
                waiter.future.set_exception(error)
