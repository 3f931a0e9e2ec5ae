"""A snapshot load that fails mid-way is retried, not fatal to the broker.

Found by the metadata-scale bench at 1,000,000 partitions: one
FetchMetadataSnapshot chunk missed its deadline, `NoControllerError` escaped
`BrokerAgent.run`, and the broker-agent process exited. A failed chunk (or a
snapshot the controller has since replaced) is now handled as any failed fetch:
pause, fetch again, be told which snapshot to load.

In process: the real agent and cache; a scripted controller.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import grpc

from broker_agent.agent import BrokerAgent
from quorum.admin_client import AdminError, NoControllerError
from quorum.controller.api_errors import ApiError
from quorum.gen import broker_pb2 as bpb
from quorum.rpc.wire_errors import WireError
from tests.broker_agent.scripted_agent import scripted_agent

ME = 10


class SnapshotFailingController:
    """Every fetch names a snapshot to load; its chunks fail with `failure`. After
    `fetches_before_stop` fetches the agent is asked to stop."""

    def __init__(self, agent_box: list[BrokerAgent], failure: Exception) -> None:
        self.agent_box = agent_box
        self.failure = failure
        self.fetches = 0
        self.chunk_requests = 0

    async def broker(self, method: str, request: Any, deadline_s: float) -> Any:
        if method == "RegisterBroker":
            return bpb.RegisterBrokerResponse(broker_epoch=7)
        assert method == "FetchMetadataSnapshot", method
        self.chunk_requests += 1
        raise self.failure

    async def metadata_fetch(self, request: Any, deadline_s: float) -> Any:
        self.fetches += 1
        if request.want_shutdown:
            return bpb.MetadataFetchResponse(should_shut_down=True, is_fenced=True)
        if self.fetches >= 3:
            self.agent_box[0].request_stop()
        return bpb.MetadataFetchResponse(
            high_watermark=100,
            is_fenced=True,
            load_snapshot=bpb.SnapshotRef(end_offset=90, epoch=1),
        )

    async def close(self) -> None:
        pass


def run_agent(tmp_path: Path, failure: Exception) -> tuple[int, BrokerAgent, int]:
    box: list[BrokerAgent] = []
    controller = SnapshotFailingController(box, failure)

    async def go() -> tuple[int, BrokerAgent]:
        agent, _ = scripted_agent(tmp_path, ME, controller)
        box.append(agent)
        return await agent.run(), agent

    try:
        code, agent = asyncio.run(go())
    finally:
        for made in box:
            made.cache.close()
    return code, agent, controller.chunk_requests


def test_a_snapshot_chunk_past_its_deadline_is_retried_and_the_agent_stays_up(
    tmp_path: Path,
) -> None:
    code, agent, chunks = run_agent(tmp_path, NoControllerError("deadline exceeded"))
    assert code == 0  # a controlled stop, not an escaped exception
    assert chunks >= 2  # asked again after the first failure
    assert agent.stats.load_errors == chunks
    assert agent.stats.fetch_errors >= chunks
    assert agent.cache.next_offset == 0  # nothing half-installed


def test_a_snapshot_gone_from_the_controller_is_asked_for_again(tmp_path: Path) -> None:
    gone = WireError(ApiError.SNAPSHOT_NOT_FOUND, grpc.StatusCode.NOT_FOUND, "no snapshot")
    code, agent, chunks = run_agent(tmp_path, AdminError(gone))
    assert code == 0
    assert chunks >= 2
    assert agent.stats.load_errors == chunks
