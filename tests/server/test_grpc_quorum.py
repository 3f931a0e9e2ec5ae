"""Three drivers in one process, talking real gRPC over loopback."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
from grpc_nodes import FAST, free_port, make_nodes, running, wait_for_leader

from quorum.log.memory import MemoryLogStore, MemoryQuorumStateStore
from quorum.raft.config import RaftConfig
from quorum.raft.effects import Role
from quorum.rpc.wire_errors import WireError, wire_error
from quorum.server.node_runtime import QuorumNode


async def refusal(call: Any, request: Any) -> WireError:
    """Send `request` on a stream call that must refuse it; the refusal's error."""
    await call.write(request)
    try:
        answer = await call.read()
    except grpc.aio.AioRpcError as err:
        return wire_error(err)
    raise AssertionError(f"answered instead of refused: {answer}")


def test_elect_commit_and_fail_over_over_grpc() -> None:
    async def scenario() -> None:
        nodes = make_nodes()
        async with running(nodes):
            leader = await wait_for_leader(nodes)
            results = await asyncio.gather(
                *(leader.driver.propose([b"w%d" % i]) for i in range(20))
            )
            last = max(r.last_offset for r in results)
            await asyncio.sleep(0.3)
            for n in nodes:
                assert n.driver.core.high_watermark > last
                batch = n.driver.core.log.batch_at(results[0].first_offset)
                assert batch is not None and b"w0" in batch.records
            # Graceful resignation hands leadership over well inside the election timeout.
            epoch = leader.driver.core.epoch
            await leader.stop(resign=True)
            rest = [n for n in nodes if n is not leader]
            started = asyncio.get_running_loop().time()
            new = await wait_for_leader(rest)
            assert new.driver.core.epoch == epoch + 1
            assert asyncio.get_running_loop().time() - started < 1.0
            result = await new.driver.propose([b"after"])
            assert result.epoch == epoch + 1

    asyncio.run(scenario())


def test_a_node_of_another_cluster_is_refused_and_changes_nothing() -> None:
    async def scenario() -> None:
        nodes = make_nodes({3: "cluster-b"})
        stranger = nodes[2]
        async with running(nodes):
            leader = await wait_for_leader(nodes[:2])
            await leader.driver.propose([b"x"])
            await asyncio.sleep(1.0)
            assert stranger.driver.core.log.end_offset == 0
            assert stranger.driver.core.role is not Role.LEADER
            assert all(n.driver.core.epoch == leader.driver.core.epoch for n in nodes[:2])

    asyncio.run(scenario())


def test_single_voter_quorum_commits_alone() -> None:
    async def scenario() -> None:
        port = free_port()
        node = QuorumNode(
            RaftConfig(1, frozenset({1}), **FAST),
            f"127.0.0.1:{port}",
            {1: f"127.0.0.1:{port}"},
            "c",
            MemoryLogStore(),
            MemoryQuorumStateStore(),
        )
        await node.start()
        try:
            await wait_for_leader([node])
            result = await node.driver.propose([b"solo"])
            assert node.driver.core.high_watermark > result.last_offset
        finally:
            await node.stop()

    asyncio.run(scenario())


def test_write_stream_answers_each_write_once_committed_and_refuses_like_write() -> None:
    """WriteStream: one call, one committed answer per request, in order; a
    follower refuses with NOT_LEADER_OR_FOLLOWER naming the leader; a wrong
    cluster id ends the call with INCONSISTENT_CLUSTER_ID and appends nothing.
    The client reuses one call for consecutive writes."""
    from quorum.client import QuorumClient
    from quorum.gen import raft_pb2 as pb
    from quorum.gen import raft_pb2_grpc as pb_grpc
    from quorum.raft.messages import ErrorCode

    async def scenario() -> None:
        addresses: dict[int, str] = {}
        nodes = make_nodes(addresses=addresses)
        async with running(nodes):
            leader = await wait_for_leader(nodes)
            follower = next(n for n in nodes if n is not leader)
            async with grpc.aio.insecure_channel(
                addresses[leader.driver.config.node_id]
            ) as channel:
                call = pb_grpc.QuorumLogStub(channel).WriteStream()
                offsets = []
                for i in range(3):
                    await call.write(pb.WriteRequest(cluster_id="cluster-a", records=[b"s%d" % i]))
                    reply = await call.read()
                    assert leader.driver.core.high_watermark > reply.last_offset
                    offsets.append(reply.base_offset)
                assert offsets == sorted(offsets) and len(set(offsets)) == 3
                end = leader.driver.core.log.end_offset
                foreign = pb.WriteRequest(cluster_id="cluster-b", records=[b"no"])
                error = await refusal(call, foreign)
                assert error.error is ErrorCode.INCONSISTENT_CLUSTER_ID
                assert leader.driver.core.log.end_offset == end
            async with grpc.aio.insecure_channel(
                addresses[follower.driver.config.node_id]
            ) as channel:
                call = pb_grpc.QuorumLogStub(channel).WriteStream()
                error = await refusal(call, pb.WriteRequest(cluster_id="cluster-a", records=[b"x"]))
                assert error.error is ErrorCode.NOT_LEADER_OR_FOLLOWER
                assert error.leader_address == addresses[leader.driver.config.node_id]
            client = QuorumClient([addresses[follower.driver.config.node_id]], "cluster-a")
            try:
                first = await client.write([b"c1"])
                second = await client.write([b"c2"])
                assert second.base_offset > first.base_offset
                assert sum(len(c) for c in client._idle_streams.values()) == 1  # one call, reused
            finally:
                await client.close()

    asyncio.run(scenario())


