"""The chart's configuration runs: the product started exactly as the rendered pods
would start it.

helm renders the chart; from the parsed objects the test takes the ConfigMap's
properties files and scripts, the cluster id Secret, and every container's
command, arguments, environment and probes. It rewrites only what a pod has and
this machine does not: the controllers' DNS names become 127.0.0.1 with a free
port each (a pod has its own IP, so all of them listen on 9093 there), the
metrics port likewise, and the pod's mount paths become temporary directories.
Then, for each pod, it runs the init container's script for real (node.id from
the ordinal, the rack from the node's label through an API server, `quorumctl
storage format`), starts the main container's command, and checks what the
kubelet would: a leader is elected, every controller's health service says
SERVING (the readiness probe), the liveness and broker readiness commands pass,
the brokers reach ONLINE with their racks and DNS names, `quorumctl` works with
the pods' QUORUMCTL_BOOTSTRAP, a restarted pod's init step is a no-op, and
SIGTERM ends every broker cleanly within its terminationGracePeriodSeconds.
"""

from __future__ import annotations

import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from chart_pods import (
    ZONES,
    Deployment,
    container,
    deploy,
    exec_probe,
    health_status,
    pod_env,
    run_init,
)
from chart_render import NAMESPACE
from controller_cluster import Cluster

from quorum.gen import admin_pb2 as api

pytestmark = pytest.mark.slow

VALUES = {"brokers": {"rack": {"enabled": True, "topologyKey": "topology.kubernetes.io/zone"}}}


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    with deploy(VALUES, tmp_path_factory.mktemp("chart-pods")) as running:
        yield running


@pytest.fixture
def own_deployment(tmp_path: Path) -> Iterator[Deployment]:
    """A deployment of its own, for a test that stops its pods: the module's stays
    up for the others, whatever order they run in."""
    with deploy(VALUES, tmp_path) as running:
        yield running


