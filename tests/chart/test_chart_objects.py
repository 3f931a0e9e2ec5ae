"""Assertions on the rendered objects (parsed YAML): what makes the quorum form and
stay safe on Kubernetes, checked per object rather than by matching strings."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from chart_render import (
    CHART,
    NAMESPACE,
    RELEASE,
    Doc,
    cluster_id,
    config_map,
    container,
    helm,
    name,
    of_kind,
    one,
    properties,
    render,
)
from kube_api_double import kube_api

from broker_agent.config import parse_broker_config
from quorum.common.meta_properties import validate_cluster_id
from quorum.controller_config import parse_config


@pytest.fixture(scope="module")
def default_docs() -> list[Doc]:
    return render()


def pod_labels(statefulset: Doc) -> dict[str, str]:
    labels: dict[str, str] = statefulset["spec"]["template"]["metadata"]["labels"]
    return labels


def env_of(c: Doc) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in c.get("env", [])}


def node_ids(statefulset: Doc) -> list[int]:
    """node.id of each pod: the init script's NODE_ID_BASE + the pod ordinal."""
    init = container(statefulset, "format", init=True)
    if "args" in init:  # the brokers' inline script
        assert 'echo "node.id=$((NODE_ID_BASE + ordinal))"' in init["args"][0]
        script = init["args"][0]
    else:  # the controllers' script from the ConfigMap (files/controller_format.sh)
        assert init["command"][-1] == "/etc/kraft-quorum/controller_format.sh"
        script = (CHART / "files" / "controller_format.sh").read_text()
        assert "node_id=$((NODE_ID_BASE + ordinal))" in script
        assert script.count('echo "node.id=$node_id"') == 3  # every branch
    assert 'ordinal="${POD_NAME##*-}"' in script
    base = int(env_of(init)["NODE_ID_BASE"])
    return [base + ordinal for ordinal in range(statefulset["spec"]["replicas"])]


@pytest.mark.parametrize("replicas", [3, 5])
def test_voters_match_replicas_and_dns_names(replicas: int) -> None:
    docs = render({"controllers": {"replicas": replicas}})
    statefulset = one(docs, "StatefulSet", name("controller"))
    assert statefulset["spec"]["replicas"] == replicas
    headless = one(docs, "Service", statefulset["spec"]["serviceName"])
    assert headless["spec"]["clusterIP"] == "None"
    assert headless["spec"]["publishNotReadyAddresses"] is True
    assert headless["spec"]["selector"].items() <= pod_labels(statefulset).items()
    data = config_map(docs)
    voters = properties(data["controller.properties"])["controller.quorum.voters"]
    entries = voters.split(",")
    assert len(entries) == replicas
    domain = f"{headless['metadata']['name']}.{NAMESPACE}.svc.cluster.local"
    for ordinal, entry in enumerate(entries):
        assert entry == f"{ordinal + 1}@{name('controller')}-{ordinal}.{domain}:9093"
    assert properties(data["broker.properties"])["controller.quorum.voters"] == voters
    assert [int(e.partition("@")[0]) for e in entries] == node_ids(statefulset)
    bootstrap = env_of(container(statefulset, "controller"))["QUORUMCTL_BOOTSTRAP"]
    assert bootstrap.split(",") == [e.partition("@")[2] for e in entries]


def test_node_ids_are_unique_across_controllers_and_brokers() -> None:
    docs = render({"controllers": {"replicas": 5}, "brokers": {"replicas": 8}})
    controllers = node_ids(one(docs, "StatefulSet", name("controller")))
    brokers = node_ids(one(docs, "StatefulSet", name("broker")))
    assert controllers == [1, 2, 3, 4, 5]
    assert brokers == list(range(101, 109))
    assert len(set(controllers + brokers)) == len(controllers) + len(brokers)


