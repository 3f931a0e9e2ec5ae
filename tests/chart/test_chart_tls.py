"""The chart's TLS values, run for real: `tls.enabled=true` with a Secret whose
certificate comes from a local CA (named as the README asks a cert-manager
certificate to be: the pods' headless DNS names, the metrics Service, and here
127.0.0.1, which the loopback rewrite dials).

The rendered controllers and broker start over mTLS with the rendered ssl.*
keys; the rendered exec probes (the kubelet's gRPC probe cannot speak TLS) pass
on ready pods, and the same probes in the clear fail, as does the kubelet's
plaintext gRPC health check; the brokers' metrics are HTTPS with client
certificates; `quorumctl` in a pod works with the pod's environment alone.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from chart_pods import Deployment, container, deploy, exec_probe, health_status
from chart_render import NAMESPACE, config_map, one, properties, render
from controller_cluster import run

from quorum.common.channels import open_channel
from quorum.common.local_ca import LocalCa
from quorum.common.tls import TlsSettings
from quorum.controller.api_errors import ApiError
from quorum.gen import admin_pb2 as api
from quorum.gen import raft_pb2 as raft_pb
from quorum.gen import raft_pb2_grpc as raft_grpc
from quorum.rpc.wire_errors import wire_error

pytestmark = pytest.mark.slow

FULLNAME = "kq-kraft-quorum"
CONTROLLER_PRINCIPAL = f"User:CN={FULLNAME}-controller"
VALUES: dict[str, Any] = {
    "tls": {
        "enabled": True,
        "secretName": "kq-tls",
        "clientAuth": "required",
        "controllerSecretName": "kq-controller-tls",
        "controllerPrincipal": CONTROLLER_PRINCIPAL,
    },
    "metrics": {"tls": {"enabled": True, "clientAuth": "required"}},
    "brokers": {"replicas": 1},
}
SANS = (
    f"*.{FULLNAME}-controller-headless.{NAMESPACE}.svc.cluster.local",
    f"*.{FULLNAME}-broker-headless.{NAMESPACE}.svc.cluster.local",
    f"{FULLNAME}-metrics.{NAMESPACE}.svc",
)


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    ca = LocalCa("chart TLS CA")
    certificate, key = ca.issue(FULLNAME, dns_names=SANS, ip_addresses=("127.0.0.1",))
    ctl_cert, ctl_key = ca.issue(
        f"{FULLNAME}-controller", dns_names=SANS, ip_addresses=("127.0.0.1",)
    )
    secrets = {
        "kq-tls": {"tls.crt": certificate, "tls.key": key, "ca.crt": ca.ca_pem()},
        "kq-controller-tls": {"tls.crt": ctl_cert, "tls.key": ctl_key, "ca.crt": ca.ca_pem()},
    }
    with deploy(VALUES, tmp_path_factory.mktemp("chart-tls"), secrets) as running:
        running.cluster.client_tls = TlsSettings(
            certificate_chain=certificate, private_key=key, ca=ca.ca_pem()
        )
        yield running


def without_tls(c: dict[str, Any], probe: str) -> dict[str, Any]:
    """The same container with its probe's `--tls DIR` taken away (a plaintext probe)."""
    command = c[probe]["exec"]["command"]
    assert command[-2] == "--tls"
    return {**c, probe: {**c[probe], "exec": {"command": command[:-2]}}}


def test_the_rendered_properties_turn_on_tls_for_every_listener() -> None:
    config = config_map(render(VALUES))
    controller, broker = (
        properties(config["controller.properties"]),
        properties(config["broker.properties"]),
    )
    for props in (controller, broker):
        assert props["ssl.certificate.location"] == "/etc/kraft-quorum-tls/tls.crt"
        assert props["ssl.key.location"] == "/etc/kraft-quorum-tls/tls.key"
        assert props["ssl.ca.location"] == "/etc/kraft-quorum-tls/ca.crt"
        assert props["metrics.listener"] == "https://:9090"
        assert props["metrics.listener.ssl.client.auth"] == "required"
    assert controller["listener.security.protocol.map"] == "CONTROLLER:SSL"
    assert controller["ssl.client.auth"] == "required"
    assert controller["controller.quorum.voter.principals"] == ";".join(
        f"{n}@{CONTROLLER_PRINCIPAL}" for n in (1, 2, 3)
    )
    assert "controller.quorum.voter.principals" not in broker
    assert broker["listener.security.protocol.map"] == "SSL:SSL,CONTROLLER:SSL"


def test_the_service_monitor_scrapes_over_https() -> None:
    values = {**VALUES, "metrics": {**VALUES["metrics"], "serviceMonitor": {"enabled": True}}}
    monitor = one(render(values), "ServiceMonitor", FULLNAME)
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["scheme"] == "https"
    assert endpoint["tlsConfig"] == {
        "ca": {"secret": {"name": "kq-tls", "key": "ca.crt"}},
        "cert": {"secret": {"name": "kq-tls", "key": "tls.crt"}},
        "keySecret": {"name": "kq-tls", "key": "tls.key"},
        "serverName": f"{FULLNAME}-metrics.{NAMESPACE}.svc",
    }


