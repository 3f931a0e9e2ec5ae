"""`helm lint --strict` and `helm template` over value sets, every manifest validated
offline against the Kubernetes OpenAPI schemas (kubernetes-validate, strict), and
values the chart must refuse with the schema's or the chart's own message."""

from __future__ import annotations

import json
from typing import Any

import kubernetes_validate
import pytest
import yaml
from chart_render import CHART, lint, of_kind, render, render_error

# Every value set is linted, rendered and validated.
VALUE_SETS: dict[str, dict[str, Any]] = {
    "default": {},
    "five-controllers": {"controllers": {"replicas": 5}},
    "tls": {
        "tls": {
            "enabled": True,
            "secretName": "kq-tls",
            "clientAuth": "required",
            "controllerPrincipal": "User:CN=kq-controller",
        }
    },
    "tls-metrics-mtls": {
        "tls": {"enabled": True, "secretName": "kq-tls", "clientAuth": "none"},
        "metrics": {"tls": {"clientAuth": "required"}, "serviceMonitor": {"enabled": True}},
    },
    "racks": {"brokers": {"rack": {"enabled": True, "topologyKey": "topology.kubernetes.io/zone"}}},
    "metrics-off": {"metrics": {"enabled": False}},
    "service-monitor": {
        "metrics": {"serviceMonitor": {"enabled": True, "labels": {"release": "p"}}}
    },
    "custom-resources": {
        "controllers": {
            "resources": {"requests": {"cpu": "2", "memory": "4Gi"}, "limits": {"memory": "8Gi"}},
            "persistence": {"size": "50Gi", "storageClass": "fast-ssd"},
        },
        "brokers": {
            "replicas": 6,
            "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"cpu": 1}},
        },
    },
    "scheduling-off": {
        "controllers": {
            "antiAffinity": "none",
            "topologySpread": {"enabled": False},
            "podDisruptionBudget": {"enabled": False},
        },
        "brokers": {"replicas": 0, "antiAffinity": "required"},
    },
    "tuned": {
        "image": {"repository": "registry.example/kraft-quorum", "tag": "1.2.3"},
        "imagePullSecrets": [{"name": "pull"}],
        "clusterId": "J8iyX0bCRYmvK5QWpWQ5Zg",
        "controllers": {
            "nodeIdBase": 0,
            "config": {
                "controller.quorum.election.timeout.ms": 1500,
                "metadata.snapshot.max.interval.ms": 3600000,
            },
            "nodeSelector": {"pool": "quorum"},
            "tolerations": [{"key": "quorum", "operator": "Exists", "effect": "NoSchedule"}],
            "priorityClassName": "system-cluster-critical",
            "podAnnotations": {"team": "platform"},
        },
        "brokers": {"config": {"broker.heartbeat.interval.ms": 1000}},
    },
}
KUBE_VERSIONS = ("1.27.0", "1.32.0")
CUSTOM_KINDS = {"ServiceMonitor"}  # a CRD: not in the Kubernetes schemas


@pytest.mark.parametrize("value_set", sorted(VALUE_SETS))
def test_lint_strict(value_set: str) -> None:
    result = lint(VALUE_SETS[value_set])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 chart(s) failed" in result.stdout


@pytest.mark.parametrize("kube_version", KUBE_VERSIONS)
@pytest.mark.parametrize("value_set", sorted(VALUE_SETS))
def test_manifests_validate_against_kubernetes_schemas(value_set: str, kube_version: str) -> None:
    docs = render(VALUE_SETS[value_set], extra=["--kube-version", kube_version])
    kinds = {d["kind"] for d in docs}
    assert {"StatefulSet", "Service", "ConfigMap", "Secret"} <= kinds
    for doc in docs:
        if doc["kind"] in CUSTOM_KINDS:
            continue
        try:
            kubernetes_validate.validate(doc, kube_version, strict=True)
        except kubernetes_validate.ValidationError as err:
            where = "/".join(map(str, err.path))
            raise AssertionError(
                f"{doc['kind']}/{doc['metadata']['name']} is invalid for Kubernetes "
                f"{kube_version} at {where}: {err.message}"
            ) from err


