"""Upgrades read the installed release through helm's `lookup`: controllers.replicas
changes the voter set through the voter-change Jobs (KIP-853), the voters the
release was installed with are kept, a release of an older chart keeps its static
voters, and the cluster id is kept.

`helm template --dry-run=server --is-upgrade` renders exactly what `helm upgrade`
would, lookups included, against an API server; with no cluster here, that is a
loopback stand-in (tests/chart/kube_api_double.py) holding the objects the chart
rendered for the installed release.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from chart_render import (
    NAMESPACE,
    Doc,
    cluster_id,
    config_map,
    name,
    one,
    properties,
    render,
    template,
)
from kube_api_double import KubeApiDouble, kube_api

INSTALLED = {"controllers": {"replicas": 3}}


@pytest.fixture
def installed(tmp_path: Path) -> Iterator[tuple[KubeApiDouble, dict[str, str]]]:
    """An API server holding a release installed with 3 controllers."""
    docs = render(INSTALLED)
    with kube_api(NAMESPACE) as api:
        for doc in docs:
            if doc["kind"] in ("StatefulSet", "Secret", "ConfigMap"):
                api.put(doc)
        yield api, {"KUBECONFIG": str(api.kubeconfig(tmp_path))}


def upgrade(values: dict[str, Any], env: dict[str, str]) -> Any:
    return template(values, extra=["--dry-run=server", "--is-upgrade"], env=env)


def legacy(api: KubeApiDouble) -> None:
    """Make the installed release one of an older chart: static voters (kraft.version 0)."""
    docs = render(INSTALLED)
    sts = one(docs, "StatefulSet", name("controller"))
    for key in ("kraft-quorum/kraft-version", "kraft-quorum/initial-voter-ids"):
        del sts["metadata"]["annotations"][key]
    api.put(sts)


def jobs(docs: list[Doc]) -> dict[str, Doc]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == "Job"}


def job_voters(job: Doc) -> list[str]:
    command = job["spec"]["template"]["spec"]["containers"][0]["command"]
    return command[command.index("--voters") + 1].split(",")


@pytest.mark.parametrize("replicas", [5, 3])
def test_scaling_controllers_renders_the_voter_change_jobs(
    installed: tuple[KubeApiDouble, dict[str, str]], replicas: int
) -> None:
    """3 -> 5 (or 3 -> 3): the pods' properties keep the initial voters (no pod
    changes for them), the StatefulSet says which those were, the Jobs get every
    pod of the new size, and the install-only bootstrap ConfigMap is gone."""
    _, env = installed
    result = upgrade({"controllers": {"replicas": replicas}}, env)
    assert result.returncode == 0, result.stderr
    docs = [d for d in yaml.safe_load_all(result.stdout) if d]
    sts = one(docs, "StatefulSet", name("controller"))
    assert sts["spec"]["replicas"] == replicas
    annotations = sts["metadata"]["annotations"]
    assert annotations["kraft-quorum/initial-voter-ids"] == "1,2,3"
    assert annotations["kraft-quorum/kraft-version"] == "1"
    voters = properties(config_map(docs)["controller.properties"])["controller.quorum.voters"]
    assert [e.partition("@")[0] for e in voters.split(",")] == ["1", "2", "3"]
    assert not [d for d in docs if d["metadata"]["name"] == f"{name('bootstrap')}"]
    # Growing or the same size: no pre-upgrade Job (it would hold every upgrade up
    # while the quorum has no leader); the post-upgrade Job gets every pod.
    found = jobs(docs)
    assert set(found) == {name("voters-reconcile")}
    job = found[name("voters-reconcile")]
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "post-install,post-upgrade"
    ids = [v.partition("@")[0] for v in job_voters(job)]
    assert ids == [str(n) for n in range(1, replicas + 1)]


def test_shrinking_renders_the_pre_upgrade_removal(tmp_path: Path) -> None:
    docs = render({"controllers": {"replicas": 5}})
    with kube_api(NAMESPACE) as api:
        api.put(one(docs, "StatefulSet", name("controller")))
        env = {"KUBECONFIG": str(api.kubeconfig(tmp_path))}
        result = upgrade({"controllers": {"replicas": 3}}, env)
        assert result.returncode == 0, result.stderr
        found = jobs([d for d in yaml.safe_load_all(result.stdout) if d])
        assert found[name("voters-remove")]["metadata"]["annotations"]["helm.sh/hook"] == (
            "pre-upgrade"
        )
        for job in found.values():
            assert [v.partition("@")[0] for v in job_voters(job)] == ["1", "2", "3"]
        off = upgrade({"controllers": {"replicas": 3}, "voterChanges": {"enabled": False}}, env)
        assert off.returncode == 0, off.stderr
        assert not jobs([d for d in yaml.safe_load_all(off.stdout) if d])


def test_changing_the_node_id_base_is_refused(
    installed: tuple[KubeApiDouble, dict[str, str]],
) -> None:
    _, env = installed
    result = upgrade({"controllers": {"replicas": 3, "nodeIdBase": 11}}, env)
    assert result.returncode != 0, result.stdout[:2000]
    assert "controllers.nodeIdBase=11" in result.stderr
    assert "would renumber every voter at once" in result.stderr


@pytest.mark.parametrize("replicas", [5, 3])
def test_a_release_of_an_older_chart_keeps_its_static_voters(
    installed: tuple[KubeApiDouble, dict[str, str]], replicas: int
) -> None:
    api, env = installed
    legacy(api)
    values = {"controllers": {"replicas": replicas, "nodeIdBase": 1 if replicas == 5 else 11}}
    result = upgrade(values, env)
    assert result.returncode != 0, result.stdout[:2000]
    old, new = "1,2,3", ("1,2,3,4,5" if replicas == 5 else "11,12,13")
    assert f"this upgrade would change the voter set from node ids {old} to {new}" in result.stderr
    assert "installed by an older chart with static voters" in result.stderr
    assert "could elect two leaders" in result.stderr
    assert "controllers.allowVoterChange=true" in result.stderr
    assert f"/apis/apps/v1/namespaces/{NAMESPACE}/statefulsets/{name('controller')}" in (
        api.requests
    )
    # Upgrades that keep its voters render as before: static voters, no Jobs.
    kept = upgrade({"controllers": {"replicas": 3}}, env)
    assert kept.returncode == 0, kept.stderr
    docs = [d for d in yaml.safe_load_all(kept.stdout) if d]
    assert not jobs(docs)
    sts = one(docs, "StatefulSet", name("controller"))
    assert "kraft-quorum/kraft-version" not in sts["metadata"]["annotations"]
    init = sts["spec"]["template"]["spec"]["initContainers"][0]
    assert {"name": "KRAFT_VERSION", "value": "0"} in init["env"]


def test_voter_change_of_an_older_release_renders_when_explicitly_allowed(
    installed: tuple[KubeApiDouble, dict[str, str]],
) -> None:
    api, env = installed
    legacy(api)
    result = upgrade({"controllers": {"replicas": 5, "allowVoterChange": True}}, env)
    assert result.returncode == 0, result.stderr
    assert 'kraft-quorum/voter-ids: "1,2,3,4,5"' in result.stdout


def test_upgrades_that_keep_the_voters_render(
    installed: tuple[KubeApiDouble, dict[str, str]],
) -> None:
    _, env = installed
    result = upgrade({"brokers": {"replicas": 7}, "controllers": {"logLevel": "DEBUG"}}, env)
    assert result.returncode == 0, result.stderr


def test_cluster_id_of_the_installed_release_is_kept(tmp_path: Path) -> None:
    """An id found in the release's Secret wins over the derived one, so a release
    installed by another chart version (or with clusterId, later dropped) keeps it."""
    docs = render()
    secret: Doc = one(docs, "Secret", f"{name('cluster-id')}")
    kept = "J8iyX0bCRYmvK5QWpWQ5Zg"
    assert kept != cluster_id(docs)
    secret["data"]["cluster.id"] = base64.b64encode(kept.encode()).decode()
    with kube_api(NAMESPACE) as api:
        api.put(secret)
        env = {"KUBECONFIG": str(api.kubeconfig(tmp_path))}
        upgraded = render(extra=["--dry-run=server", "--is-upgrade"], env=env)
    assert cluster_id(upgraded) == kept


def test_first_install_finds_nothing_and_renders(tmp_path: Path) -> None:
    with kube_api(NAMESPACE) as api:
        env = {"KUBECONFIG": str(api.kubeconfig(tmp_path))}
        docs = render({"controllers": {"replicas": 5}}, extra=["--dry-run=server"], env=env)
    assert one(docs, "StatefulSet", name("controller"))["spec"]["replicas"] == 5
    assert cluster_id(docs) == cluster_id(render())
