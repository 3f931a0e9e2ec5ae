"""Issue 27's reproduction on real processes: an outsider who reaches the controller
ports sends Vote, BeginQuorumEpoch and EndQuorumEpoch claiming to be each of the
other voters, at epochs from current+5 up to the int32 edge, to every node. Then
the leader is killed with SIGKILL: a new leader must be elected and a write
commit, and the epoch must have moved by no more than
`controller.quorum.max.epoch.jump`.

Before the fix the quorum ended at MAX_EPOCH and, once its leader died, never
elected again. In plaintext the core's leader stickiness and epoch bound stop it;
under mTLS a claimed voter id must also be the sender's certificate
(CLUSTER_AUTHORIZATION_FAILED otherwise)."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from quorum.common.channels import open_channel
from quorum.common.local_ca import LocalCa
from quorum.common.tls import TlsSettings
from quorum.controller.api_errors import ApiError
from quorum.gen import raft_pb2 as pb
from quorum.gen import raft_pb2_grpc as pb_grpc
from quorum.raft.messages import MAX_EPOCH, ErrorCode
from quorum.rpc.wire_errors import wire_error
from tests.integration.controller_cluster import Cluster, run, running_cluster
from tests.security.secure_cluster import client_settings, create_mtls_cluster

pytestmark = [
    pytest.mark.slow,
    # Each forged request refused is an ERROR line by design (quorum.server.refusals).
    pytest.mark.expected_log_errors(
        r"quorum\.server\.refusals: (refused \w+: |\d+ more such lines)"
    ),
]

DEFAULT_MAX_EPOCH_JUMP = 10_000


def forged_requests(
    cluster_id: str, target: int, claimed: int, epoch: int
) -> list[tuple[str, object]]:
    """Every request kind that could move `target`'s epoch, claiming voter `claimed`."""
    return [
        (
            "Vote",
            pb.VoteRequest(
                cluster_id=cluster_id,
                candidate_epoch=epoch,
                candidate_id=claimed,
                last_offset_epoch=min(epoch, MAX_EPOCH),
                last_offset=2**62,
            ),
        ),
        (
            "BeginQuorumEpoch",
            pb.BeginQuorumEpochRequest(
                cluster_id=cluster_id, leader_epoch=epoch, leader_id=claimed
            ),
        ),
        (
            "EndQuorumEpoch",
            pb.EndQuorumEpochRequest(
                cluster_id=cluster_id,
                leader_epoch=epoch,
                leader_id=claimed,
                preferred_successors=[target],
            ),
        ),
    ]


def send_forgeries(
    cluster: Cluster, epochs: list[int], tls: TlsSettings | None = None
) -> list[grpc.aio.AioRpcError | object]:
    """Every forged request to every node, claiming every other voter; the answers."""

    async def go() -> list[grpc.aio.AioRpcError | object]:
        answers: list[grpc.aio.AioRpcError | object] = []
        for target, proc in cluster.procs.items():
            channel = open_channel(proc.address, tls=tls)
            stub = pb_grpc.RaftQuorumStub(channel)
            try:
                for claimed in cluster.procs:
                    if claimed == target:
                        continue
                    for epoch in epochs:
                        for method, request in forged_requests(
                            cluster.cluster_id, target, claimed, epoch
                        ):
                            try:
                                answers.append(await getattr(stub, method)(request, timeout=10))
                            except grpc.aio.AioRpcError as err:
                                answers.append(err)
            finally:
                await channel.close()
        return answers

    return run(go())


def epochs_now(cluster: Cluster) -> dict[int, int]:
    views: dict[int, int] = {}

    def described() -> bool:
        for node_id, proc in cluster.procs.items():
            if proc.alive():
                views[node_id] = cluster.describe(node_id).leader_epoch
        return True

    cluster.wait_until(described, 30, "every live node described")
    return views


def leader_killed_and_replaced(cluster: Cluster) -> int:
    """SIGKILL the leader; a new one is elected and a write commits. The new epoch."""
    leader = cluster.wait_for_leader(timeout_s=30)
    cluster.kill(leader.leader_id, signal.SIGKILL)
    cluster.wait_exit(leader.leader_id)
    survivors = [n for n in cluster.procs if n != leader.leader_id]
    new = cluster.wait_for_leader(among=survivors, timeout_s=20)
    assert new.leader_id != leader.leader_id
    assert cluster.write(1)  # committed by the survivors
    return int(new.leader_epoch)


def refusals(cluster: Cluster, reason: str) -> float:
    total = 0.0
    for proc in cluster.procs.values():
        if not proc.alive():
            continue
        for name, value in proc.metrics().items():
            if name.startswith("quorum_raft_refused_requests_total") and reason in name:
                total += value
    return total


