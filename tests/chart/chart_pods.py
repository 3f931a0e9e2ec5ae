"""The rendered chart's pods, run on loopback for the process tests.

helm renders the chart; from the parsed objects come the ConfigMap's properties
files and scripts, the cluster id Secret, and every container's command,
arguments, environment and probes. Only what a pod has and this machine does
not is rewritten: the controllers' DNS names become 127.0.0.1 with a free port
each (a pod has its own IP, so all of them listen on 9093 there), the metrics
port likewise, and the pod's mount paths (the TLS Secret's too) become
temporary directories. Environment values are expanded as the kubelet does
(``$(POD_NAME)``).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from chart_render import NAMESPACE, Doc, cluster_id, config_map, container, name, one, render
from grpc_health.v1 import health_pb2, health_pb2_grpc
from kube_api_double import KubeApiDouble, kube_api
from process_logs import watch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
from controller_cluster import BIN, Cluster, Proc, free_port

ZONES = ("zone-a", "zone-b", "zone-c")
MOUNTS = ("/etc/kraft-quorum", "/var/run/kraft-quorum", "/var/lib/kraft-quorum", "/tmp")
TLS_MOUNT = "/etc/kraft-quorum-tls"
# The controllers' optional bootstrap ConfigMap (the initial voters; install renders only).
BOOTSTRAP_MOUNT = "/etc/kraft-quorum-bootstrap"
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
        self.pod = pod
        self.broker_domain = domain.replace(name("controller"), name("broker"), 1)
        self.pairs: list[tuple[str, str]] = [
            (m, str(pod.path(m))) for m in (*MOUNTS[:3], TLS_MOUNT, BOOTSTRAP_MOUNT)
        ]
        for c in controllers:
            self.pairs.append((f"{c.name}.{domain}:{role_port}", f"127.0.0.1:{c.port}"))
        self.pairs += [
            (f"CONTROLLER://:{role_port}", f"CONTROLLER://127.0.0.1:{pod.port}"),
            (f"127.0.0.1:{role_port}", f"127.0.0.1:{pod.port}"),
        ]
        for scheme in ("http", "https"):
            self.pairs += [
                (f"{scheme}://:9090", f"{scheme}://127.0.0.1:{pod.metrics_port}"),
                (f"{scheme}://127.0.0.1:9090", f"{scheme}://127.0.0.1:{pod.metrics_port}"),
            ]

    def serve_kafka(self, port: int) -> None:
        """A broker pod's Kafka listener: bound on this pod's loopback port and
        advertised there (the init script writes the pod's DNS name after
        `${POD_NAME}`, which this pod's rewrite turns into loopback)."""
        for scheme in ("PLAINTEXT", "SSL"):
            self.pairs.append((f"{scheme}://:{port}", f"{scheme}://127.0.0.1:{self.pod.port}"))
        self.pairs.append(
            (f"${{POD_NAME}}.{self.broker_domain}:{port}", f"127.0.0.1:{self.pod.port}")
        )

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
    # The TLS Secrets' keys, by Secret name (each pod mounts its StatefulSet's).
    tls_secrets: Mapping[str, Mapping[str, bytes]] = field(default_factory=dict)


def pod_env(
    c: Doc, pod: Pod, rendered: Rendered, kube: KubeApiDouble, rewrite: Rewrite | None = None
) -> dict[str, str]:
    """The container's environment as the kubelet resolves it (``$(VAR)`` of the
    variables before), its paths `rewrite`n, plus this machine's PATH."""
    env = {
        "PATH": f"{BIN}:{os.environ['PATH']}",
        "HOME": str(pod.path("/tmp")),
        "KUBERNETES_SERVICE_HOST": "127.0.0.1",  # as the kubelet sets it; the
        "KRAFT_QUORUM_KUBE_API": kube.url,  # plain-HTTP stand-in answers instead
    }
    for var in c.get("env", []):
        source = var.get("valueFrom")
        if source is None:
            value = re.sub(r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)), var["value"])
            env[var["name"]] = rewrite(value) if rewrite else value
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
    statefulset = (
        rendered.controllers if pod.name.startswith(name("controller")) else rendered.brokers
    )
    volumes = {v["name"]: v for v in statefulset["spec"]["template"]["spec"]["volumes"]}
    if "bootstrap" in volumes:  # optional: the ConfigMap's files when it is rendered
        bootstrap = pod.path(BOOTSTRAP_MOUNT)
        shutil.rmtree(bootstrap, ignore_errors=True)
        bootstrap.mkdir(parents=True)
        wanted = volumes["bootstrap"]["configMap"]["name"]
        for doc in rendered.docs:
            if doc["kind"] == "ConfigMap" and doc["metadata"]["name"] == wanted:
                for key, text in doc["data"].items():
                    (bootstrap / key).write_text(rewrite(text))
    if "tls" in volumes:
        files = rendered.tls_secrets[volumes["tls"]["secret"]["secretName"]]
        pod.path(TLS_MOUNT).mkdir(parents=True, exist_ok=True)
        for key, data in files.items():
            (pod.path(TLS_MOUNT) / key).write_bytes(data)


