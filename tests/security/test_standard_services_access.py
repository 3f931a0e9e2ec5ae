"""grpcio's own servicers under the StandardAuthorizer, over real mTLS: the health
service answers any certificate of the CA, server reflection needs DESCRIBE on
the cluster (super users pass), a denial is CLUSTER_AUTHORIZATION_FAILED,
counted and logged with the principal, and changes nothing; generated requests
from a certificate without ACLs never get past it."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from quorum.authz.authorizer import CLUSTER_NAME, STANDARD_AUTHORIZER, Operation, ResourceType
from quorum.common.channels import open_channel
from quorum.common.local_ca import LocalCa
from quorum.common.tls import TlsSettings
from quorum.controller.api_errors import ApiError
from quorum.rpc.wire_errors import wire_error
from tests.integration.controller_cluster import Cluster
from tests.security.fuzz_rpc import STANDARD_SERVICES as FUZZED
from tests.security.fuzz_rpc import call as fuzz_call
from tests.security.fuzz_rpc import requests_for
from tests.security.secure_cluster import (
    binding,
    client_settings,
    create_acls,
    create_mtls_cluster,
    denials,
    state,
)

SUPER_USERS = "User:CN=controller-1;User:CN=admin"


@pytest.fixture(scope="module")
def ca() -> LocalCa:
    return LocalCa("standard services CA")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, ca: LocalCa) -> Iterator[Cluster]:
    root = Path(tmp_path_factory.mktemp("std-services"))
    c = create_mtls_cluster(
        root,
        ca,
        voters=1,
        extra={"authorizer.class.name": STANDARD_AUTHORIZER, "super.users": SUPER_USERS},
    )
    c.start()
    try:
        c.wait_for_leader(timeout_s=30)
        yield c
    finally:
        c.stop_all()


def identity(cluster: Cluster, ca: LocalCa, name: str) -> TlsSettings:
    return client_settings(ca.write(cluster.root / "certs", name))


def channel(cluster: Cluster, tls: TlsSettings | None) -> grpc.Channel:
    address = cluster.procs[1].address
    if tls is None:
        return grpc.insecure_channel(address)
    return grpc.secure_channel(address, tls.channel_credentials())


def health_check(cluster: Cluster, tls: TlsSettings | None) -> str:
    with channel(cluster, tls) as ch:
        reply = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=5)
    return health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)


def health_watch_first(cluster: Cluster, tls: TlsSettings) -> str:
    with channel(cluster, tls) as ch:
        stream = health_pb2_grpc.HealthStub(ch).Watch(health_pb2.HealthCheckRequest(), timeout=5)
        first = next(stream)
        stream.cancel()
    return health_pb2.HealthCheckResponse.ServingStatus.Name(first.status)


def list_services(cluster: Cluster, tls: TlsSettings) -> list[str]:
    with channel(cluster, tls) as ch:
        stub = reflection_pb2_grpc.ServerReflectionStub(ch)
        answers = stub.ServerReflectionInfo(
            iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=5
        )
        reply = next(answers)
        answers.cancel()
    return [s.name for s in reply.list_services_response.service]


def test_health_answers_any_certificate_of_the_ca(cluster: Cluster, ca: LocalCa) -> None:
    nobody = identity(cluster, ca, "nobody")  # no ACL at all
    assert health_check(cluster, nobody) == "SERVING"
    assert health_watch_first(cluster, nobody) == "SERVING"
    with channel(cluster, nobody) as ch:
        listed = health_pb2_grpc.HealthStub(ch).List(health_pb2.HealthListRequest(), timeout=5)
    statuses = {name: reply.status for name, reply in listed.statuses.items()}
    assert statuses[""] == health_pb2.HealthCheckResponse.SERVING
    assert statuses["quorum.raft.v1.RaftQuorum"] == health_pb2.HealthCheckResponse.SERVING


def test_health_refuses_a_client_without_a_certificate(cluster: Cluster) -> None:
    with pytest.raises(grpc.RpcError) as plaintext:
        health_check(cluster, None)
    assert plaintext.value.code() is grpc.StatusCode.UNAVAILABLE
    admin = cluster.client_tls
    assert admin is not None
    no_certificate = TlsSettings(certificate_chain=None, private_key=None, ca=admin.ca)
    with pytest.raises(grpc.RpcError) as anonymous:
        health_check(cluster, no_certificate)
    assert anonymous.value.code() is grpc.StatusCode.UNAVAILABLE


def test_reflection_without_describe_on_the_cluster_is_denied(
    cluster: Cluster, ca: LocalCa
) -> None:
    eve = identity(cluster, ca, "eve")
    before = state(cluster)
    counted = denials(cluster, "CLUSTER_AUTHORIZATION_FAILED", "ServerReflectionInfo")
    # Denials are logged at most 5 a second (the rest counted): after a test that
    # was denied many times, eve's line would be counted, not logged. A second
    # with no denial starts a new window.
    time.sleep(1.1)
    with pytest.raises(grpc.RpcError) as refused:
        list_services(cluster, eve)
    error = wire_error(refused.value)
    assert error.status is grpc.StatusCode.PERMISSION_DENIED
    assert error.error is ApiError.CLUSTER_AUTHORIZATION_FAILED
    assert error.metadata["principal"] == "User:CN=eve"
    assert denials(cluster, "CLUSTER_AUTHORIZATION_FAILED", "ServerReflectionInfo") == counted + 1
    assert "denied ServerReflectionInfo to User:CN=eve" in cluster.procs[1].log_text()
    assert state(cluster) == before


def test_reflection_for_super_users_and_describe_acls(cluster: Cluster, ca: LocalCa) -> None:
    admin = cluster.client_tls
    assert admin is not None
    services = list_services(cluster, admin)
    assert {"grpc.health.v1.Health", "quorum.admin.v1.Admin"} <= set(services)
    carol = identity(cluster, ca, "carol")
    create_acls(
        cluster,
        binding(ResourceType.CLUSTER, CLUSTER_NAME, "User:CN=carol", Operation.DESCRIBE),
    )
    assert list_services(cluster, carol) == services


UNAUTHORIZED_PER_SERVICE = 250


@pytest.mark.slow
@pytest.mark.parametrize("service", list(FUZZED))
def test_generated_requests_from_a_certificate_without_acls(
    cluster: Cluster, ca: LocalCa, service: str
) -> None:
    """Hostile requests as a certificate with no ACL: health answers (or refuses
    bad input), reflection is always denied, nothing changes."""
    mallory = identity(cluster, ca, "mallory")
    before = state(cluster)
    answers: Counter[str] = Counter()

    async def send(batch: list[Any]) -> None:
        channel = open_channel(cluster.procs[1].address, tls=mallory)
        try:
            for method, request in batch:
                code, _ = await fuzz_call(channel, FUZZED[service], method, request)
                answers[code] += 1
        finally:
            await channel.close()

    @seed(31)
    @settings(
        max_examples=UNAUTHORIZED_PER_SERVICE // 50,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(batch=st.lists(requests_for(service), min_size=50, max_size=50))
    def fuzz(batch: list[Any]) -> None:
        asyncio.run(send(batch))

    fuzz()
    print(f"{service} as a certificate without ACLs: {dict(answers)}")
    assert sum(answers.values()) == UNAUTHORIZED_PER_SERVICE
    assert not {"UNKNOWN", "INTERNAL"} & set(answers), answers
    if service == "ServerReflection":
        assert set(answers) <= {"PERMISSION_DENIED", "INVALID_ARGUMENT"}, answers
        assert answers["PERMISSION_DENIED"] > 0
    assert cluster.procs[1].alive()
    assert state(cluster) == before
