"""A fetched answer with several batches: every record lands in the cache in
order, and each record's commit-to-apply lag is taken from its own batch's
commit time (the agent reads the answer's batches in one pass).

In process: the real agent and cache, a scripted controller.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from broker_agent.metadata_cache import Applied
from quorum.common.clocks import wall_clock_ms
from quorum.controller.image_records import config_record
from quorum.controller.record_codec import encode
from quorum.gen import admin_pb2 as api
from quorum.gen import broker_pb2 as bpb
from tests.broker_agent.scripted_agent import OneAnswerController, scripted_agent

ME = 10


def change(value: int) -> bytes:
    return encode(config_record(api.TOPIC, "orders", "retention.ms", str(value)))


def two_batches(commit_ms: int) -> list[bpb.MetadataBatch]:
    """Two batches (3 records, then 1), committed 5 s apart."""
    return [
        bpb.MetadataBatch(base_offset=0, epoch=1, append_time_ms=7,
                          commit_time_ms=commit_ms - 5000,
                          records=[change(1), change(2), change(3)]),
        bpb.MetadataBatch(base_offset=3, epoch=2, append_time_ms=8,
                          commit_time_ms=commit_ms, records=[change(4)]),
    ]  # fmt: skip


def test_each_record_is_applied_in_order_with_its_own_batchs_commit_time(
    tmp_path: Path,
) -> None:
    controller = OneAnswerController(two_batches(wall_clock_ms()))
    agent, cache = scripted_agent(tmp_path, ME, controller)
    controller.agent = agent
    seen: list[list[Applied]] = []
    append = cache.append

    def recording(batches: Any) -> list[Applied]:
        applied = append(batches)
        seen.append(applied)
        return applied

    cache.append = recording  # type: ignore[method-assign]
    try:
        assert asyncio.run(asyncio.wait_for(agent.run(), 10)) == 0
        assert cache.next_offset == 4
        assert cache.last_epoch == 2
        assert cache.image.configs[(api.TOPIC, "orders")]["retention.ms"] == "4"
    finally:
        cache.close()
    assert seen == [[
        Applied(0, 1, "config", 7, 0), Applied(1, 1, "config", 7, 0),
        Applied(2, 1, "config", 7, 0), Applied(3, 2, "config", 8, 3),
    ]]  # fmt: skip
    assert agent.stats.records_applied == 4
    lags = list(agent.stats.apply_lag_ms)
    assert len(lags) == 4
    assert lags[0] == lags[1] == lags[2]
    assert abs(lags[0] - lags[3] - 5000) < 1000  # the first batch was committed 5 s earlier


class SharedCommitController:
    """Several agents on one loop: every first fetch parks on one shared commit, as a
    process's agents wait for the same commit; records the order of the agents'
    applies and next requests."""

    def __init__(self) -> None:
        self.commit: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.parked = 0
        self.events: list[tuple[str, int]] = []
        self.agents: list[Any] = []

    async def broker(self, method: str, request: Any, deadline_s: float) -> Any:
        return bpb.RegisterBrokerResponse(broker_epoch=0)

    async def metadata_fetch(self, request: Any, deadline_s: float) -> Any:
        if request.want_shutdown:
            return bpb.MetadataFetchResponse(should_shut_down=True, is_fenced=True)
        if request.fetch_offset > 0:
            self.events.append(("request", request.broker_id))
            if sum(1 for kind, _ in self.events if kind == "request") == len(self.agents):
                for agent in self.agents:  # the others abandon their parked fetches
                    agent.request_stop()
                return bpb.MetadataFetchResponse(high_watermark=1)
            await asyncio.sleep(3600)
        self.parked += 1
        await self.commit
        return bpb.MetadataFetchResponse(
            batches=[bpb.MetadataBatch(base_offset=0, epoch=1, records=[change(1)])],
            high_watermark=1,
        )

    async def close(self) -> None:
        pass


def test_a_process_agents_send_their_next_requests_after_all_of_them_applied(
    tmp_path: Path,
) -> None:
    """The answers of one commit wake a process's agents together; each sends its
    next request only after every one of them applied (one burst of sends)."""

    async def go() -> list[tuple[str, int]]:
        controller = SharedCommitController()
        caches = []
        for broker_id in (ME, ME + 1, ME + 2):
            agent, cache = scripted_agent(tmp_path / str(broker_id), broker_id, controller)
            caches.append(cache)
            append = cache.append

            def recording(batches: Any, append: Any = append, broker_id: int = broker_id) -> Any:
                controller.events.append(("apply", broker_id))
                return append(batches)

            cache.append = recording  # type: ignore[method-assign]
            controller.agents.append(agent)
        try:
            runs = [asyncio.ensure_future(a.run()) for a in controller.agents]
            while controller.parked < len(runs):
                await asyncio.sleep(0.01)
            controller.commit.set_result(None)
            assert await asyncio.wait_for(asyncio.gather(*runs), 10) == [0, 0, 0]
        finally:
            for cache in caches:
                cache.close()
        return controller.events

    events = asyncio.run(go())
    assert [kind for kind, _ in events] == ["apply"] * 3 + ["request"] * 3, events
