"""A stop request abandons the broker's parked fetch; the agent's own cancellation
is never swallowed.

The agent used to race each fetch against a waiter on the stop event (two tasks
and an `asyncio.wait` per fetch, once per broker per commit), then ran each fetch
in a task of its own; now `request_stop` cancels the agent's task while it waits
in a fetch and the agent takes that cancellation back. In process: the real
agent and cache; a scripted controller whose caught-up fetches stay parked until
told otherwise.
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


class AnsweringController(ParkingController):
    """The first fetch parks until the test answers it; the shutdown fetch, and
    every fetch after the first, give the loop a few turns before answering, so
    that a cancellation left pending in the agent's task would land there."""

    def __init__(self) -> None:
        super().__init__()
        self.answer: asyncio.Future[bpb.MetadataFetchResponse] | None = None
        self.stop_inside: BrokerAgent | None = None

    async def metadata_fetch(self, request: Any, deadline_s: float) -> Any:
        self.requests.append(request)
        for _ in range(3):
            await asyncio.sleep(0)
        if request.want_shutdown:
            return bpb.MetadataFetchResponse(should_shut_down=True, is_fenced=True)
        if self.stop_inside is not None:  # a stop requested from the agent's own task
            self.stop_inside.request_stop()
            return bpb.MetadataFetchResponse(high_watermark=0, is_fenced=True)
        self.answer = asyncio.get_running_loop().create_future()
        self.parked.set()
        return await self.answer


def test_a_stop_landing_as_the_answer_arrives_leaves_no_cancellation_behind(
    tmp_path: Path,
) -> None:
    controller = AnsweringController()
    agent, cache = new_agent(tmp_path, controller)

    async def go() -> int:
        run = asyncio.ensure_future(agent.run())
        await asyncio.wait_for(controller.parked.wait(), 10)
        assert controller.answer is not None
        # The answer is in, the agent's task not yet resumed: the stop's
        # cancellation lands at the fetch it waited in, and nowhere later.
        controller.answer.set_result(bpb.MetadataFetchResponse(high_watermark=0, is_fenced=True))
        agent.request_stop()
        return await asyncio.wait_for(run, 10)

    try:
        assert asyncio.run(go()) == 0  # the shutdown fetch (three loop turns) completed
    finally:
        cache.close()
    assert [r.want_shutdown for r in controller.requests] == [False, True]
    assert agent.state == bpb.OFFLINE


def test_a_stop_requested_from_the_agents_own_fetch_takes_its_answer_first(
    tmp_path: Path,
) -> None:
    controller = AnsweringController()
    agent, cache = new_agent(tmp_path, controller)
    controller.stop_inside = agent

    async def go() -> int:
        return await asyncio.wait_for(agent.run(), 10)

    try:
        assert asyncio.run(go()) == 0
    finally:
        cache.close()
    assert [r.want_shutdown for r in controller.requests] == [False, True]
    assert agent.stats.fetches == 2  # the answer in hand was taken, not thrown away


def test_a_parked_fetch_runs_in_the_agents_own_task(tmp_path: Path) -> None:
    """No task per fetch: the fetch runs in the task that runs the agent."""
    controller = ParkingController()
    agent, cache = new_agent(tmp_path, controller)
    tasks: list[asyncio.Task[Any] | None] = []
    fetch = controller.metadata_fetch

    async def recording(request: Any, deadline_s: float) -> Any:
        tasks.append(asyncio.current_task())
        return await fetch(request, deadline_s)

    controller.metadata_fetch = recording  # type: ignore[method-assign]

    async def go() -> None:
        run = asyncio.ensure_future(agent.run())
        await asyncio.wait_for(controller.parked.wait(), 10)
        assert tasks == [run]
        agent.request_stop()
        assert await asyncio.wait_for(run, 10) == 0

    try:
        asyncio.run(go())
    finally:
        cache.close()
