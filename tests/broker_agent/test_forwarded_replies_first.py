"""A forwarded write's reply goes before the apply of a fetched batch.

The controller sends a write's reply before the fetch answers of its commit, but on
another connection, so the forwarding broker often has the fetched batch first.
`ControllerForwarder.replies_first` lets a reply in flight through first (bounded),
and the agent awaits it before each apply.

In process: the real forwarder over a scripted admin client, and the real agent
and cache over a scripted controller.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from broker_agent.kafka import forwarding
from broker_agent.kafka.forwarding import Caller, ControllerForwarder
from quorum.admin_client import NoControllerError
from quorum.controller.image_records import config_record
from quorum.controller.record_codec import encode
from quorum.gen import admin_pb2 as api
from quorum.gen import broker_pb2 as bpb
from tests.broker_agent.scripted_agent import OneAnswerController, scripted_agent

CALLER = Caller("User:ANONYMOUS", "127.0.0.1")


class HeldAdmin:
    """An admin client whose replies wait until the test releases them."""

    def __init__(self, fails: bool = False) -> None:
        self.release: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.fails = fails

    async def admin(self, method: str, request: Any, **_: Any) -> Any:
        await self.release
        if self.fails:
            raise NoControllerError("no controller answered")
        return api.CreateTopicsResponse(metadata_offset=0)


def forwarder(client: Any) -> ControllerForwarder:
    return ControllerForwarder(client, lambda: 0)


def test_without_a_write_in_flight_it_does_not_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(forwarding, "REPLY_FIRST_S", 3600.0)

    async def go() -> None:
        await asyncio.wait_for(forwarder(HeldAdmin()).replies_first(), 5)

    asyncio.run(go())


def test_it_waits_for_the_reply_of_a_write_in_flight(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(forwarding, "REPLY_FIRST_S", 3600.0)

    async def go() -> None:
        client = HeldAdmin()
        fwd = forwarder(client)
        write = asyncio.create_task(
            fwd.write("CreateTopics", api.CreateTopicsRequest(), CALLER, 30_000)
        )
        await asyncio.sleep(0)
        first = asyncio.create_task(fwd.replies_first())
        await asyncio.sleep(0.05)
        assert not first.done()  # the reply has not come: the apply waits
        client.release.set_result(None)
        await asyncio.wait_for(first, 5)
        assert write.done()  # the reply was taken before the wait ended
        await write

    asyncio.run(go())


def test_the_wait_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(forwarding, "REPLY_FIRST_S", 0.05)

    async def go() -> None:
        client = HeldAdmin()
        fwd = forwarder(client)
        write = asyncio.create_task(fwd.write("DeleteTopics", api.DeleteTopicsRequest(), CALLER, 0))
        await asyncio.sleep(0)
        started = time.monotonic()
        await asyncio.wait_for(fwd.replies_first(), 5)
        assert time.monotonic() - started >= 0.04
        assert not write.done()  # a reply that does not come holds no apply for long
        client.release.set_result(None)
        await write

    asyncio.run(go())


def test_a_failed_write_ends_the_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(forwarding, "REPLY_FIRST_S", 3600.0)

    async def go() -> None:
        client = HeldAdmin(fails=True)
        fwd = forwarder(client)
        write = asyncio.create_task(
            fwd.write("CreateTopics", api.CreateTopicsRequest(), CALLER, 30_000)
        )
        await asyncio.sleep(0)
        waiting = asyncio.create_task(fwd.replies_first())
        client.release.set_result(None)
        with pytest.raises(forwarding.ForwardError):
            await write
        await asyncio.wait_for(waiting, 5)
        await asyncio.wait_for(fwd.replies_first(), 5)  # nothing in flight any more

    asyncio.run(go())


def test_the_agent_lets_replies_in_before_it_applies_a_fetched_batch(tmp_path: Path) -> None:
    record = encode(config_record(api.TOPIC, "orders", "retention.ms", "1"))
    controller = OneAnswerController(
        [bpb.MetadataBatch(base_offset=0, epoch=1, append_time_ms=1, records=[record])]
    )
    agent, cache = scripted_agent(tmp_path, 10, controller)
    controller.agent = agent
    offsets_seen: list[int] = []

    async def replies_first() -> None:
        offsets_seen.append(cache.next_offset)
        await asyncio.sleep(0)

    agent.replies_first = replies_first
    try:
        assert asyncio.run(asyncio.wait_for(agent.run(), 10)) == 0
        assert cache.next_offset == 1
    finally:
        cache.close()
    assert offsets_seen == [0]  # awaited once, before the batch was applied