@pytest.fixture
def plaintext(tmp_path: Path) -> Iterator[Cluster]:
    with running_cluster(tmp_path) as cluster:
        yield cluster


def test_forged_requests_in_plaintext_cannot_wedge_the_quorum(plaintext: Cluster) -> None:
    cluster = plaintext
    start = max(epochs_now(cluster).values())
    answers = send_forgeries(cluster, [start + 5, MAX_EPOCH - 1, MAX_EPOCH, 2**31 - 1])

    errors = [wire_error(a) for a in answers if isinstance(a, grpc.aio.AioRpcError)]
    # Nothing reached gRPC's default handling: every refusal is a proper status.
    assert all(e.status is not grpc.StatusCode.UNKNOWN for e in errors), errors
    # 2^31-1 is refused at the edge, MAX_EPOCH-1 and MAX_EPOCH by the epoch bound.
    assert sum(e.error is ErrorCode.INVALID_REQUEST for e in errors) >= 3 * 3 * 2 * 3
    assert any("controller.quorum.max.epoch.jump" in e.message for e in errors)
    after = epochs_now(cluster)
    assert max(after.values()) - start <= DEFAULT_MAX_EPOCH_JUMP
    assert refusals(cluster, 'reason="epoch_jump"') > 0
    assert "refused Vote: claimed to come from node" in "".join(
        p.log_text() for p in cluster.procs.values()
    )

    epoch = leader_killed_and_replaced(cluster)
    assert epoch - start <= DEFAULT_MAX_EPOCH_JUMP
    assert epoch < MAX_EPOCH - DEFAULT_MAX_EPOCH_JUMP


@pytest.fixture(scope="module")
def ca() -> LocalCa:
    return LocalCa("forged raft messages CA")


@pytest.fixture
def mtls(tmp_path: Path, ca: LocalCa) -> Iterator[Cluster]:
    cluster = create_mtls_cluster(tmp_path, ca)
    cluster.start()
    try:
        cluster.wait_for_leader(timeout_s=30)
        yield cluster
    finally:
        cluster.stop_all()


def test_under_mtls_a_claimed_voter_must_be_the_senders_certificate(
    mtls: Cluster, ca: LocalCa
) -> None:
    cluster = mtls
    certs = cluster.root / "certs"
    before = epochs_now(cluster)
    leader = cluster.wait_for_leader().leader_id
    start = max(before.values())
    far = [start + 5, MAX_EPOCH - 1, MAX_EPOCH]
    for name in ("admin", "broker-101", "intruder"):
        outsider = client_settings(ca.write(certs, name))
        answers = send_forgeries(cluster, far, tls=outsider)
        assert answers and all(isinstance(a, grpc.aio.AioRpcError) for a in answers)
        for answer in answers:
            error = wire_error(answer)  # type: ignore[arg-type]
            assert error.status is grpc.StatusCode.PERMISSION_DENIED, error
            assert error.error is ApiError.CLUSTER_AUTHORIZATION_FAILED
            assert f"User:CN={name} may not speak for voter" in error.message
    assert epochs_now(cluster) == before
    assert cluster.wait_for_leader().leader_id == leader

    # A controller's own certificate may not claim another voter's id either.
    controller_1 = client_settings(ca.write(certs, "controller-1"))
    target = 3
    forged = forged_requests(cluster.cluster_id, target, claimed=2, epoch=start + 5)
    for method, request in forged:
        answer = call_one(cluster, target, method, request, controller_1)
        assert isinstance(answer, grpc.aio.AioRpcError)
        assert wire_error(answer).error is ApiError.CLUSTER_AUTHORIZATION_FAILED
    assert epochs_now(cluster) == before
    assert refusals(cluster, 'reason="identity"') > 0

    # As itself, far beyond the bound: the epoch bound refuses it too.
    for method, request in forged_requests(cluster.cluster_id, target, 1, MAX_EPOCH):
        answer = call_one(cluster, target, method, request, controller_1)
        assert isinstance(answer, grpc.aio.AioRpcError)
        assert wire_error(answer).error is ErrorCode.INVALID_REQUEST
    assert max(epochs_now(cluster).values()) - start <= DEFAULT_MAX_EPOCH_JUMP

    epoch = leader_killed_and_replaced(cluster)
    assert epoch - start <= DEFAULT_MAX_EPOCH_JUMP


def call_one(
    cluster: Cluster, target: int, method: str, request: object, tls: TlsSettings
) -> grpc.aio.AioRpcError | object:
    async def go() -> grpc.aio.AioRpcError | object:
        channel = open_channel(cluster.procs[target].address, tls=tls)
        try:
            return await getattr(pb_grpc.RaftQuorumStub(channel), method)(request, timeout=10)
        except grpc.aio.AioRpcError as err:
            return err
        finally:
            await channel.close()

    return run(go())