def test_rendered_properties_are_accepted_by_the_product(default_docs: list[Doc]) -> None:
    """The files the init containers write parse with the product's own config code."""
    data = config_map(default_docs)
    controller = parse_config({**properties(data["controller.properties"]), "node.id": "2"})
    assert controller.listener.port == 9093 and controller.listener.host == "0.0.0.0"
    assert controller.advertised.host.startswith(f"{name('controller')}-1.")
    assert str(controller.metadata_log_dir) == "/var/lib/kraft-quorum/metadata"
    assert controller.metrics_listener is not None and controller.metrics_listener.port == 9090
    broker_host = f"{name('broker')}-0.{name('broker-headless')}.{NAMESPACE}.svc.cluster.local"
    broker = parse_broker_config(
        {
            **properties(data["broker.properties"]),
            "node.id": "101",
            "listeners": f"PLAINTEXT://{broker_host}:9092",
            "broker.rack": "zone-a",
        }
    )
    assert broker.shutdown_timeout_ms == 30000
    assert sorted(broker.controllers) == [1, 2, 3]


def test_pdb_selects_the_controller_pods_only(default_docs: list[Doc]) -> None:
    controllers = one(default_docs, "StatefulSet", name("controller"))
    brokers = one(default_docs, "StatefulSet", name("broker"))
    pdb = one(default_docs, "PodDisruptionBudget", name("controller"))
    assert pdb["spec"]["maxUnavailable"] == 1
    selector = pdb["spec"]["selector"]["matchLabels"]
    assert selector.items() <= pod_labels(controllers).items()
    assert not selector.items() <= pod_labels(brokers).items()
    assert controllers["spec"]["selector"]["matchLabels"] == selector


def test_probes_point_at_the_health_service(default_docs: list[Doc]) -> None:
    statefulset = one(default_docs, "StatefulSet", name("controller"))
    c = container(statefulset, "controller")
    grpc_port = {p["name"]: p["containerPort"] for p in c["ports"]}["grpc"]
    listener = properties(config_map(default_docs)["controller.properties"])["listeners"]
    assert listener == f"CONTROLLER://:{grpc_port}"
    readiness, liveness = c["readinessProbe"], c["livenessProbe"]
    # The kubelet's gRPC probe asks the standard health service (service ""),
    # which says SERVING only while this controller knows a leader.
    assert readiness["grpc"] == {"port": grpc_port}
    assert "service" not in readiness["grpc"]
    # Liveness must not need a leader: any answer from the same service will do.
    assert liveness["exec"]["command"] == [
        "python3", "/etc/kraft-quorum/probe.py", "alive", f"127.0.0.1:{grpc_port}",
    ]  # fmt: skip
    assert liveness != readiness
    assert liveness["failureThreshold"] * liveness["periodSeconds"] >= 30
    broker = container(one(default_docs, "StatefulSet", name("broker")), "broker")
    assert broker["readinessProbe"]["exec"]["command"][2:] == [
        "broker-online", "http://127.0.0.1:9090/metrics",
    ]  # fmt: skip
    assert broker["livenessProbe"]["httpGet"] == {"path": "/metrics", "port": "metrics"}


def test_cluster_id_is_stable_across_renders_and_valid() -> None:
    first, second = cluster_id(render()), cluster_id(render())
    assert first == second
    validate_cluster_id(first)  # what `quorumctl storage format` accepts
    assert cluster_id(render(release="other"), release="other") != first
    assert cluster_id(render(namespace="elsewhere")) != first
    assert cluster_id(render({"clusterId": "J8iyX0bCRYmvK5QWpWQ5Zg"})) == "J8iyX0bCRYmvK5QWpWQ5Zg"


