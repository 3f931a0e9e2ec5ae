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

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest
from chart_render import NAMESPACE, Doc, cluster_id, config_map, container, name, one, render
from grpc_health.v1 import health_pb2, health_pb2_grpc
from kube_api_double import KubeApiDouble, kube_api

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
from controller_cluster import BIN, Cluster, Proc, free_port

from quorum.gen import admin_pb2 as api

pytestmark = pytest.mark.slow

VALUES = {"brokers": {"rack": {"enabled": True, "topologyKey": "topology.kubernetes.io/zone"}}}
ZONES = ("zone-a", "zone-b", "zone-c")
MOUNTS = ("/etc/kraft-quorum", "/var/run/kraft-quorum", "/var/lib/kraft-quorum", "/tmp")
# (the scripts name no path under /tmp; HOME points the pod's /tmp there instead)


@dataclass
class Pod:
    """One pod of a StatefulSet, on loopback."""

    statefulset: str
    ordinal: int
    root: Path
    port: int = field(default_factory=free_port)
    metrics_port: int = field(default_factory=free_port)

    @property
    def name(self) -> str:
        return f"{self.statefulset}-{self.ordinal}"

    @property
    def node_name(self) -> str:
        return f"node-{self.ordinal}"

    def path(self, mount: str) -> Path:
        return self.root / self.name / mount.strip("/").replace("/", "_")


class Rewrite:
    """Pod-world strings to loopback ones, for one pod."""

    def __init__(self, pod: Pod, controllers: list[Pod], domain: str, role_port: int) -> None:
        self.pairs: list[tuple[str, str]] = [(m, str(pod.path(m))) for m in MOUNTS[:3]]
        for c in controllers:
            self.pairs.append((f"{c.name}.{domain}:{role_port}", f"127.0.0.1:{c.port}"))
        self.pairs += [
            (f"CONTROLLER://:{role_port}", f"CONTROLLER://127.0.0.1:{pod.port}"),
            (f"127.0.0.1:{role_port}", f"127.0.0.1:{pod.port}"),
            ("http://:9090", f"http://127.0.0.1:{pod.metrics_port}"),
            ("http://127.0.0.1:9090", f"http://127.0.0.1:{pod.metrics_port}"),
        ]

    def __call__(self, text: str) -> str:
        """One pass, longest match first, so a replacement is never rewritten again."""
        table = dict(self.pairs)
        pattern = "|".join(re.escape(old) for old in sorted(table, key=len, reverse=True))
        return re.sub(pattern, lambda m: table[m.group(0)], text)


@dataclass
class Rendered:
    docs: list[Doc]
    cluster_id: str
    config: dict[str, str]
    controllers: Doc
    brokers: Doc


def pod_env(c: Doc, pod: Pod, rendered: Rendered, kube: KubeApiDouble) -> dict[str, str]:
    """The container's environment as the kubelet resolves it, plus this machine's PATH."""
    env = {
        "PATH": f"{BIN}:{os.environ['PATH']}",
        "HOME": str(pod.path("/tmp")),
        "KUBERNETES_SERVICE_HOST": "127.0.0.1",  # as the kubelet sets it; the
        "KRAFT_QUORUM_KUBE_API": kube.url,  # plain-HTTP stand-in answers instead
    }
    for var in c.get("env", []):
        source = var.get("valueFrom")
        if source is None:
            env[var["name"]] = var["value"]
        elif "fieldRef" in source:
            field_path = source["fieldRef"]["fieldPath"]
            env[var["name"]] = {"metadata.name": pod.name, "spec.nodeName": pod.node_name}[
                field_path
            ]
        else:
            ref = source["secretKeyRef"]
            assert ref["name"] == name("cluster-id") and ref["key"] == "cluster.id"
            env[var["name"]] = rendered.cluster_id
    return env


def materialise(pod: Pod, rewrite: Rewrite, rendered: Rendered) -> None:
    """The pod's volumes: the ConfigMap's files (rewritten), an empty run dir and data volume."""
    for mount in MOUNTS:
        pod.path(mount).mkdir(parents=True, exist_ok=True)
    for key, text in rendered.config.items():
        (pod.path("/etc/kraft-quorum") / key).write_text(rewrite(text))


def run_init(c: Doc, env: dict[str, str], rewrite: Rewrite) -> subprocess.CompletedProcess[str]:
    command = [rewrite(part) for part in [*c["command"], *c["args"]]]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)


def start_main(c: Doc, env: dict[str, str], rewrite: Rewrite, log: Path) -> subprocess.Popen[bytes]:
    command = [rewrite(part) for part in [*c["command"], *c["args"]]]
    with log.open("ab") as out:
        return subprocess.Popen(
            command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def exec_probe(c: Doc, probe: str, env: dict[str, str], rewrite: Rewrite) -> int:
    command = [rewrite(part) for part in c[probe]["exec"]["command"]]
    timeout = c[probe]["timeoutSeconds"]
    return subprocess.run(command, env=env, capture_output=True, timeout=timeout).returncode


def health_status(address: str) -> str:
    """What the kubelet's gRPC readiness probe asks: Check(service="")."""
    with grpc.insecure_channel(address) as channel:
        reply = health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service=""), timeout=3
        )
    return health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)