def test_fetch_stream_answers_each_fetch_in_order_and_rejects_like_fetch() -> None:
    """FetchStream: followers replicate over one call each, kept across commits; on
    a call of our own the leader answers each fetch in order, holds a caught-up
    fetch until a write arrives, and ends the call on a stale epoch with
    FENCED_LEADER_EPOCH (the answer naming the current epoch rides along) or on a
    foreign cluster id with INCONSISTENT_CLUSTER_ID, recording nothing."""
    from quorum.client import QuorumClient
    from quorum.gen import raft_pb2 as pb
    from quorum.gen import raft_pb2_grpc as pb_grpc
    from quorum.raft.messages import ErrorCode

    async def scenario() -> None:
        addresses: dict[int, str] = {}
        nodes = make_nodes(addresses=addresses)
        async with running(nodes):
            client = QuorumClient(list(addresses.values()), "cluster-a")
            try:
                leader = await wait_for_leader(nodes)
                leader_id = leader.driver.config.node_id
                followers = [n for n in nodes if n is not leader]
                await client.write([b"w0"])
                calls = [f.transport._fetch_calls[leader_id] for f in followers]
                for i in range(5):
                    await client.write([b"w%d" % (i + 1)])
                assert [f.transport._fetch_calls[leader_id] for f in followers] == calls

                core = leader.driver.core
                epoch = core.epoch
                async with grpc.aio.insecure_channel(addresses[leader_id]) as channel:
                    call = pb_grpc.RaftQuorumStub(channel).FetchStream()

                    def fetch(offset: int, last_epoch: int, **kw: object) -> pb.FetchRequest:
                        fields = {"cluster_id": "cluster-a", "replica_id": 9, "epoch": epoch}
                        fields.update(kw)
                        return pb.FetchRequest(
                            fetch_offset=offset, last_fetched_epoch=last_epoch, **fields
                        )

                    await call.write(fetch(0, 0))
                    first = await call.read()
                    assert first.batches and first.batches[0].base_offset == 0
                    end = core.log.end_offset
                    last_epoch = core.log.end_offset_and_epoch().epoch
                    await call.write(
                        fetch(end, last_epoch, known_high_watermark=core.high_watermark)
                    )
                    held = asyncio.ensure_future(call.read())
                    await asyncio.sleep(0.1)
                    assert not held.done()  # caught up: held for new data
                    written = await client.write([b"held"])
                    second = await held
                    assert second.batches[0].base_offset == end
                    assert second.batches[-1].base_offset + len(second.batches[-1].records) > (
                        written.last_offset
                    )
                    error = await refusal(call, fetch(end, epoch, epoch=epoch - 1))
                    assert error.error is ErrorCode.FENCED_LEADER_EPOCH
                    answer = pb.FetchResponse()
                    assert error.unpack(answer) and answer.epoch == epoch

                    call = pb_grpc.RaftQuorumStub(channel).FetchStream()
                    error = await refusal(call, fetch(0, 0, cluster_id="cluster-b", replica_id=8))
                    assert error.error is ErrorCode.INCONSISTENT_CLUSTER_ID
                    assert 8 not in core.replica_progress()
            finally:
                await client.close()

    asyncio.run(scenario())


def test_a_request_whose_answer_is_overdue_times_out_and_leaves_nothing_behind() -> None:
    """The driver's wait for the core's answer has a deadline: a fetch held past
    it raises TimeoutError, and no reply slot is left for the caller."""
    import pytest

    from quorum.raft.messages import FetchRequest

    async def scenario() -> None:
        nodes = make_nodes()
        async with running(nodes):
            leader = await wait_for_leader(nodes)
            core = leader.driver.core
            end = core.log.end_offset_and_epoch()
            held = FetchRequest(9, core.epoch, end.offset, end.epoch, core.high_watermark)
            with pytest.raises(TimeoutError):
                await leader.driver.handle_request(9, held, 0.05)
            assert not [key for key in leader.driver._replies if key[0] == 9]

    asyncio.run(scenario())
