"""Three real `quorum-controller` processes over real gRPC on loopback."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from controller_cluster import Cluster, quorumctl, run
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from quorum.controller.record_codec import encode, noop, wrap
from quorum.gen import metadata_pb2 as md
from quorum.gen import raft_pb2 as pb
from quorum.gen import raft_pb2_grpc as pb_grpc
from quorum.raft.messages import ErrorCode
from quorum.rpc.wire_errors import wire_error

pytestmark = pytest.mark.slow


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster.create(tmp_path)
    c.start()
    try:
        yield c
    finally:
        c.stop_all()


def digests_agree(cluster: Cluster, ids: list[int], offset: int) -> bool:
    views = [cluster.describe(i) for i in ids]
    applied = {v.applied_offset for v in views}
    digests = {v.image_digest for v in views}
    return min(applied) >= offset and len(applied) == 1 and len(digests) == 1 and "" not in digests


def test_elects_commits_on_all_and_survives_kill_9_of_the_leader(cluster: Cluster) -> None:
    view = cluster.wait_for_leader()
    offsets = cluster.write(30)
    assert offsets == sorted(offsets)
    ids = list(cluster.procs)
    cluster.wait_until(lambda: digests_agree(cluster, ids, offsets[-1] + 1), what="replication")
    leader = view.leader_id
    assert {v.replica_id for v in cluster.describe(leader).current_voters} == set(ids)

    cluster.kill(leader)  # SIGKILL
    killed_at = time.monotonic()
    cluster.wait_exit(leader)
    rest = [i for i in ids if i != leader]
    more = cluster.write(1, prefix=b"after-kill")
    took = time.monotonic() - killed_at
    assert took < 3.0, f"a new leader committed only after {took:.2f}s"
    new_view = cluster.wait_for_leader(rest)
    assert new_view.leader_id != leader and new_view.leader_epoch > view.leader_epoch

    cluster.start(leader)  # the old leader comes back and catches up
    cluster.wait_until(
        lambda: digests_agree(cluster, ids, more[-1] + 1), what="the old leader to catch up"
    )
    assert cluster.describe(leader).role == "follower"


def test_sigterm_on_the_leader_hands_over_with_end_quorum_epoch(tmp_path: Path) -> None:
    # A long election timeout makes a handover by EndQuorumEpoch plainly faster
    # than anything an election timeout could produce.
    c = Cluster.create(
        tmp_path,
        extra={
            "controller.quorum.election.timeout.ms": "4000",
            "controller.quorum.fetch.timeout.ms": "8000",
        },
    )
    c.start()
    try:
        view = c.wait_for_leader(timeout_s=30)
        c.write(5)
        leader = view.leader_id
        started = time.monotonic()
        c.kill(leader, signal.SIGTERM)
        rest = [i for i in c.procs if i != leader]
        new_view = c.wait_for_leader(rest, timeout_s=10)
        took = time.monotonic() - started
        assert c.wait_exit(leader) == 0
        assert new_view.leader_epoch == view.leader_epoch + 1
        assert took < 2.0, f"handover took {took:.2f}s"
    finally:
        c.stop_all()


def test_a_lagging_follower_catches_up_through_fetch_snapshot(tmp_path: Path) -> None:
    c = Cluster.create(
        tmp_path,
        extra={
            "metadata.snapshot.max.new.record.bytes": "4096",
            "metadata.log.segment.bytes": "16384",
            "metadata.max.retention.bytes": "0",
        },
    )
    c.start()
    try:
        view = c.wait_for_leader()
        follower = next(i for i in c.procs if i != view.leader_id)
        c.kill(follower)
        c.wait_exit(follower)
        offsets = c.write(400, size=200)
        leader_view = c.describe(view.leader_id)
        assert leader_view.log_start_offset > 0, "the leader should have snapshotted and cut"
        c.start(follower)
        ids = list(c.procs)
        c.wait_until(lambda: digests_agree(c, ids, offsets[-1] + 1), what="snapshot catch-up")
        metrics = c.procs[follower].metrics()
        assert metrics["quorum_raft_snapshots_installed_total"] >= 1
        assert metrics["quorum_raft_latest_snapshot_offset"] > 0
    finally:
        c.stop_all()


@pytest.mark.expected_log_errors(r"rejects? (our )?cluster id")
def test_a_controller_with_another_cluster_id_is_rejected_and_changes_nothing(
    tmp_path: Path,
) -> None:
    c = Cluster.create(tmp_path)
    stranger = 3
    other_id = run_quorumctl_uuid()
    # Reformat node 3 for another cluster.
    for child in c.procs[stranger].data_dir.iterdir():
        child.unlink()
    c.format(stranger, other_id)
    c.start(1, 2)
    try:
        view = c.wait_for_leader([1, 2])
        c.write(3)
        before = c.describe(view.leader_id)
        c.start(stranger)
        code = c.wait_exit(stranger, timeout_s=20)
        assert code == 3, c.procs[stranger].log_text()
        assert "reject cluster id" in c.procs[stranger].log_text()
        after = c.describe(view.leader_id)
        assert after.leader_epoch == before.leader_epoch
        assert after.high_watermark == before.high_watermark
    finally:
        c.stop_all()


def run_quorumctl_uuid() -> str:
    return quorumctl("storage", "random-uuid").stdout.strip()


def call_error(call: object) -> tuple[grpc.StatusCode, ErrorCode | None, dict[str, str]]:
    try:
        run(call)  # type: ignore[arg-type]
    except grpc.aio.AioRpcError as err:
        error = wire_error(err)
        return err.code(), error.error, error.metadata
    raise AssertionError("the call succeeded")


def test_bad_requests_get_status_and_error_code_and_change_nothing(cluster: Cluster) -> None:
    view = cluster.wait_for_leader()
    leader = cluster.procs[view.leader_id]
    follower = next(p for p in cluster.procs.values() if p.node_id != view.leader_id)

    async def fetch(address: str, **fields: object) -> None:
        async with grpc.aio.insecure_channel(address) as channel:
            request = pb.FetchRequest(
                cluster_id=cluster.cluster_id, replica_id=2, epoch=view.leader_epoch
            )
            for name, value in fields.items():
                setattr(request, name, value)
            await pb_grpc.RaftQuorumStub(channel).Fetch(request, timeout=5)

    async def vote(address: str, **fields: object) -> None:
        async with grpc.aio.insecure_channel(address) as channel:
            request = pb.VoteRequest(cluster_id=cluster.cluster_id, **fields)  # type: ignore[arg-type]
            await pb_grpc.RaftQuorumStub(channel).Vote(request, timeout=5)

    async def write(address: str, records: list[bytes], cluster_id: str) -> None:
        async with grpc.aio.insecure_channel(address) as channel:
            request = pb.WriteRequest(cluster_id=cluster_id, records=records)
            await pb_grpc.QuorumLogStub(channel).Write(request, timeout=5)

    before = cluster.describe(leader.node_id)

    code, error, _ = call_error(fetch(leader.address, cluster_id="not-this-cluster"))
    assert (code, error) == (grpc.StatusCode.FAILED_PRECONDITION, ErrorCode.INCONSISTENT_CLUSTER_ID)

    code, error, _ = call_error(fetch(leader.address, fetch_offset=-5))
    assert (code, error) == (grpc.StatusCode.INVALID_ARGUMENT, ErrorCode.INVALID_REQUEST)

    code, error, meta = call_error(fetch(leader.address, epoch=max(0, view.leader_epoch - 1)))
    if view.leader_epoch > 0:
        assert (code, error) == (grpc.StatusCode.FAILED_PRECONDITION, ErrorCode.FENCED_LEADER_EPOCH)
        assert meta["leader_id"] == str(view.leader_id)

    code, error, _ = call_error(
        vote(leader.address, candidate_epoch=view.leader_epoch + 5, candidate_id=42)
    )
    assert (code, error) == (grpc.StatusCode.FAILED_PRECONDITION, ErrorCode.INCONSISTENT_VOTER_SET)

    code, error, meta = call_error(write(follower.address, [noop(b"x")], cluster.cluster_id))
    assert (code, error) == (grpc.StatusCode.FAILED_PRECONDITION, ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert meta["leader_id"] == str(view.leader_id)
    assert meta["leader_address"] == leader.address

    code, error, _ = call_error(write(leader.address, [], cluster.cluster_id))
    assert (code, error) == (grpc.StatusCode.INVALID_ARGUMENT, ErrorCode.INVALID_REQUEST)

    code, error, _ = call_error(write(leader.address, [noop(b"x")], "someone-else"))
    assert (code, error) == (grpc.StatusCode.FAILED_PRECONDITION, ErrorCode.INCONSISTENT_CLUSTER_ID)

    # Raw writes land in the metadata log every replica applies: only NoOp records.
    topic = encode(wrap(topic=md.TopicRecord(name="sneaky", topic_id="AAAAAAAAAAAAAAAAAAAAAA")))
    for record in (b"not a record", topic):
        code, error, _ = call_error(write(leader.address, [record], cluster.cluster_id))
        assert (code, error) == (grpc.StatusCode.INVALID_ARGUMENT, ErrorCode.INVALID_RECORD)

    after = cluster.describe(leader.node_id)
    assert (after.leader_epoch, after.leader_id) == (before.leader_epoch, before.leader_id)
    assert after.log_end_offset == before.log_end_offset


def test_health_reflection_and_metrics(cluster: Cluster) -> None:
    view = cluster.wait_for_leader()
    proc = cluster.procs[view.leader_id]
    cluster.write(3)

    async def probe() -> tuple[int, list[str]]:
        async with grpc.aio.insecure_channel(proc.address) as channel:
            health = await health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=""), timeout=5
            )
            stub = reflection_pb2_grpc.ServerReflectionStub(channel)
            names: list[str] = []
            async for answer in stub.ServerReflectionInfo(
                iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=5
            ):
                names = [s.name for s in answer.list_services_response.service]
            return health.status, names

    status, names = run(probe())
    assert status == health_pb2.HealthCheckResponse.SERVING
    assert {
        "quorum.raft.v1.RaftQuorum",
        "quorum.raft.v1.QuorumLog",
        "grpc.health.v1.Health",
    } <= set(names)
    metrics = proc.metrics()
    assert metrics["quorum_raft_current_leader"] == view.leader_id
    assert metrics['quorum_raft_current_state{state="leader"}'] == 1
    assert metrics["quorum_raft_high_watermark"] >= 4
    assert metrics["quorum_raft_current_epoch"] == view.leader_epoch
    assert metrics["quorum_raft_commit_latency_seconds_count"] >= 3
    for name in (
        "quorum_raft_log_end_offset",
        "quorum_raft_elections_total",
        "quorum_raft_election_latency_seconds_count",
        "quorum_raft_snapshots_total",
        "quorum_raft_latest_snapshot_offset",
    ):
        assert name in metrics, name
    followers = [str(i) for i in cluster.procs if i != view.leader_id]
    for replica in followers:
        assert f'quorum_raft_follower_lag_records{{replica="{replica}"}}' in metrics
        assert f'quorum_raft_follower_lag_seconds{{replica="{replica}"}}' in metrics
        assert metrics[f'quorum_raft_fetch_requests_total{{replica="{replica}"}}'] > 0


def test_an_observer_follows_the_log_and_never_votes(tmp_path: Path) -> None:
    c = Cluster.create(tmp_path, voters=3, observers=1)
    c.start()
    try:
        view = c.wait_for_leader([1, 2, 3])
        offsets = c.write(10)
        c.wait_until(lambda: digests_agree(c, [1, 2, 3, 4], offsets[-1] + 1), what="observer")
        leader_view = c.describe(view.leader_id)
        assert [o.replica_id for o in leader_view.observers] == [4]
        assert 4 not in {v.replica_id for v in leader_view.current_voters}
        observer = c.describe(4)
        assert observer.role in ("follower", "unattached") and observer.leader_id == view.leader_id
    finally:
        c.stop_all()


def test_refuses_to_start_unformatted_or_for_another_node(tmp_path: Path) -> None:
    c = Cluster.create(tmp_path, voters=1)
    meta = c.procs[1].data_dir / "meta.properties"
    meta.unlink()
    c.start(1)
    assert c.wait_exit(1) == 1
    assert "meta.properties" in c.procs[1].log_text() or "format" in c.procs[1].log_text()
    c.procs[1].popen = None
    c.format(1)
    text = meta.read_text().replace("node.id=1", "node.id=7")
    meta.write_text(text)
    c.start(1)
    assert c.wait_exit(1) == 1
    assert "7" in c.procs[1].log_text()
