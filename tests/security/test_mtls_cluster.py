"""Three controllers and two brokers over mTLS: the quorum elects, the brokers go
ONLINE, quorumctl works with the operator's certificate, and a client without
one (or with one from another CA) reaches nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from quorum.common.channels import open_channel
from quorum.common.local_ca import LocalCa
from quorum.gen import admin_pb2 as api
from quorum.gen import raft_pb2 as pb
from quorum.gen import raft_pb2_grpc as pb_grpc
from tests.integration.controller_cluster import Cluster, quorumctl, run
from tests.security.secure_cluster import add_mtls_brokers, client_settings, create_mtls_cluster

BROKERS = (101, 102)


@pytest.fixture(scope="module")
def ca() -> LocalCa:
    return LocalCa("mtls cluster CA")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, ca: LocalCa) -> Iterator[Cluster]:
    c = create_mtls_cluster(Path(tmp_path_factory.mktemp("mtls")), ca)
    c.start()
    try:
        c.wait_for_leader(timeout_s=30)
        add_mtls_brokers(c, ca, *BROKERS, broker__heartbeat__interval__ms="500")
        c.start_brokers()
        yield c
    finally:
        c.stop_all()


def _brokers_online(cluster: Cluster) -> bool:
    reply = cluster.call("admin", "DescribeCluster", api.DescribeClusterRequest())
    states = {b.broker_id: b.state for b in reply.brokers}
    return all(states.get(b) == "ONLINE" for b in BROKERS)


def test_the_quorum_elects_and_brokers_go_online_over_mtls(cluster: Cluster) -> None:
    leader = cluster.wait_for_leader()
    assert leader.role == "leader"
    assert {r.replica_id for r in leader.current_voters} == {1, 2, 3}
    cluster.wait_until(lambda: _brokers_online(cluster), 30, "brokers ONLINE over mTLS")
    for proc in cluster.procs.values():
        assert "listening on SSL (ssl.client.auth=required)" in proc.log_text()


def _describe(address: str, tls: object) -> pb.DescribeQuorumResponse:
    async def go() -> pb.DescribeQuorumResponse:
        channel = open_channel(address, tls=tls)  # type: ignore[arg-type]
        try:
            stub = pb_grpc.RaftQuorumStub(channel)
            return await stub.DescribeQuorum(pb.DescribeQuorumRequest(), timeout=2)
        finally:
            await channel.close()

    return run(go())


def test_a_plaintext_client_is_refused_by_every_controller(cluster: Cluster) -> None:
    for proc in cluster.procs.values():
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            _describe(proc.address, None)
        assert refused.value.code() in (
            grpc.StatusCode.UNAVAILABLE,
            grpc.StatusCode.DEADLINE_EXCEEDED,
        )


def test_a_certificate_from_another_ca_is_refused(cluster: Cluster, tmp_path: Path) -> None:
    foreign = client_settings(LocalCa("another CA").write(tmp_path, "mallory"))
    trusting = type(foreign)(
        certificate_chain=foreign.certificate_chain,
        private_key=foreign.private_key,
        ca=(cluster.root / "certs" / "ca.pem").read_bytes(),  # trusts the cluster
    )
    with pytest.raises(grpc.aio.AioRpcError):
        _describe(cluster.procs[1].address, trusting)
    # The same call with the cluster's own client certificate goes through.
    assert _describe(cluster.procs[1].address, cluster.client_tls).node_id == 1


def test_quorumctl_works_with_the_operators_certificate(cluster: Cluster) -> None:
    certs = cluster.root / "certs"
    bootstrap = ",".join(cluster.voter_addresses())
    tls = [
        "--ssl-ca-location", str(certs / "ca.pem"),
        "--ssl-certificate-location", str(certs / "admin.pem"),
        "--ssl-key-location", str(certs / "admin.key"),
    ]  # fmt: skip
    status = quorumctl("quorum", "describe", "--status", "--bootstrap-controller", bootstrap, *tls)
    assert status.returncode == 0, status.stderr
    assert "LeaderId:" in status.stdout
    # Replicas need unfenced brokers: this test may run before the one that waits for them.
    cluster.wait_until(lambda: _brokers_online(cluster), 60, "brokers ONLINE over mTLS")
    created = quorumctl(
        "topics", "create", "secure-orders", "--partitions", "2", "--replication-factor", "2",
        "--bootstrap-controller", bootstrap, *tls,
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    listed = quorumctl("topics", "list", "--bootstrap-controller", bootstrap, *tls)
    assert "secure-orders" in listed.stdout
