"""A leader that stops leading answers every fetch it holds at once (KIP-595's
errors, with its new view), and no call ever ends UNKNOWN."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import grpc
import pytest
from grpc_nodes import make_nodes, running, wait_for_leader

from quorum.controller.api_errors import ApiError
from quorum.gen import raft_pb2 as pb
from quorum.gen import raft_pb2_grpc as pb_grpc
from quorum.raft.effects import Role
from quorum.raft.messages import BeginQuorumEpochRequest, ErrorCode, FetchRequest, FetchResponse
from quorum.rpc.servers import new_server, stop_server
from quorum.rpc.wire_errors import wire_error
from quorum.server.node_runtime import QuorumNode

OBSERVER = 9  # not a voter: its fetches are held like a follower's


def caught_up_fetch(leader: QuorumNode) -> FetchRequest:
    core = leader.driver.core
    end = core.log.end_offset_and_epoch()
    return FetchRequest(OBSERVER, core.epoch, end.offset, end.epoch, core.high_watermark)


async def held(leader: QuorumNode) -> asyncio.Task[Any]:
    """A caught-up fetch the leader holds (its long poll), as a running task."""
    task = asyncio.ensure_future(
        leader.driver.handle_request(OBSERVER, caught_up_fetch(leader), 30)
    )
    await asyncio.sleep(0.05)
    assert not task.done(), "a caught-up fetch is held"
    return task


def test_a_resigning_leader_answers_its_held_fetch_at_once_naming_no_leader() -> None:
    async def scenario() -> None:
        async with running(make_nodes()) as nodes:
            leader = await wait_for_leader(nodes)
            epoch = leader.driver.epoch
            task = await held(leader)
            leader.driver.core.resign(leader.driver.clock())
            leader.driver._process()
            answer = await asyncio.wait_for(task, 0.5)
            assert isinstance(answer, FetchResponse)
            assert (answer.error, answer.epoch, answer.leader_id) == (
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                epoch,
                None,
            )

    asyncio.run(scenario())


def test_a_leader_that_sees_a_higher_epoch_answers_its_held_fetch_with_the_new_leader() -> None:
    async def scenario() -> None:
        async with running(make_nodes()) as nodes:
            leader = await wait_for_leader(nodes)
            epoch = leader.driver.epoch
            other = next(n for n in nodes if n is not leader).driver.node_id
            task = await held(leader)
            leader.driver.receive(other, BeginQuorumEpochRequest(epoch + 1, other))
            answer = await asyncio.wait_for(task, 0.5)
            assert (answer.error, answer.epoch, answer.leader_id) == (
                ErrorCode.FENCED_LEADER_EPOCH,
                epoch + 1,
                other,
            )
            assert leader.driver.role is Role.FOLLOWER

    asyncio.run(scenario())


def test_a_held_fetch_stream_is_refused_with_the_kafka_error_not_unknown() -> None:
    """Over the wire: the follower's FetchStream call ends FAILED_PRECONDITION
    with NOT_LEADER_OR_FOLLOWER and the full answer packed beside it."""

    async def scenario() -> None:
        addresses: dict[int, str] = {}
        async with running(make_nodes(addresses=addresses)) as nodes:
            leader = await wait_for_leader(nodes)
            request = caught_up_fetch(leader)
            channel = grpc.aio.insecure_channel(addresses[leader.driver.node_id])
            try:
                call = pb_grpc.RaftQuorumStub(channel).FetchStream()
                await call.write(
                    pb.FetchRequest(
                        cluster_id="cluster-a",
                        replica_id=OBSERVER,
                        epoch=request.epoch,
                        fetch_offset=request.fetch_offset,
                        last_fetched_epoch=request.last_fetched_epoch,
                        known_high_watermark=request.known_high_watermark,
                    )
                )
                await asyncio.sleep(0.1)
                resigned = time.monotonic()
                leader.driver.core.resign(leader.driver.clock())
                leader.driver._process()
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await call.read()
                assert time.monotonic() - resigned < 0.5
                error = wire_error(refused.value)
                assert error.status == grpc.StatusCode.FAILED_PRECONDITION
                assert error.error is ErrorCode.NOT_LEADER_OR_FOLLOWER
                answer = pb.FetchResponse()
                assert error.unpack(answer) and answer.leader_id == -1
            finally:
                await channel.close()

    asyncio.run(scenario())


# ----------------------------------------------- exceptions become statuses


async def _failing_unary(request: bytes, context: Any) -> bytes:
    raise _FAILURES[request.decode()]


async def _failing_stream(requests: Any, context: Any) -> Any:
    async for request in requests:
        yield b"ok:" + request
        raise _FAILURES[request.decode()]


_FAILURES: dict[str, Exception] = {
    "timeout": TimeoutError("no answer in time"),
    "os": ConnectionResetError("reset by peer"),
    "bug": KeyError("oops"),
}


@pytest.mark.parametrize(
    ("failure", "status", "error"),
    [
        ("timeout", grpc.StatusCode.DEADLINE_EXCEEDED, ErrorCode.REQUEST_TIMED_OUT),
        ("os", grpc.StatusCode.UNAVAILABLE, ErrorCode.BROKER_NOT_AVAILABLE),
        ("bug", grpc.StatusCode.INTERNAL, ApiError.UNKNOWN_SERVER_ERROR),
    ],
)
def test_an_exception_in_a_servicer_becomes_a_proper_status(
    failure: str, status: grpc.StatusCode, error: Any, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> None:
        server = new_server()
        server.add_generic_rpc_handlers(
            [
                grpc.method_handlers_generic_handler(
                    "test.Failing",
                    {
                        "Unary": grpc.unary_unary_rpc_method_handler(_failing_unary),
                        "Stream": grpc.stream_stream_rpc_method_handler(_failing_stream),
                    },
                )
            ]
        )
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        try:
            with pytest.raises(grpc.aio.AioRpcError) as unary:
                await channel.unary_unary("/test.Failing/Unary")(failure.encode(), timeout=5)
            call = channel.stream_stream("/test.Failing/Stream")()
            await call.write(failure.encode())
            assert await call.read() == b"ok:" + failure.encode()
            with pytest.raises(grpc.aio.AioRpcError) as stream:
                await call.read()
            for refused in (unary.value, stream.value):
                assert (wire_error(refused).status, wire_error(refused).error) == (status, error)
                assert str(_FAILURES[failure]) in (refused.details() or "")
        finally:
            await channel.close()
            await server.stop(None)

    asyncio.run(scenario())
    assert "Unexpected" not in caplog.text


async def _idle_stream(requests: Any, context: Any) -> Any:
    async for request in requests:  # waits for a next request that never comes
        yield request


def test_a_stopping_server_answers_its_open_streams_unavailable(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A long-lived stream still open when the node stops is answered
    UNAVAILABLE (BROKER_NOT_AVAILABLE), not force-cancelled by gRPC, which would
    log a CancelledError traceback per stream."""

    async def scenario() -> None:
        server = new_server()
        server.add_generic_rpc_handlers(
            [
                grpc.method_handlers_generic_handler(
                    "test.Idle", {"Stream": grpc.stream_stream_rpc_method_handler(_idle_stream)}
                )
            ]
        )
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        try:
            call = channel.stream_stream("/test.Idle/Stream")()
            await call.write(b"one")
            assert await call.read() == b"one"
            await stop_server(server, 0.1)
            with pytest.raises(grpc.aio.AioRpcError) as stopped:
                await call.read()
            error = wire_error(stopped.value)
            assert (error.status, error.error) == (
                grpc.StatusCode.UNAVAILABLE,
                ErrorCode.BROKER_NOT_AVAILABLE,
            )
        finally:
            await channel.close()

    asyncio.run(scenario())
    assert "Exception not handled" not in caplog.text
    assert "CancelledError" not in caplog.text