def test_a_leader_is_elected_over_mtls_and_the_tls_probes_pass(secured: Deployment) -> None:
    cluster = secured.cluster
    assert cluster.wait_for_leader(timeout_s=45).leader_id in cluster.procs
    main = container(secured.rendered.controllers, "controller")
    assert "grpc" not in main["readinessProbe"]  # the kubelet's probe cannot speak TLS
    for pod in secured.controllers:
        env, rewrite = secured.envs[pod.name], secured.rewrites[pod.name]
        cluster.wait_until(
            lambda env=env, rewrite=rewrite: exec_probe(main, "readinessProbe", env, rewrite) == 0,
            timeout_s=20,
            what=f"{pod.name} readiness command",
        )
        assert exec_probe(main, "livenessProbe", env, rewrite) == 0


def test_plaintext_probes_fail_against_a_ready_controller(secured: Deployment) -> None:
    cluster = secured.cluster
    cluster.wait_for_leader(timeout_s=45)
    main = container(secured.rendered.controllers, "controller")
    pod = secured.controllers[0]
    env, rewrite = secured.envs[pod.name], secured.rewrites[pod.name]
    cluster.wait_until(
        lambda: exec_probe(main, "readinessProbe", env, rewrite) == 0, 20, "ready over TLS"
    )
    for probe in ("readinessProbe", "livenessProbe"):
        assert exec_probe(without_tls(main, probe), probe, env, rewrite) == 1
    with pytest.raises(grpc.RpcError) as refused:  # what the kubelet's gRPC probe would ask
        health_status(f"127.0.0.1:{pod.port}")
    assert refused.value.code() is grpc.StatusCode.UNAVAILABLE


def test_the_broker_is_online_and_its_https_probes_pass(secured: Deployment) -> None:
    cluster = secured.cluster
    main = container(secured.rendered.brokers, "broker")
    (pod,) = secured.brokers
    env, rewrite = secured.envs[pod.name], secured.rewrites[pod.name]
    cluster.wait_until(
        lambda: exec_probe(main, "readinessProbe", env, rewrite) == 0,
        timeout_s=45,
        what="broker ONLINE (HTTPS metrics, client certificate)",
    )
    assert exec_probe(main, "livenessProbe", env, rewrite) == 0
    for probe in ("readinessProbe", "livenessProbe"):
        assert exec_probe(without_tls(main, probe), probe, env, rewrite) == 1
    registered = cluster.call(
        "admin", "DescribeCluster", api.DescribeClusterRequest(), deadline_s=10
    )
    assert [b.state for b in registered.brokers] == ["ONLINE"]


def test_quorumctl_in_a_pod_needs_no_tls_flags(secured: Deployment) -> None:
    secured.cluster.wait_for_leader(timeout_s=45)
    pod = secured.controllers[0]
    env = secured.envs[pod.name]
    assert env["QUORUMCTL_SSL_CA_LOCATION"].endswith("/ca.crt")
    result = subprocess.run(
        ["quorumctl", "quorum", "describe", "--status"],
        env=env, capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "CurrentVoters:" in result.stdout


@pytest.mark.expected_log_errors(r"quorum\.server\.refusals: refused Vote: User:CN=\S+ may not")
def test_the_brokers_certificate_cannot_speak_for_a_voter(secured: Deployment) -> None:
    """The controllers hold a Secret of their own: the brokers' certificate (the
    test client's) claiming a voter id is refused, and the epoch does not move."""
    cluster = secured.cluster
    leader = cluster.wait_for_leader(timeout_s=45)
    follower = next(n for n in cluster.procs if n != leader.leader_id)
    request = raft_pb.VoteRequest(
        cluster_id=cluster.cluster_id,
        candidate_epoch=leader.leader_epoch + 1,
        candidate_id=leader.leader_id,
        last_offset_epoch=leader.leader_epoch,
        last_offset=2**40,
    )

    async def vote() -> grpc.aio.AioRpcError:
        channel = open_channel(cluster.procs[follower].address, tls=cluster.client_tls)
        try:
            await raft_grpc.RaftQuorumStub(channel).Vote(request, timeout=10)
        except grpc.aio.AioRpcError as err:
            return err
        finally:
            await channel.close()
        raise AssertionError("a broker's certificate voted as a controller")

    refused = wire_error(run(vote()))
    assert refused.error is ApiError.CLUSTER_AUTHORIZATION_FAILED
    assert f"User:CN={FULLNAME} may not speak for voter {leader.leader_id}" in refused.message
    assert cluster.describe(follower).leader_epoch == leader.leader_epoch
