"""A stop request abandons the broker's parked fetch; the agent's own cancellation
is never swallowed.

The agent used to race each fetch against a waiter on the stop event (two tasks
and an `asyncio.wait` per fetch, once per broker per commit); now `request_stop`
cancels the parked fetch itself. In process: the real agent and cache; a
scripted controller whose caught-up fetches stay parked until told otherwise.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from broker_agent.agent import BrokerAgent
from broker_agent.metadata_cache import MetadataCache
from quorum.gen import broker_pb2 as bpb
from tests.broker_agent.scripted_agent import scripted_agent

ME = 10


class ParkingController:
    """Registers the broker; every fetch but a shutdown one parks until the end."""

    def __init__(self) -> None:
        self.parked = asyncio.Event()
        self.requests: list[bpb.MetadataFetchRequest] = []
        self.abandoned = 0

    async def broker(self, method: str, request: Any, deadline_s: float) -> Any:
        assert method == "RegisterBroker", method
        return bpb.RegisterBrokerResponse(broker_epoch=7)

    async def metadata_fetch(self, request: Any, deadline_s: float) -> Any:
        self.requests.append(request)
        if request.want_shutdown:
            return bpb.MetadataFetchResponse(should_shut_down=True, is_fenced=True)
        self.parked.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            self.abandoned += 1
            raise
        raise AssertionError("a parked fetch outlived its test")

    async def close(self) -> None:
        pass


def new_agent(tmp_path: Path, controller: ParkingController) -> tuple[BrokerAgent, MetadataCache]:
    return scripted_agent(tmp_path, ME, controller)


def test_a_stop_request_abandons_the_parked_fetch_and_shuts_down(tmp_path: Path) -> None:
    controller = ParkingController()
    agent, cache = new_agent(tmp_path, controller)

    async def go() -> int:
        run = asyncio.ensure_future(agent.run())
        await asyncio.wait_for(controller.parked.wait(), 10)
        agent.request_stop()
        return await asyncio.wait_for(run, 10)

    try:
        assert asyncio.run(go()) == 0  # the controlled shutdown completed
    finally:
        cache.close()
    assert controller.abandoned == 1
    assert [r.want_shutdown for r in controller.requests] == [False, True]


def test_cancelling_the_agent_during_a_parked_fetch_is_not_taken_for_a_stop(
    tmp_path: Path,
) -> None:
    controller = ParkingController()
    agent, cache = new_agent(tmp_path, controller)

    async def go() -> None:
        run = asyncio.ensure_future(agent.run())
        await asyncio.wait_for(controller.parked.wait(), 10)
        agent.request_stop()  # both at once: the cancellation must still win
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run

    try:
        asyncio.run(go())
    finally:
        cache.close()
    assert controller.abandoned == 1
    assert len(controller.requests) == 1  # no shutdown fetch after a cancellation
