"""Hostile requests against real controller processes: each is refused with a clear
error and Kafka's error name, changes nothing, and leaves the quorum working."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from controller_cluster import Cluster, run, running_cluster

from quorum.gen import raft_pb2 as pb
from quorum.raft.messages import MAX_EPOCH, ErrorCode
from quorum.rpc.wire_errors import wire_error

pytestmark = pytest.mark.slow


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    with running_cluster(tmp_path) as c:
        yield c


def raw_call(address: str, method: str, payload: bytes) -> grpc.RpcError | bytes:
    """Send raw bytes as the request of `RaftQuorum/method`: the refusal, or the answer."""

    async def go() -> grpc.RpcError | bytes:
        async with grpc.aio.insecure_channel(address) as channel:
            call = channel.unary_unary(
                f"/quorum.raft.v1.RaftQuorum/{method}",
                request_serializer=lambda b: b,
                response_deserializer=lambda b: b,
            )
            try:
                answer: bytes = await call(payload, timeout=15)
                return answer
            except grpc.aio.AioRpcError as err:
                return err

    return run(go())


def fetch(cluster: Cluster, node_id: int, epoch: int, replica_id: int = 4242) -> grpc.RpcError:
    request = pb.FetchRequest(
        cluster_id=cluster.cluster_id, replica_id=replica_id, epoch=epoch, fetch_offset=0
    )
    answer = raw_call(cluster.procs[node_id].address, "Fetch", request.SerializeToString())
    assert isinstance(answer, grpc.RpcError), "a far-future fetch was answered"
    return answer


def epochs(cluster: Cluster) -> dict[int, tuple[int, int]]:
    """Each node's (epoch, leader id); a describe slowed by a loaded machine is retried."""
    views: dict[int, tuple[int, int]] = {}

    def described() -> bool:
        for n in cluster.procs:
            view = cluster.describe(n)
            views[n] = (view.leader_epoch, view.leader_id)
        return True

    cluster.wait_until(described, 30, "every node described")
    return views


def test_a_far_future_fetch_from_a_non_voter_changes_no_epoch(cluster: Cluster) -> None:
    leader = cluster.wait_for_leader()
    follower = next(n for n in cluster.procs if n != leader.leader_id)
    before = epochs(cluster)
    assert len({e for e, _ in before.values()}) == 1

    for target in (leader.leader_id, follower):
        err = wire_error(fetch(cluster, target, 10**9))
        assert err.error in (ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        # The largest int32 would leave no successor for the next election.
        err = wire_error(fetch(cluster, target, 2**31 - 1))
        assert err.error is ErrorCode.INVALID_REQUEST
        assert str(MAX_EPOCH) in err.message
    time.sleep(3)  # the report saw every voter move within 3 s

    assert epochs(cluster) == before
    cluster.write(3)  # and the quorum still commits


def test_a_vote_above_the_epoch_limit_is_refused(cluster: Cluster) -> None:
    before = epochs(cluster)
    voter = next(iter(cluster.procs))
    request = pb.VoteRequest(
        cluster_id=cluster.cluster_id,
        candidate_epoch=2**31 - 1,
        candidate_id=voter,
        last_offset_epoch=2**31 - 1,
        last_offset=10**12,
    )
    for node_id in cluster.procs:
        answer = raw_call(cluster.procs[node_id].address, "Vote", request.SerializeToString())
        assert isinstance(answer, grpc.RpcError)
        assert wire_error(answer).error is ErrorCode.INVALID_REQUEST
    assert epochs(cluster) == before


@pytest.mark.parametrize("method", ["Fetch", "Vote", "BeginQuorumEpoch", "FetchSnapshot"])
def test_malformed_bytes_are_an_invalid_request_logged_once(cluster: Cluster, method: str) -> None:
    before = epochs(cluster)
    target = next(iter(cluster.procs))
    for _ in range(200):
        answer = raw_call(cluster.procs[target].address, method, b"\xff\xff\xff\x0f garbage")
        assert isinstance(answer, grpc.RpcError)
        assert answer.code() is grpc.StatusCode.INVALID_ARGUMENT
        err = wire_error(answer)
        assert err.error is ErrorCode.INVALID_REQUEST, err
    log = cluster.procs[target].log_text()
    assert "Traceback" not in log
    assert log.count("refused a malformed") <= 3  # rate-limited, not one line per request
    assert epochs(cluster) == before


def test_a_request_naming_the_receiver_as_its_sender_is_refused(cluster: Cluster) -> None:
    """A forged BeginQuorumEpoch or Vote naming the receiving node would make it
    follow or vote for itself."""
    before = epochs(cluster)
    for node_id, proc in cluster.procs.items():
        for method, request in (
            ("BeginQuorumEpoch", pb.BeginQuorumEpochRequest(
                cluster_id=cluster.cluster_id, leader_epoch=before[node_id][0], leader_id=node_id)),
            ("Vote", pb.VoteRequest(
                cluster_id=cluster.cluster_id, candidate_epoch=before[node_id][0] + 1,
                candidate_id=node_id, last_offset_epoch=10**6, last_offset=10**12)),
        ):  # fmt: skip
            answer = raw_call(proc.address, method, request.SerializeToString())
            assert isinstance(answer, grpc.RpcError)
            err = wire_error(answer)
            assert err.error is ErrorCode.INVALID_REQUEST and "names this node" in err.message
    assert epochs(cluster) == before