def stop_brokers_with_sigterm(deployment: Deployment) -> None:
    """Every broker ONLINE first, then SIGTERM to all: each exits 0 within the
    broker pods' terminationGracePeriodSeconds."""
    cluster = deployment.cluster
    cluster.wait_until(
        lambda: [b.state for _, b in sorted(describe_brokers(cluster).items())] == ["ONLINE"] * 3,
        timeout_s=45,
        what="brokers ONLINE",
    )
    grace = deployment.rendered.brokers["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    brokers = list(cluster.brokers.values())
    started = time.monotonic()
    for proc in brokers:
        assert proc.popen is not None and proc.alive()
        proc.popen.send_signal(signal.SIGTERM)
    for proc in brokers:
        assert proc.popen is not None
        code = proc.popen.wait(max(1.0, grace - (time.monotonic() - started)))
        assert code == 0, proc.log_text()


def test_node_ids_follow_the_pod_ordinals(deployment: Deployment) -> None:
    assert sorted(deployment.cluster.procs) == [1, 2, 3]
    assert sorted(deployment.cluster.brokers) == [101, 102, 103]


def test_a_leader_is_elected_and_every_controller_is_ready(deployment: Deployment) -> None:
    cluster = deployment.cluster
    view = cluster.wait_for_leader(timeout_s=30)
    assert view.leader_id in cluster.procs
    assert sorted(v.replica_id for v in view.current_voters) == [1, 2, 3]
    for pod in deployment.controllers:
        cluster.wait_until(
            lambda pod=pod: health_status(f"127.0.0.1:{pod.port}") == "SERVING",
            timeout_s=15,
            what=f"{pod.name} ready",
        )


def test_liveness_command_passes_on_every_controller(deployment: Deployment) -> None:
    main = container(deployment.rendered.controllers, "controller")
    for pod in deployment.controllers:
        env, rewrite = deployment.envs[pod.name], deployment.rewrites[pod.name]
        assert exec_probe(main, "livenessProbe", env, rewrite) == 0


def describe_brokers(cluster: Cluster) -> dict[int, Any]:
    reply = cluster.call("admin", "DescribeCluster", api.DescribeClusterRequest(), deadline_s=5)
    return {b.broker_id: b for b in reply.brokers}


def test_brokers_reach_online_with_racks_and_pod_names(deployment: Deployment) -> None:
    cluster = deployment.cluster

    def all_online() -> bool:
        brokers = describe_brokers(cluster)
        return sorted(brokers) == [101, 102, 103] and all(
            b.state == "ONLINE" for b in brokers.values()
        )

    cluster.wait_until(all_online, timeout_s=45, what="brokers ONLINE")
    brokers = describe_brokers(cluster)
    headless = deployment.rendered.brokers["spec"]["serviceName"]
    # Each pod binds every interface and advertises its DNS name (which this
    # loopback stand-in for the pod network rewrites to the pod's own port).
    script = "\n".join(container(deployment.rendered.brokers, "format", init=True)["args"])
    assert 'echo "listeners=PLAINTEXT://:9092"' in script
    advertised = f"PLAINTEXT://${{POD_NAME}}.{headless}.{NAMESPACE}.svc.cluster.local:9092"
    assert f'echo "advertised.listeners={advertised}"' in script
    for pod, zone, broker_id in zip(deployment.brokers, ZONES, (101, 102, 103), strict=True):
        assert brokers[broker_id].rack == zone
        assert (brokers[broker_id].host, brokers[broker_id].port) == ("127.0.0.1", pod.port)
    assert {f"/api/v1/nodes/{p.node_name}" for p in deployment.brokers} <= set(
        deployment.kube.requests
    )
    main = container(deployment.rendered.brokers, "broker")
    for pod in deployment.brokers:
        env, rewrite = deployment.envs[pod.name], deployment.rewrites[pod.name]
        cluster.wait_until(
            lambda env=env, rewrite=rewrite: exec_probe(main, "readinessProbe", env, rewrite) == 0,
            timeout_s=15,
            what=f"{pod.name} readiness command",
        )


def test_quorumctl_in_a_pod_reads_the_quorum_status(deployment: Deployment) -> None:
    # Run first in the module, this test once found the pods just started, no
    # election held yet, and quorumctl rightly said so (a clean-clone CI run).
    deployment.cluster.wait_for_leader(timeout_s=30)
    pod = deployment.controllers[0]
    env = deployment.envs[pod.name]
    bootstrap = env["QUORUMCTL_BOOTSTRAP"]
    env = {**env, "QUORUMCTL_BOOTSTRAP": deployment.rewrites[pod.name](bootstrap)}
    assert env["QUORUMCTL_BOOTSTRAP"] == ",".join(
        f"127.0.0.1:{p.port}" for p in deployment.controllers
    )
    result = subprocess.run(
        ["quorumctl", "quorum", "describe", "--status"],
        env=env, capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert re.search(r"LeaderId:\s+[123]\b", result.stdout), result.stdout
    assert re.search(r"CurrentVoters:\s+\[1,2,3\]", result.stdout), result.stdout
    for other_id, code in ((deployment.rendered.cluster_id, 0), ("J8iyX0bCRYmvK5QWpWQ5Zg", 1)):
        checked = subprocess.run(
            ["quorumctl", "quorum", "describe", "--status", "--cluster-id", other_id],
            env=env, capture_output=True, text=True, timeout=30,
        )  # fmt: skip
        assert checked.returncode == code, checked.stdout + checked.stderr
    assert "INCONSISTENT_CLUSTER_ID" in checked.stderr


def test_a_restarted_pods_init_step_is_a_no_op(deployment: Deployment) -> None:
    pod = deployment.controllers[1]
    init = container(deployment.rendered.controllers, "format", init=True)
    env = pod_env(init, pod, deployment.rendered, deployment.kube)
    result = run_init(init, env, deployment.rewrites[pod.name])
    assert result.returncode == 0, result.stderr
    assert "is already formatted with cluster.id" in result.stdout


def test_sigterm_ends_brokers_cleanly_within_their_grace_period(
    own_deployment: Deployment,
) -> None:
    """On a deployment of its own: it stops the brokers (controllers stay up)."""
    stop_brokers_with_sigterm(own_deployment)


def test_sigterm_lets_the_leader_resign_within_its_grace_period(
    own_deployment: Deployment,
) -> None:
    """On a deployment of its own, with the brokers stopped first: the leader hands
    over with EndQuorumEpoch and exits cleanly in time, and the other two voters
    elect a successor."""
    deployment = own_deployment
    stop_brokers_with_sigterm(deployment)
    cluster = deployment.cluster
    spec = deployment.rendered.controllers["spec"]["template"]["spec"]
    leader = cluster.wait_for_leader(timeout_s=30).leader_id
    popen = cluster.procs[leader].popen
    assert popen is not None
    popen.send_signal(signal.SIGTERM)
    assert popen.wait(spec["terminationGracePeriodSeconds"]) == 0, cluster.logs()
    survivors = [n for n in cluster.procs if n != leader]
    assert cluster.wait_for_leader(among=survivors, timeout_s=30).leader_id in survivors
