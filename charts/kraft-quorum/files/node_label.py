"""Print one label of the Kubernetes node this pod runs on (for broker.rack).

    node_label.py NODE_NAME LABEL

The downward API cannot expose node labels, so the broker's init container asks
the API server with the pod's service account (the chart binds it to a
ClusterRole that may get nodes). A node without the label is an error: rack-aware
placement only applies when every broker has a rack, and a silent gap would
quietly turn it off.
"""

from __future__ import annotations

import json
import os
import ssl
import sys
import urllib.parse
import urllib.request

ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"


def api_base() -> str:
    """The API server the kubelet told the pod about (KRAFT_QUORUM_KUBE_API overrides)."""
    override = os.environ.get("KRAFT_QUORUM_KUBE_API")
    if override:
        return override.rstrip("/")
    host = os.environ["KUBERNETES_SERVICE_HOST"]
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    return f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"


def node_label(node: str, label: str) -> str:
    base = api_base()
    request = urllib.request.Request(f"{base}/api/v1/nodes/{urllib.parse.quote(node)}")
    context = None
    if base.startswith("https:"):
        context = ssl.create_default_context(cafile=f"{ACCOUNT}/ca.crt")
        with open(f"{ACCOUNT}/token", encoding="ascii") as token:
            request.add_header("Authorization", f"Bearer {token.read().strip()}")
    with urllib.request.urlopen(request, timeout=10, context=context) as reply:
        labels = json.load(reply).get("metadata", {}).get("labels") or {}
    if label not in labels:
        raise LookupError(f"node {node} has no label {label}")
    return str(labels[label])


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(f"usage: {argv[0]} NODE_NAME LABEL", file=sys.stderr)
        return 2
    try:
        print(node_label(argv[1], argv[2]))
    except (OSError, LookupError, KeyError, ValueError) as err:
        print(f"cannot read label {argv[2]} of node {argv[1]}: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
