"""A read-only stand-in for the Kubernetes API server, on loopback.

No cluster is available on these machines, but the chart reads the installed
release through helm's `lookup` (the voter set on the controllers' StatefulSet,
the cluster id in its Secret), and `helm template --dry-run=server` runs that
code for real only against an API server. This one answers the requests helm
makes for it: the version, the API resource lists of the kinds looked up, and
GETs of objects the test put there (objects the chart itself rendered, as a
real install would have stored them). Everything else is 404. It also serves
Nodes, for the broker init container's rack lookup.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

KINDS = {  # kind: (group/version path, plural, namespaced), every kind the chart renders
    "Secret": ("api/v1", "secrets", True),
    "ConfigMap": ("api/v1", "configmaps", True),
    "Service": ("api/v1", "services", True),
    "ServiceAccount": ("api/v1", "serviceaccounts", True),
    "Node": ("api/v1", "nodes", False),
    "StatefulSet": ("apis/apps/v1", "statefulsets", True),
    "PodDisruptionBudget": ("apis/policy/v1", "poddisruptionbudgets", True),
    "ClusterRole": ("apis/rbac.authorization.k8s.io/v1", "clusterroles", False),
    "ClusterRoleBinding": ("apis/rbac.authorization.k8s.io/v1", "clusterrolebindings", False),
    "ServiceMonitor": ("apis/monitoring.coreos.com/v1", "servicemonitors", True),
}


class KubeApiDouble:
    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self.objects: dict[str, dict[str, Any]] = {}
        self.requests: list[str] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def put(self, obj: dict[str, Any]) -> None:
        """Store `obj` where a GET of it would find it."""
        group, plural, namespaced = KINDS[obj["kind"]]
        name = obj["metadata"]["name"]
        if namespaced:
            path = f"/{group}/namespaces/{self.namespace}/{plural}/{name}"
        else:
            path = f"/{group}/{plural}/{name}"
        self.objects[path] = obj

    def kubeconfig(self, directory: Path) -> Path:
        path = directory / "kubeconfig"
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "double", "cluster": {"server": self.url}}],
            "users": [{"name": "double", "user": {}}],
            "contexts": [
                {
                    "name": "double",
                    "context": {"cluster": "double", "user": "double", "namespace": self.namespace},
                }
            ],
            "current-context": "double",
        }
        path.write_text(json.dumps(config))
        return path

    def _resource_lists(self) -> dict[str, dict[str, Any]]:
        lists: dict[str, dict[str, Any]] = {}
        for kind, (group, plural, namespaced) in KINDS.items():
            group_version = group.removeprefix("api/").removeprefix("apis/")
            entry = lists.setdefault(
                f"/{group}",
                {
                    "kind": "APIResourceList",
                    "apiVersion": "v1",
                    "groupVersion": group_version,
                    "resources": [],
                },
            )
            entry["resources"].append(
                {
                    "name": plural,
                    "singularName": kind.lower(),
                    "namespaced": namespaced,
                    "kind": kind,
                    "verbs": ["get", "list"],
                }
            )
        return lists

    def _collections(self) -> dict[str, str]:
        """Namespaced collection paths and their kinds; nothing is ever listed."""
        found = {}
        for kind, (group, plural, namespaced) in KINDS.items():
            if namespaced:
                found[f"/{group}/namespaces/{self.namespace}/{plural}"] = kind
        return found

    def _group_list(self) -> dict[str, Any]:
        groups: dict[str, list[str]] = {}
        for group, _, _ in KINDS.values():
            if group.startswith("apis/"):
                name, _, version = group.removeprefix("apis/").partition("/")
                groups.setdefault(name, []).append(version)
        return {
            "kind": "APIGroupList",
            "apiVersion": "v1",
            "groups": [
                {
                    "name": name,
                    "versions": [{"groupVersion": f"{name}/{v}", "version": v} for v in versions],
                    "preferredVersion": {
                        "groupVersion": f"{name}/{versions[0]}",
                        "version": versions[0],
                    },
                }
                for name, versions in groups.items()
            ],
        }

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        double = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.partition("?")[0]
                double.requests.append(path)
                body: Any = None
                if path == "/version":
                    body = {"major": "1", "minor": "32", "gitVersion": "v1.32.0"}
                elif path == "/api":
                    body = {"kind": "APIVersions", "versions": ["v1"]}
                elif path == "/apis":
                    body = double._group_list()
                elif path in double._resource_lists():
                    body = double._resource_lists()[path]
                elif path in double._collections():  # a list (helm's release history)
                    body = {"kind": f"{double._collections()[path]}List", "apiVersion": "v1",
                            "items": [], "metadata": {"resourceVersion": "1"}}  # fmt: skip
                elif path in double.objects:
                    body = double.objects[path]
                if body is None:
                    self._send(404, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                     "reason": "NotFound", "code": 404})  # fmt: skip
                else:
                    self._send(200, body)

            def _send(self, code: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler

    def __enter__(self) -> KubeApiDouble:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


@contextmanager
def kube_api(namespace: str) -> Iterator[KubeApiDouble]:
    with KubeApiDouble(namespace) as double:
        yield double
