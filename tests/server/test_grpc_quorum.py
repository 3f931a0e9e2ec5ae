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


def _no_bad(record: bytes) -> str | None:
    return "a bad record" if record.startswith(b"bad") else None


def test_write_stream_takes_several_writes_per_request_each_answered_or_refused_alone() -> None:
    """A WriteRequest with record_counts carries several writes: each is proposed
    in order and answered once committed, the valid ones at consecutive offsets
    from base_offset; one with an invalid record is refused alone (INVALID_RECORD
    in `refused`) and the others are written; counts that do not split the
    records change nothing (INVALID_REQUEST)."""
    from quorum.gen import raft_pb2 as pb
    from quorum.gen import raft_pb2_grpc as pb_grpc
    from quorum.raft.messages import ErrorCode

    async def scenario() -> None:
        addresses: dict[int, str] = {}
        nodes = make_nodes(addresses=addresses, validate_record=_no_bad)
        async with running(nodes):
            leader = await wait_for_leader(nodes)
            core = leader.driver.core
            async with grpc.aio.insecure_channel(addresses[core.node_id]) as channel:
                call = pb_grpc.QuorumLogStub(channel).WriteStream()
                records = [b"a0", b"b0", b"bad", b"b2", b"c0"]
                request = pb.WriteRequest(
                    cluster_id="cluster-a", records=records, record_counts=[1, 3, 1]
                )
                await call.write(request)
                reply = await call.read()
                assert [(r.index, r.error_code) for r in reply.refused] == [
                    (1, ErrorCode.INVALID_RECORD.value)
                ]
                assert reply.last_offset == reply.base_offset + 1
                assert core.high_watermark > reply.last_offset
                written = [
                    record
                    for batch in core.log.read(reply.base_offset, 10)
                    for offset, record in enumerate(batch.records, batch.base_offset)
                    if reply.base_offset <= offset <= reply.last_offset
                ]
                assert written == [b"a0", b"c0"]
                end = core.log.end_offset
                for counts in ([1, 1], [2, 0, 1], [1, 1, 1, 1]):
                    wrong = pb.WriteRequest(
                        cluster_id="cluster-a", records=[b"x", b"y", b"z"], record_counts=counts
                    )
                    error = await refusal(pb_grpc.QuorumLogStub(channel).WriteStream(), wrong)
                    assert error.error is ErrorCode.INVALID_REQUEST
                assert core.log.end_offset == end

    asyncio.run(scenario())


def test_client_coalesces_concurrent_writes_each_committed_at_its_own_offsets() -> None:
    """Writes made at once from many tasks of one client share requests: fewer
    requests than writes, each write's records at the offsets it was told, all
    committed; a write the leader refuses fails alone (INVALID_RECORD)."""
    from quorum.client import QuorumClient, QuorumClientError
    from quorum.raft.messages import ErrorCode

    async def scenario() -> None:
        addresses: dict[int, str] = {}
        nodes = make_nodes(addresses=addresses, validate_record=_no_bad)
        async with running(nodes):
            leader = await wait_for_leader(nodes)
            core = leader.driver.core
            client = QuorumClient(list(addresses.values()), "cluster-a")
            requests = 0
            exchange = client._write_over_stream

            async def counted(*args: Any) -> Any:
                nonlocal requests
                requests += 1
                return await exchange(*args)

            client._write_over_stream = counted  # type: ignore[method-assign]
            try:
                await client.write([b"first"])  # finds the leader
                requests = 0
                writes = [[b"w%d-%d" % (i, j) for j in range(i % 3 + 1)] for i in range(40)]
                writes[7] = [b"ok", b"bad"]
                outcomes = await asyncio.gather(
                    *(client.write(w) for w in writes), return_exceptions=True
                )
                refused = outcomes[7]
                assert isinstance(refused, QuorumClientError)
                assert refused.error.error is ErrorCode.INVALID_RECORD
                assert requests < len(writes)
                for records, result in zip(writes, outcomes, strict=True):
                    if result is refused:
                        continue
                    assert not isinstance(result, BaseException)
                    assert result.last_offset - result.base_offset + 1 == len(records)
                    assert core.high_watermark > result.last_offset
                    stored = [
                        record
                        for batch in core.log.read(result.base_offset, 100)
                        for offset, record in enumerate(batch.records, batch.base_offset)
                        if result.base_offset <= offset <= result.last_offset
                    ]
                    assert stored == records
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
