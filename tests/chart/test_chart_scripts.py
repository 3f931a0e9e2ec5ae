"""The chart's own scripts (files/*.py, shipped in the ConfigMap) when things are wrong:
a probe must fail, not pass, and a missing rack label must stop the broker's init."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from chart_render import CHART, NAMESPACE
from kube_api_double import kube_api

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
from controller_cluster import BIN, free_port

FILES = CHART / "files"


def run(
    script: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(FILES / script), *args],
        capture_output=True, text=True, timeout=30, env={**os.environ, **(env or {})},
    )  # fmt: skip


def test_liveness_fails_when_nothing_answers() -> None:
    result = run("probe.py", "alive", f"127.0.0.1:{free_port()}")
    assert result.returncode == 1
    assert "no answer from the health service: UNAVAILABLE" in result.stdout


def test_broker_readiness_fails_without_metrics() -> None:
    result = run("probe.py", "broker-online", f"http://127.0.0.1:{free_port()}/metrics")
    assert result.returncode == 1


def test_probe_usage() -> None:
    assert run("probe.py", "ready").returncode == 2


def test_a_node_without_the_rack_label_stops_the_init_step() -> None:
    with kube_api(NAMESPACE) as api:
        api.put({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "labels": {}}})
        env = {"KRAFT_QUORUM_KUBE_API": api.url}
        missing = run("node_label.py", "n1", "topology.kubernetes.io/zone", env=env)
        unknown = run("node_label.py", "n2", "topology.kubernetes.io/zone", env=env)
    assert missing.returncode == 1
    assert "node n1 has no label topology.kubernetes.io/zone" in missing.stderr
    assert unknown.returncode == 1
    assert "HTTP Error 404" in unknown.stderr


def test_a_node_label_is_printed() -> None:
    with kube_api(NAMESPACE) as api:
        labels = {"example.com/rack": "r7"}
        api.put({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "labels": labels}})
        result = run(
            "node_label.py", "n1", "example.com/rack", env={"KRAFT_QUORUM_KUBE_API": api.url}
        )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "r7\n"


def test_the_voter_change_jobs_give_up_clearly_without_a_quorum() -> None:
    """Nothing answers: the Job (and an observer's init step) fails with the reason
    after its deadline, and changes nothing; the kubelet or the Job retries it."""
    env = {
        "PATH": f"{BIN}:{os.environ['PATH']}",
        "QUORUMCTL_BOOTSTRAP": f"127.0.0.1:{free_port()}",
        "VOTERS_DEADLINE_S": "0",
    }
    job = run("voters.py", "reconcile", "--voters", f"1@127.0.0.1:{free_port()}", env=env)
    assert job.returncode == 1, job.stdout + job.stderr
    assert "gave up after 0s: no active controller answered" in job.stderr
    retire = run("voters.py", "retire", "--node-id", "2", "--directory-id", "x", env=env)
    assert retire.returncode == 1
    assert "gave up after 0s: no active controller answered" in retire.stderr


def test_voter_change_usage() -> None:
    assert run("voters.py", "retire", "--node-id", "2").returncode == 2
    assert run("voters.py", "reconcile").returncode == 2
