"""Upgrades read the installed release through helm's `lookup`: the voter set may
not change (static voters, no dynamic membership yet) and the cluster id is kept.

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
from chart_render import NAMESPACE, Doc, cluster_id, name, one, render, template
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


@pytest.mark.parametrize("replicas", [5, 3])
def test_changing_the_voter_set_is_refused(
    installed: tuple[KubeApiDouble, dict[str, str]], replicas: int
) -> None:
    api, env = installed
    values = {"controllers": {"replicas": replicas, "nodeIdBase": 1 if replicas == 5 else 11}}
    result = upgrade(values, env)
    assert result.returncode != 0, result.stdout[:2000]
    old, new = "1,2,3", ("1,2,3,4,5" if replicas == 5 else "11,12,13")
    assert f"this upgrade would change the voter set from node ids {old} to {new}" in result.stderr
    assert "needs dynamic membership (KIP-853)" in result.stderr
    assert "could elect two leaders" in result.stderr
    assert "controllers.allowVoterChange=true" in result.stderr
    assert f"/apis/apps/v1/namespaces/{NAMESPACE}/statefulsets/{name('controller')}" in (
        api.requests
    )


def test_voter_change_renders_when_explicitly_allowed(
    installed: tuple[KubeApiDouble, dict[str, str]],
) -> None:
    _, env = installed
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