@dataclass
class Deployment:
    rendered: Rendered
    cluster: Cluster
    controllers: list[Pod]
    brokers: list[Pod]
    rewrites: dict[str, Rewrite]
    envs: dict[str, dict[str, str]]
    kube: KubeApiDouble


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    root = tmp_path_factory.mktemp("chart-pods")
    docs = render(VALUES)
    rendered = Rendered(
        docs,
        cluster_id(docs),
        config_map(docs),
        one(docs, "StatefulSet", name("controller")),
        one(docs, "StatefulSet", name("broker")),
    )
    domain = f"{rendered.controllers['spec']['serviceName']}.{NAMESPACE}.svc.cluster.local"
    port = container(rendered.controllers, "controller")["ports"][0]["containerPort"]
    controllers = [
        Pod(name("controller"), i, root) for i in range(rendered.controllers["spec"]["replicas"])
    ]
    brokers = [Pod(name("broker"), i, root) for i in range(rendered.brokers["spec"]["replicas"])]
    cluster = Cluster(root, rendered.cluster_id)
    rewrites: dict[str, Rewrite] = {}
    envs: dict[str, dict[str, str]] = {}
    with kube_api(NAMESPACE) as kube:
        for pod, zone in zip(brokers, ZONES, strict=True):
            kube.put(
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {
                        "name": pod.node_name,
                        "labels": {"topology.kubernetes.io/zone": zone},
                    },
                }
            )
        try:
            for pods, statefulset, role in (
                (controllers, rendered.controllers, "controller"),
                (brokers, rendered.brokers, "broker"),
            ):
                for pod in pods:
                    rewrite = Rewrite(pod, controllers, domain, port)
                    rewrites[pod.name] = rewrite
                    materialise(pod, rewrite, rendered)
                    init = container(statefulset, "format", init=True)
                    result = run_init(init, pod_env(init, pod, rendered, kube), rewrite)
                    assert result.returncode == 0, result.stdout + result.stderr
                    assert "Formatting" in result.stdout
                    main = container(statefulset, role)
                    env = envs[pod.name] = pod_env(main, pod, rendered, kube)
                    config = pod.path("/var/run/kraft-quorum") / f"{role}.properties"
                    node_id = int(re.findall(r"^node\.id=(\d+)$", config.read_text(), re.M)[-1])
                    proc = Proc(
                        node_id, pod.port, pod.metrics_port, config,
                        pod.path("/var/lib/kraft-quorum") / "metadata", root / f"{pod.name}.log",
                    )  # fmt: skip
                    (cluster.procs if role == "controller" else cluster.brokers)[node_id] = proc
                    # As on Kubernetes, nothing waits for anything: every pod starts
                    # as soon as its init container is done.
                    proc.popen = start_main(main, env, rewrite, proc.log_file)
            yield Deployment(rendered, cluster, controllers, brokers, rewrites, envs, kube)
        finally:
            cluster.stop_all()


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
    for pod, zone, broker_id in zip(deployment.brokers, ZONES, (101, 102, 103), strict=True):
        assert brokers[broker_id].rack == zone
        assert brokers[broker_id].host == f"{pod.name}.{headless}.{NAMESPACE}.svc.cluster.local"
        assert brokers[broker_id].port == 9092
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


def test_sigterm_ends_brokers_cleanly_within_their_grace_period(deployment: Deployment) -> None:
    """Runs last in this module: it stops the brokers (controllers stay up)."""
    grace = deployment.rendered.brokers["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    brokers = list(deployment.cluster.brokers.values())
    started = time.monotonic()
    for proc in brokers:
        assert proc.popen is not None and proc.alive()
        proc.popen.send_signal(signal.SIGTERM)
    for proc in brokers:
        assert proc.popen is not None
        code = proc.popen.wait(max(1.0, grace - (time.monotonic() - started)))
        assert code == 0, proc.log_text()


def test_sigterm_lets_the_leader_resign_within_its_grace_period(deployment: Deployment) -> None:
    """Runs after the brokers stopped: the leader hands over with EndQuorumEpoch and
    exits cleanly in time, and the other two voters elect a successor."""
    cluster = deployment.cluster
    spec = deployment.rendered.controllers["spec"]["template"]["spec"]
    leader = cluster.wait_for_leader(timeout_s=30).leader_id
    popen = cluster.procs[leader].popen
    assert popen is not None
    popen.send_signal(signal.SIGTERM)
    assert popen.wait(spec["terminationGracePeriodSeconds"]) == 0, cluster.logs()
    survivors = [n for n in cluster.procs if n != leader]
    assert cluster.wait_for_leader(among=survivors, timeout_s=30).leader_id in survivors
