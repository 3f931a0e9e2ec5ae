"""The chart scales its controllers 3 -> 5 -> 3 and replaces a lost volume, on real
processes started as the rendered pods and Jobs would start them.

The release is rendered by helm as `helm install` would (the install-only
bootstrap ConfigMap included), then as `helm upgrade` would (`--dry-run=server
--is-upgrade` against the loopback API server holding the installed
StatefulSet, so the chart's lookups run). Each controller pod runs its init
script (files/controller_format.sh, from the ConfigMap) and its command, with
the pods' names and paths rewritten to loopback as in chart_pods.py; each hook
Job's command (files/voters.py with quorumctl) runs with its rendered
environment. Under a stream of writes: install with three, upgrade to five (no
pre-upgrade Job when growing; pods 3 and 4 format as observers; the
post-upgrade Job adds them), lose controller 2's volume (its pod formats a new
directory as an observer and its init step removes the old entry; the Job adds
the new one),
upgrade back to three (the pre-upgrade Job removes 5 and 4 while their pods
still run, then they stop). Every acknowledged write is then in every live
controller's log at its offset. Not simulated: the rolling restart the
upgrades give the three first pods (their environment names the new pods).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from chart_pods import Pod, Rendered, Rewrite, materialise, pod_env, run_init, start_main
from chart_render import NAMESPACE, Doc, cluster_id, config_map, container, name, one, render
from chart_render import template as helm_template
from controller_cluster import Cluster, Proc
from kube_api_double import KubeApiDouble, kube_api
from voters_under_writes import Writer, check_acknowledged, voters, wait_caught_up

pytestmark = pytest.mark.slow


def values(replicas: int) -> dict[str, Any]:
    return {"controllers": {"replicas": replicas}, "brokers": {"replicas": 0}}


def rendered_of(docs: list[Doc]) -> Rendered:
    return Rendered(
        docs,
        cluster_id(docs),
        config_map(docs),
        one(docs, "StatefulSet", name("controller")),
        one(docs, "StatefulSet", name("broker")),
    )


class Release:
    """The rendered release and its controller pods on loopback (five known up front,
    so every pod's rewrite knows every controller's DNS name)."""

    def __init__(self, root: Path, kube: KubeApiDouble) -> None:
        self.root = root
        self.kube = kube
        self.pods = [Pod(name("controller"), i, root) for i in range(5)]
        self.rendered = rendered_of(render(values(3)))  # what `helm install` renders
        self.cluster = Cluster(root, self.rendered.cluster_id)
        sts = self.rendered.controllers
        self.domain = f"{sts['spec']['serviceName']}.{NAMESPACE}.svc.cluster.local"
        self.port = container(sts, "controller")["ports"][0]["containerPort"]

    def rewrite(self, pod: Pod) -> Rewrite:
        return Rewrite(pod, self.pods, self.domain, self.port)

    def upgrade(self, replicas: int) -> None:
        """Render as `helm upgrade` would, the installed StatefulSet looked up."""
        self.kube.put(self.rendered.controllers)
        env = {"KUBECONFIG": str(self.kube.kubeconfig(self.root))}
        done = helm_template(values(replicas), extra=["--dry-run=server", "--is-upgrade"], env=env)
        assert done.returncode == 0, done.stderr
        self.rendered = rendered_of([d for d in yaml.safe_load_all(done.stdout) if d])

    def start(self, ordinal: int) -> str:
        """The pod's init container, then its controller; the init's output."""
        pod = self.pods[ordinal]
        rewrite = self.rewrite(pod)
        materialise(pod, rewrite, self.rendered)  # the bootstrap file only at install
        sts = self.rendered.controllers
        init = container(sts, "format", init=True)
        result = run_init(init, pod_env(init, pod, self.rendered, self.kube, rewrite), rewrite)
        assert result.returncode == 0, result.stdout + result.stderr
        main = container(sts, "controller")
        config = pod.path("/var/run/kraft-quorum") / "controller.properties"
        node_id = int(re.findall(r"^node\.id=(\d+)$", config.read_text(), re.M)[-1])
        proc = Proc(
            node_id, pod.port, pod.metrics_port, config,
            pod.path("/var/lib/kraft-quorum") / "metadata", self.root / f"{pod.name}.log",
        )  # fmt: skip
        self.cluster.procs[node_id] = proc
        env = pod_env(main, pod, self.rendered, self.kube, rewrite)
        proc.popen = start_main(main, env, rewrite, proc.log_file)
        return result.stdout

    def stop(self, ordinal: int) -> None:
        node_id = ordinal + 1
        self.cluster.kill(node_id, sig=15)
        self.cluster.wait_exit(node_id, 30)

    def job(self, phase: str) -> str:
        """The hook Job's container, run to completion; its output."""
        job = one(self.rendered.docs, "Job", name(f"voters-{phase}"))
        c = job["spec"]["template"]["spec"]["containers"][0]
        rewrite = self.rewrite(self.pods[0])
        env = pod_env(c, self.pods[0], self.rendered, self.kube, rewrite)
        env.update(VOTERS_DEADLINE_S="120", VOTERS_PAUSE_S="0.3")
        done = subprocess.run(
            [rewrite(part) for part in c["command"]],
            env=env, capture_output=True, text=True, timeout=180, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr + self.cluster.logs()
        return done.stdout

    def voters(self) -> dict[int, str]:
        return voters(self.cluster, timeout_s=60)

    def directory_id(self, ordinal: int) -> str:
        meta = self.pods[ordinal].path("/var/lib/kraft-quorum") / "metadata" / "meta.properties"
        return dict(line.split("=", 1) for line in meta.read_text().splitlines() if "=" in line)[
            "directory.id"
        ]

    def roles(self, ordinal: int) -> str:
        config = self.pods[ordinal].path("/var/run/kraft-quorum") / "controller.properties"
        return re.findall(r"^process\.roles=(\w+)$", config.read_text(), re.M)[-1]


@pytest.fixture
def release(tmp_path: Path) -> Iterator[Release]:
    with kube_api(NAMESPACE) as kube:
        running = Release(tmp_path, kube)
        try:
            yield running
        finally:
            running.cluster.stop_all()


def test_scale_3_to_5_to_3_and_replace_a_lost_volume_under_writes(release: Release) -> None:
    for ordinal in range(3):
        assert "Formatting" in release.start(ordinal)
    initial = {n + 1: release.directory_id(n) for n in range(3)}
    assert release.voters() == initial
    assert [release.roles(n) for n in range(3)] == ["controller"] * 3
    release.job("reconcile")  # post-install: nothing to change
    assert release.voters() == initial

    with Writer(release.cluster, prefix=b"chart", pause_s=0.02) as writer:
        writer.wait_for_more()

        # helm upgrade --set controllers.replicas=5
        release.upgrade(5)
        jobs = {d["metadata"]["name"] for d in release.rendered.docs if d["kind"] == "Job"}
        assert jobs == {name("voters-reconcile")}  # no pre-upgrade removal when growing
        release.start(3)
        release.start(4)
        assert [release.roles(n) for n in (3, 4)] == ["broker", "broker"]  # observers
        out = release.job("reconcile")
        assert "add-controller --controller-id 4" in out and "--controller-id 5" in out, out
        five = {**initial, 4: release.directory_id(3), 5: release.directory_id(4)}
        assert release.voters() == five
        writer.wait_for_more()

        # Controller 2's volume is lost: its pod formats a new directory as an observer.
        release.stop(1)
        shutil.rmtree(release.pods[1].path("/var/lib/kraft-quorum"))
        release.pods[1].path("/var/lib/kraft-quorum").mkdir()
        out = release.start(1)
        replaced = release.directory_id(1)
        assert replaced != initial[2]
        assert release.roles(1) == "broker"
        # Its init step removed the old entry before the process started, so the
        # new process never took that entry for its own.
        assert f"controller 2 has a new directory ({initial[2]} -> {replaced})" in out, out
        assert release.voters() == {n: d for n, d in five.items() if n != 2}
        out = release.job("reconcile")
        assert "add-controller --controller-id 2" in out, out
        assert release.voters() == {**five, 2: replaced}
        writer.wait_for_more()

        # helm upgrade --set controllers.replicas=3: voters 5 and 4 removed first.
        release.upgrade(3)
        out = release.job("remove")
        assert "remove-controller --controller-id 5" in out
        assert "remove-controller --controller-id 4" in out
        release.stop(4)
        release.stop(3)
        release.job("reconcile")
        assert release.voters() == {1: initial[1], 2: replaced, 3: initial[3]}
        writer.wait_for_more()

    cluster = release.cluster
    final = cluster.wait_for_leader(timeout_s=60)
    wait_caught_up(cluster, (1, 2, 3), final)
    check_acknowledged(cluster, writer, (1, 2, 3), final, logs_agree=False)
