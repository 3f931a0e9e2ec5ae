"""Real controller and broker processes over mTLS, with certificates from a
throw-away CA made for the test (`quorum.common.local_ca`).

Every controller and broker presents its own certificate (``CN=controller-N``,
``CN=broker-N``); the test's clients present ``CN=admin`` unless told otherwise.
The ACL bindings the tests create, and what they compare before and after a
refused call, are here too.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from quorum.authz.authorizer import Operation, PatternType, Permission, ResourceType
from quorum.common.local_ca import IssuedFiles, LocalCa
from quorum.common.tls import ClientAuth, TlsSettings
from quorum.gen import admin_pb2 as api
from tests.integration.controller_cluster import Cluster


def tls_properties(files: IssuedFiles, client_auth: ClientAuth | None) -> dict[str, str]:
    props = {
        "listener.security.protocol.map": "CONTROLLER:SSL",
        "ssl.certificate.location": str(files.certificate),
        "ssl.key.location": str(files.key),
        "ssl.ca.location": str(files.ca),
    }
    if client_auth is not None:
        props["ssl.client.auth"] = client_auth.value
    return props


def client_settings(files: IssuedFiles) -> TlsSettings:
    return TlsSettings(
        certificate_chain=files.certificate.read_bytes(),
        private_key=files.key.read_bytes(),
        ca=files.ca.read_bytes(),
    )


def create_mtls_cluster(
    root: Path,
    ca: LocalCa,
    voters: int = 3,
    extra: Mapping[str, str] | None = None,
    client: str = "admin",
) -> Cluster:
    """A formatted (not started) cluster whose listeners require client certificates."""
    certs = root / "certs"
    node_extra = {
        n: tls_properties(ca.write(certs, f"controller-{n}"), ClientAuth.REQUIRED)
        for n in range(1, voters + 1)
    }
    cluster = Cluster.create(root, voters=voters, extra=extra, node_extra=node_extra)
    cluster.client_tls = client_settings(ca.write(certs, client))
    return cluster


def add_mtls_brokers(cluster: Cluster, ca: LocalCa, *broker_ids: int, **extra: str) -> None:
    """Broker agents that dial the controllers with their own certificates."""
    for broker_id in broker_ids:
        files = ca.write(cluster.root / "certs", f"broker-{broker_id}")
        props = {k.replace(".", "__"): v for k, v in tls_properties(files, None).items()}
        cluster.add_brokers(broker_id, **props, **extra)


def binding(
    resource_type: ResourceType,
    name: str,
    principal: str,
    operation: Operation,
    permission: Permission = Permission.ALLOW,
    pattern: PatternType = PatternType.LITERAL,
) -> api.AclBinding:
    return api.AclBinding(
        resource_type=resource_type, resource_name=name, pattern_type=pattern,
        principal=principal, host="*", operation=operation, permission_type=permission,
    )  # fmt: skip


def create_acls(cluster: Cluster, *bindings: api.AclBinding) -> None:
    reply = cluster.call("admin", "CreateAcls", api.CreateAclsRequest(creations=list(bindings)))
    assert all(r.error.error_code == 0 for r in reply.results), reply


def state(cluster: Cluster) -> tuple[int, str]:
    """(high watermark, image digest) on the leader."""
    leader = cluster.wait_for_leader()
    view = cluster.describe(leader.leader_id)
    return view.high_watermark, view.image_digest


def denials(cluster: Cluster, error: str, request: str) -> float:
    key = f'quorum_controller_authorization_failures_total{{error="{error}",request="{request}"}}'
    return sum(p.metrics().get(key, 0.0) for p in cluster.procs.values())