def test_strict_validation_catches_an_unknown_field() -> None:
    """The validator really is strict: a misspelt field in a rendered pod fails."""
    statefulset = of_kind(render(), "StatefulSet")[0]
    statefulset["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {}
    with pytest.raises(kubernetes_validate.ValidationError, match="readinesProbe"):
        kubernetes_validate.validate(statefulset, KUBE_VERSIONS[-1], strict=True)


def test_service_monitor_points_at_the_metrics_service() -> None:
    docs = render(VALUE_SETS["service-monitor"])
    (monitor,) = of_kind(docs, "ServiceMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["labels"]["release"] == "p"
    (service,) = [s for s in of_kind(docs, "Service") if s["metadata"]["name"].endswith("-metrics")]
    labels = service["metadata"]["labels"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= labels.items()
    port_names = {p["name"] for p in service["spec"]["ports"]}
    assert [e["port"] for e in monitor["spec"]["endpoints"]] == ["metrics"]
    assert "metrics" in port_names
    assert monitor["spec"]["namespaceSelector"]["matchNames"] == ["quorum"]


def test_service_monitor_needs_metrics() -> None:
    values = {"metrics": {"enabled": False, "serviceMonitor": {"enabled": True}}}
    assert not of_kind(render(values), "ServiceMonitor")


# ----------------------------------------------------------------- refusals

SCHEMA_REFUSALS: list[tuple[dict[str, Any], str]] = [
    ({"controllers": {"replicas": 2}}, "controllers.replicas: Must be greater than or equal to 3"),
    ({"controllers": {"replicas": -1}}, "controllers.replicas: Must be greater than or equal to 3"),
    ({"controllers": {"replicas": 7}}, "controllers.replicas: Must be less than or equal to 5"),
    ({"brokers": {"replicas": -2}}, "brokers.replicas: Must be greater than or equal to 0"),
    (
        {"controllers": {"replicas": "three"}},
        "controllers.replicas: Invalid type. Expected: integer, given: string",
    ),
    ({"metrics": {"enabled": "yes"}}, "metrics.enabled: Invalid type. Expected: boolean"),
    ({"controllers": {"port": 70000}}, "controllers.port: Must be less than or equal to 65535"),
    ({"controller": {"replicas": 3}}, "Additional property controller is not allowed"),
    ({"clusterId": "not-an-id"}, "clusterId: Does not match pattern"),
    ({"controllers": {"antiAffinity": "always"}}, "controllers.antiAffinity must be one of"),
    ({"tls": {"clientAuth": "optional"}}, "tls.clientAuth: tls.clientAuth must be one of"),
    (
        {"metrics": {"tls": {"clientAuth": "requested"}}},
        "metrics.tls.clientAuth: metrics.tls.clientAuth must be one of",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("values", "message"), SCHEMA_REFUSALS)
def test_schema_refuses(values: dict[str, Any], message: str) -> None:
    error = render_error(values)
    assert "values don't meet the specifications of the schema" in error
    assert message in error


CHART_REFUSALS: list[tuple[dict[str, Any], str]] = [
    (
        {"controllers": {"replicas": 4}},
        "controllers.replicas=4: a Raft quorum needs an odd number of voters (3 or 5)",
    ),
    ({"tls": {"enabled": True}}, "tls.enabled=true needs tls.secretName"),
    (
        {"tls": {"enabled": True, "secretName": "kq-tls"}},
        "tls.clientAuth=required binds each voter id to a certificate: set tls.controllerPrincipal",
    ),
    (
        {"tls": {"enabled": True, "secretName": "kq-tls", "controllerPrincipal": "CN=x"}},
        "tls.controllerPrincipal",
    ),
    (
        {"brokers": {"terminationGracePeriodSeconds": 20}},
        "brokers.terminationGracePeriodSeconds=20 must exceed "
        "brokers.controlledShutdownTimeoutMs=30000",
    ),
    (
        {"brokers": {"nodeIdBase": 2}},
        "brokers.nodeIdBase=2: broker node ids 2-4 overlap the controllers' 1-3",
    ),
    (
        {"controllers": {"config": {"node.id": 7}}},
        "controllers.config.node.id is set by the chart itself",
    ),
    (
        {"brokers": {"config": {"broker.rack": "a"}}},
        "brokers.config.broker.rack is set by the chart itself",
    ),
    ({"metrics": {"port": 9093}}, "metrics.port=9093 is the controllers' listener port"),
    (
        {
            "tls": {"enabled": True, "secretName": "kq-tls", "controllerPrincipal": "User:CN=c"},
            "controllers": {"config": {"ssl.client.auth": "none"}},
        },
        "ssl.client.auth is set by the chart itself with tls.enabled",
    ),
]


@pytest.mark.parametrize(("values", "message"), CHART_REFUSALS)
def test_chart_refuses(values: dict[str, Any], message: str) -> None:
    assert message in render_error(values)


def test_kubernetes_older_than_the_grpc_probe_is_refused() -> None:
    error = render_error(extra=["--kube-version", "1.26.0"])
    assert (
        "chart requires kubeVersion: >=1.27.0-0 which is incompatible with Kubernetes v1.26.0"
        in (error)
    )


def test_schema_describes_every_value() -> None:
    """Every key of values.yaml has a schema entry with a type and a description, and
    the schema names no value that values.yaml lacks."""
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    schema = json.loads((CHART / "values.schema.json").read_text())
    missing: list[str] = []

    def walk(value: Any, node: dict[str, Any], where: str) -> None:
        if "description" not in node or not ("type" in node or "anyOf" in node):
            missing.append(where)
        properties = node.get("properties")
        if isinstance(value, dict) and properties is not None:
            for key, sub in value.items():
                if key not in properties:
                    missing.append(f"{where}.{key}".lstrip("."))
                else:
                    walk(sub, properties[key], f"{where}.{key}".lstrip("."))
            if node.get("additionalProperties") is False:
                extra = set(properties) - set(value) - {"global"}
                missing.extend(f"{where}.{key} (not in values.yaml)" for key in extra)

    for key, value in values.items():
        walk(value, schema["properties"][key], key)
    assert not missing, missing