def test_cluster_id_reaches_the_format_step(default_docs: list[Doc]) -> None:
    secret = one(default_docs, "Secret", f"{RELEASE}-kraft-quorum-cluster-id")
    assert secret["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    for role in ("controller", "broker"):
        init = container(one(default_docs, "StatefulSet", name(role)), "format", init=True)
        ref = env_of(init)["CLUSTER_ID"]["secretKeyRef"]
        assert ref == {"name": secret["metadata"]["name"], "key": "cluster.id"}
        script = (
            init["args"][0]
            if "args" in init
            else (CHART / "files" / "controller_format.sh").read_text()
        )
        assert (
            'quorumctl storage format --ignore-formatted --cluster-id "$CLUSTER_ID" '
            '--config "$config"' in script
        )


def test_voters_start_together_and_are_published_before_ready(default_docs: list[Doc]) -> None:
    """With OrderedReady, pod 1 would wait for pod 0 to be ready, which needs a
    leader, which needs pod 1: the quorum could never form."""
    statefulset = one(default_docs, "StatefulSet", name("controller"))
    assert statefulset["spec"]["podManagementPolicy"] == "Parallel"
    assert statefulset["metadata"]["annotations"]["kraft-quorum/voter-ids"] == "1,2,3"


def test_pods_run_unprivileged_with_a_read_only_root(default_docs: list[Doc]) -> None:
    for role in ("controller", "broker"):
        statefulset = one(default_docs, "StatefulSet", name(role))
        spec = statefulset["spec"]["template"]["spec"]
        assert spec["securityContext"]["runAsNonRoot"] is True
        assert spec["securityContext"]["runAsUser"] != 0
        volumes = {v["name"] for v in spec["volumes"]}
        claims = {t["metadata"]["name"] for t in statefulset["spec"]["volumeClaimTemplates"]}
        for c in spec["containers"] + spec["initContainers"]:
            context = c["securityContext"]
            assert context["readOnlyRootFilesystem"] is True
            assert context["allowPrivilegeEscalation"] is False
            assert context["capabilities"]["drop"] == ["ALL"]
            writable = {m["mountPath"] for m in c["volumeMounts"] if not m.get("readOnly")}
            assert writable == {"/var/run/kraft-quorum", "/var/lib/kraft-quorum", "/tmp"}
            assert {m["name"] for m in c["volumeMounts"]} <= volumes | claims
            assert c["resources"]["requests"]["memory"]
    props = properties(config_map(default_docs)["controller.properties"])
    # Below the volume's root, where a filesystem may keep lost+found.
    assert props["metadata.log.dir"] == "/var/lib/kraft-quorum/metadata"


def test_termination_grace_covers_resignation_and_controlled_shutdown(
    default_docs: list[Doc],
) -> None:
    controllers = one(default_docs, "StatefulSet", name("controller"))
    brokers = one(default_docs, "StatefulSet", name("broker"))
    assert controllers["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] >= 10
    timeout_ms = int(properties(config_map(default_docs)["broker.properties"])[
        "controlled.shutdown.timeout.ms"
    ])  # fmt: skip
    grace = brokers["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert grace * 1000 > timeout_ms


def test_anti_affinity_and_zone_spread_are_switchable() -> None:
    on = one(render(), "StatefulSet", name("controller"))["spec"]["template"]["spec"]
    required = on["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert required[0]["topologyKey"] == "kubernetes.io/hostname"
    assert required[0]["labelSelector"]["matchLabels"]["app.kubernetes.io/component"] == (
        "controller"
    )
    (spread,) = on["topologySpreadConstraints"]
    assert spread["topologyKey"] == "topology.kubernetes.io/zone"
    off_values = {"controllers": {"antiAffinity": "none", "topologySpread": {"enabled": False}}}
    off = one(render(off_values), "StatefulSet", name("controller"))["spec"]["template"]["spec"]
    assert "affinity" not in off and "topologySpreadConstraints" not in off
    soft = render({"controllers": {"antiAffinity": "preferred"}})
    soft_spec = one(soft, "StatefulSet", name("controller"))["spec"]["template"]["spec"]
    preferred = soft_spec["affinity"]["podAntiAffinity"]
    assert "preferredDuringSchedulingIgnoredDuringExecution" in preferred


def test_metrics_service_and_switch() -> None:
    docs = render()
    service = one(docs, "Service", f"{RELEASE}-kraft-quorum-metrics")
    annotations = service["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert annotations["prometheus.io/port"] == "9090"
    assert annotations["prometheus.io/path"] == "/metrics"
    for role in ("controller", "broker"):
        labels = pod_labels(one(docs, "StatefulSet", name(role)))
        assert service["spec"]["selector"].items() <= labels.items()
    off = render({"metrics": {"enabled": False}})
    assert not [s for s in of_kind(off, "Service") if s["metadata"]["name"].endswith("-metrics")]
    assert "metrics.listener" not in properties(config_map(off)["controller.properties"])
    controller = container(one(off, "StatefulSet", name("controller")), "controller")
    assert [p["name"] for p in controller["ports"]] == ["grpc"]
    # The brokers' probes read their metrics endpoint, so it stays.
    assert "metrics.listener" in properties(config_map(off)["broker.properties"])


def test_racks_come_from_a_node_label() -> None:
    docs = render({"brokers": {"rack": {"enabled": True, "topologyKey": "example.com/rack"}}})
    brokers = one(docs, "StatefulSet", name("broker"))
    init = container(brokers, "format", init=True)
    assert env_of(init)["NODE_NAME"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    script = init["args"][0]
    assert (
        'rack="$(python3 /etc/kraft-quorum/node_label.py "$NODE_NAME" "example.com/rack")"'
        in script
    )
    assert 'echo "broker.rack=${rack}"' in script
    assert brokers["spec"]["template"]["spec"]["automountServiceAccountToken"] is True
    (role,) = of_kind(docs, "ClusterRole")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]
    (binding,) = of_kind(docs, "ClusterRoleBinding")
    account = brokers["spec"]["template"]["spec"]["serviceAccountName"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}
    ]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    plain = render()
    assert not of_kind(plain, "ClusterRole")
    plain_brokers = one(plain, "StatefulSet", name("broker"))
    assert plain_brokers["spec"]["template"]["spec"]["automountServiceAccountToken"] is False


def test_tls_secret_is_mounted_when_enabled() -> None:
    tls = {"enabled": True, "secretName": "kq-tls", "controllerPrincipal": "User:CN=ctl"}
    docs = render({"tls": tls})
    for role in ("controller", "broker"):
        spec = one(docs, "StatefulSet", name(role))["spec"]["template"]["spec"]
        assert {"name": "tls", "secret": {"secretName": "kq-tls"}} in spec["volumes"]
        mounts = {m["name"]: m for m in spec["containers"][0]["volumeMounts"]}
        assert mounts["tls"]["mountPath"] == "/etc/kraft-quorum-tls"
        assert mounts["tls"]["readOnly"] is True
    # The controllers' own Secret, when given, is theirs alone.
    docs = render({"tls": {**tls, "controllerSecretName": "kq-controller-tls"}})
    for role, secret in (("controller", "kq-controller-tls"), ("broker", "kq-tls")):
        spec = one(docs, "StatefulSet", name(role))["spec"]["template"]["spec"]
        assert {"name": "tls", "secret": {"secretName": secret}} in spec["volumes"]
        mounts = {m["name"]: m for m in spec["containers"][0]["volumeMounts"]}
        assert mounts["tls"]["mountPath"] == "/etc/kraft-quorum-tls"
        assert mounts["tls"]["readOnly"] is True


def test_image_and_resources_are_values() -> None:
    values = {
        "image": {"repository": "registry.example/kq", "tag": "9.9.9", "pullPolicy": "Always"},
        "controllers": {"resources": {"requests": {"cpu": "3", "memory": "5Gi"}}},
    }
    docs = render(values)
    for role in ("controller", "broker"):
        spec = one(docs, "StatefulSet", name(role))["spec"]["template"]["spec"]
        for c in spec["containers"] + spec["initContainers"]:
            assert c["image"] == "registry.example/kq:9.9.9"
            assert c["imagePullPolicy"] == "Always"
    controller = container(one(docs, "StatefulSet", name("controller")), "controller")
    assert controller["resources"]["requests"] == {"cpu": "3", "memory": "5Gi"}
    chart_version = re.search(r"^appVersion: \"(.*)\"$", (CHART / "Chart.yaml").read_text(), re.M)
    assert chart_version is not None
    default = container(one(render(), "StatefulSet", name("broker")), "broker")
    assert default["image"] == f"kraft-quorum:{chart_version.group(1)}"


def test_config_overrides_render_as_integers() -> None:
    """Helm reads YAML numbers as floats; 3600000 must not become 3.6e+06."""
    values = {"controllers": {"config": {"metadata.snapshot.max.interval.ms": 3600000}}}
    props = properties(config_map(render(values))["controller.properties"])
    assert props["metadata.snapshot.max.interval.ms"] == "3600000"


def test_notes_tell_how_to_read_the_quorum_status(tmp_path: Path) -> None:
    """NOTES.txt is rendered only by install/upgrade, which need an API server."""
    with kube_api(NAMESPACE) as api:
        result = helm(
            "install", RELEASE, str(CHART), "--namespace", NAMESPACE,
            "--dry-run=client", "--disable-openapi-validation",
            env={"KUBECONFIG": str(api.kubeconfig(tmp_path))},
        )  # fmt: skip
    assert result.returncode == 0, result.stderr
    notes = result.stdout.split("NOTES:", 1)[1]
    assert (
        f"kubectl exec -n {NAMESPACE} {name('controller')}-0 -c controller -- "
        "quorumctl quorum describe --status" in notes
    )
    assert f"Cluster id: {cluster_id(render())}" in notes


def test_brokers_do_not_auto_create_topics_in_production(default_docs: list[Doc]) -> None:
    """The chart's values are production's: topics are created on purpose, so a
    producer's typo cannot make one; Kafka's default (true) is one value away."""
    broker = properties(config_map(default_docs)["broker.properties"])
    assert broker["auto.create.topics.enable"] == "false"
    turned_on = render({"brokers": {"autoCreateTopicsEnable": True}})
    assert properties(config_map(turned_on)["broker.properties"])[
        "auto.create.topics.enable"
    ] == "true"  # fmt: skip
    with pytest.raises(AssertionError, match="set by the chart itself"):
        render({"brokers": {"config": {"auto.create.topics.enable": "true"}}})


@pytest.mark.parametrize("replicas", [3, 5])
def test_install_bootstraps_the_initial_voters_with_stable_directory_ids(replicas: int) -> None:
    """`helm install` renders the bootstrap ConfigMap (--initial-controllers) that the
    controllers' init container mounts, optional, and the voter-change Jobs as hooks."""
    from quorum.cli.storage import directory_id_problem

    docs = render({"controllers": {"replicas": replicas}})
    bootstrap = one(docs, "ConfigMap", name("bootstrap"))["data"]["initial-controllers"]
    voters = properties(config_map(docs)["controller.properties"])["controller.quorum.voters"]
    entries = bootstrap.split(",")
    assert [e.rpartition(":")[0] for e in entries] == voters.split(",")
    directory_ids = [e.rpartition(":")[2] for e in entries]
    assert len(set(directory_ids)) == replicas
    assert all(directory_id_problem(d) is None for d in directory_ids), directory_ids
    again = one(render({"controllers": {"replicas": replicas}}), "ConfigMap", name("bootstrap"))
    assert again["data"]["initial-controllers"] == bootstrap  # the same in every render
    sts = one(docs, "StatefulSet", name("controller"))
    volume = next(v for v in sts["spec"]["template"]["spec"]["volumes"] if v["name"] == "bootstrap")
    assert volume["configMap"] == {"name": name("bootstrap"), "optional": True}
    init = container(sts, "format", init=True)
    assert {"name": "KRAFT_VERSION", "value": "1"} in init["env"]
    assert "bootstrap" in {m["name"] for m in init["volumeMounts"]}
    assert "bootstrap" not in {m["name"] for m in container(sts, "controller")["volumeMounts"]}
    annotations = sts["metadata"]["annotations"]
    assert annotations["kraft-quorum/kraft-version"] == "1"
    assert annotations["kraft-quorum/initial-voter-ids"] == ",".join(
        str(n) for n in range(1, replicas + 1)
    )
    hooks = {
        d["metadata"]["name"]: d["metadata"]["annotations"]["helm.sh/hook"]
        for d in of_kind(docs, "Job")
    }
    assert hooks == {
        name("voters-remove"): "pre-upgrade",
        name("voters-reconcile"): "post-install,post-upgrade",
    }
