"""`exchange`: one request and its answer on a kept-open stream call, with a deadline."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from quorum.common.channels import exchange, open_channel
from quorum.gen import raft_pb2 as pb
from quorum.gen import raft_pb2_grpc as pb_grpc
from quorum.rpc.servers import new_server


class _Servicer(pb_grpc.QuorumLogServicer):
    """Answers a write whose first record is b"answer"; sits on any other."""

    async def WriteStream(
        self, requests: AsyncIterator[pb.WriteRequest], context: Any
    ) -> AsyncIterator[pb.WriteResponse]:
        async for request in requests:
            if request.records[0] == b"answer":
                yield pb.WriteResponse(last_offset=7)
            else:
                await asyncio.sleep(3600)


async def _with_server(scenario: Any) -> None:
    server = new_server()
    pb_grpc.add_QuorumLogServicer_to_server(_Servicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    channel = open_channel(f"127.0.0.1:{port}")
    try:
        await scenario(pb_grpc.QuorumLogStub(channel))
    finally:
        await channel.close()
        await server.stop(None)


def _write(first: bytes) -> pb.WriteRequest:
    return pb.WriteRequest(cluster_id="c", records=[first])


def test_an_answer_comes_back_and_the_call_stays_usable() -> None:
    async def scenario(stub: Any) -> None:
        call = stub.WriteStream()
        for _ in range(3):
            reply = await exchange(call, _write(b"answer"), 5.0)
            assert reply.last_offset == 7
        assert not call.done()
        call.cancel()

    asyncio.run(_with_server(scenario))


def test_an_overdue_answer_raises_timeout_and_cancels_the_call() -> None:
    async def scenario(stub: Any) -> None:
        call = stub.WriteStream()
        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(TimeoutError):
            await exchange(call, _write(b"hold"), 0.2)
        assert 0.15 <= loop.time() - started < 2.0
        assert call.done()  # never reused: a late answer cannot pass for the next one

    asyncio.run(_with_server(scenario))


def test_cancelling_the_caller_is_not_reported_as_a_timeout() -> None:
    async def scenario(stub: Any) -> None:
        call = stub.WriteStream()
        task = asyncio.ensure_future(exchange(call, _write(b"hold"), 30.0))
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert call.done()

    asyncio.run(_with_server(scenario))
