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
from tests.broker_agent.scripted_agent import scripted_agent

ME = 10


def change(value: int) -> bytes:
    return encode(config_record(api.TOPIC, "orders", "retention.ms", str(value)))


class TwoBatchController:
    """One answer with two batches (3 records, then 1), committed 5 s apart; then stop."""

    def __init__(self) -> None:
        self.agent: Any = None
        self.commit_ms = wall_clock_ms()

    async def broker(self, method: str, request: Any, deadline_s: float) -> Any:
        return bpb.RegisterBrokerResponse(broker_epoch=0)

    async def metadata_fetch(self, request: Any, deadline_s: float) -> Any:
        await asyncio.sleep(0)
        if request.want_shutdown:
            return bpb.MetadataFetchResponse(should_shut_down=True, is_fenced=True)
        if request.fetch_offset > 0:
            self.agent.request_stop()
            return bpb.MetadataFetchResponse(high_watermark=4)
        return bpb.MetadataFetchResponse(
            batches=[
                bpb.MetadataBatch(base_offset=0, epoch=1, append_time_ms=7,
                                  commit_time_ms=self.commit_ms - 5000,
                                  records=[change(1), change(2), change(3)]),
                bpb.MetadataBatch(base_offset=3, epoch=2, append_time_ms=8,
                                  commit_time_ms=self.commit_ms, records=[change(4)]),
            ],
            high_watermark=4,
        )  # fmt: skip

    async def close(self) -> None:
        pass


def test_each_record_is_applied_in_order_with_its_own_batchs_commit_time(
    tmp_path: Path,
) -> None:
    controller = TwoBatchController()
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