def run_init(c: Doc, env: dict[str, str], rewrite: Rewrite) -> subprocess.CompletedProcess[str]:
    command = [rewrite(part) for part in [*c["command"], *c.get("args", [])]]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)


def start_main(c: Doc, env: dict[str, str], rewrite: Rewrite, log: Path) -> subprocess.Popen[bytes]:
    command = [rewrite(part) for part in [*c["command"], *c.get("args", [])]]
    watch(log)
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


@contextmanager
def deploy(
    values: Mapping[str, Any],
    root: Path,
    tls_secrets: Mapping[str, Mapping[str, bytes]] | None = None,
) -> Iterator[Deployment]:
    """Every pod of the rendered chart started as the kubelet would start it: the
    init container's script, then the main container's command (stopped after)."""
    docs = render(values)
    rendered = Rendered(
        docs,
        cluster_id(docs),
        config_map(docs),
        one(docs, "StatefulSet", name("controller")),
        one(docs, "StatefulSet", name("broker")),
        dict(tls_secrets or {}),
    )
    domain = f"{rendered.controllers['spec']['serviceName']}.{NAMESPACE}.svc.cluster.local"
    port = container(rendered.controllers, "controller")["ports"][0]["containerPort"]
    broker_ports = container(rendered.brokers, "broker")["ports"]
    broker_port = next(p["containerPort"] for p in broker_ports if p["name"] == "kafka")
    controllers = [
        Pod(name("controller"), i, root) for i in range(rendered.controllers["spec"]["replicas"])
    ]
    brokers = [Pod(name("broker"), i, root) for i in range(rendered.brokers["spec"]["replicas"])]
    cluster = Cluster(root, rendered.cluster_id)
    rewrites: dict[str, Rewrite] = {}
    envs: dict[str, dict[str, str]] = {}
    with kube_api(NAMESPACE) as kube:
        for i, pod in enumerate(brokers):
            kube.put(
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {
                        "name": pod.node_name,
                        "labels": {"topology.kubernetes.io/zone": ZONES[i % len(ZONES)]},
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
                    if role == "broker":
                        rewrite.serve_kafka(broker_port)
                    rewrites[pod.name] = rewrite
                    materialise(pod, rewrite, rendered)
                    init = container(statefulset, "format", init=True)
                    result = run_init(init, pod_env(init, pod, rendered, kube, rewrite), rewrite)
                    assert result.returncode == 0, result.stdout + result.stderr
                    assert "Formatting" in result.stdout
                    main = container(statefulset, role)
                    env = envs[pod.name] = pod_env(main, pod, rendered, kube, rewrite)
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
