"""Generated requests to every RPC from a valid certificate with no ACL, against
three controllers running the StandardAuthorizer over mTLS: nothing but the
public reads answers, nothing changes.

The same generated requests as test_fuzz_every_rpc.py (hostile values in every
field, random bytes), sent as ``User:CN=mallory``; every call must be refused
(PERMISSION_DENIED, or an earlier refusal: a wrong cluster id, bytes that do not
parse, NOT_CONTROLLER from a standby) except ListTopics, DescribeTopics of
every topic (both filtered to nothing) and DescribeCluster; the state of every
controller is compared after each batch.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.descriptor import MethodDescriptor
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from quorum.authz.authorizer import STANDARD_AUTHORIZER
from quorum.authz.controller_actions import requirements
from quorum.common.channels import open_channel
from quorum.common.local_ca import LocalCa
from quorum.common.tls import TlsSettings
from tests.integration.controller_cluster import Cluster
from tests.security.fuzz_rpc import SERVICES, call, requests_for, wait_agreed
from tests.security.proto_strategies import with_cluster_id
from tests.security.secure_cluster import client_settings, create_mtls_cluster

pytestmark = pytest.mark.slow

PER_SERVICE = 250
BATCH = 50
PUBLIC = {"ListTopics", "DescribeTopics", "DescribeCluster"}
SUPER_USERS = "User:CN=controller-1;User:CN=controller-2;User:CN=controller-3;User:CN=admin"
ANSWERS: Counter[str] = Counter()


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, TlsSettings]]:
    ca = LocalCa("unauthorized fuzz CA")
    cluster = create_mtls_cluster(
        Path(tmp_path_factory.mktemp("fuzz-authz")),
        ca,
        extra={"authorizer.class.name": STANDARD_AUTHORIZER, "super.users": SUPER_USERS},
    )
    mallory = client_settings(ca.write(cluster.root / "certs", "mallory"))
    cluster.start()
    try:
        cluster.wait_for_leader(timeout_s=30)
        cluster.write(2)
        yield cluster, mallory
    finally:
        cluster.stop_all()


async def send(cluster: Cluster, tls: TlsSettings, service: str, batch: list[Any]) -> None:
    channels = [open_channel(p.address, tls=tls) for p in cluster.procs.values()]
    try:
        for i, (method, request) in enumerate(batch):
            if isinstance(request, Message):
                request = with_cluster_id(request, cluster.cluster_id)
            code, answer = await call(channels[i % 3], SERVICES[service], method, request)
            ANSWERS[code] += 1
            assert code not in ("UNKNOWN", "INTERNAL"), (method.name, code)
            if code == "OK":
                assert answer is not None
                _assert_nothing_shown(method, request, answer)
    finally:
        for channel in channels:
            await channel.close()


def _assert_nothing_shown(method: MethodDescriptor, request: Any, answer: bytes) -> None:
    """An answer to an unauthorized caller: a public read (topics hidden), or a
    call that asked for nothing (an empty CreateTopics needs no permission, as
    in Kafka, and does nothing)."""
    if isinstance(request, bytes):
        request = GetMessageClass(method.input_type).FromString(request)
    if method.name not in PUBLIC:
        assert requirements(request, lambda _: None) == [], method.name
    reply = GetMessageClass(method.output_type).FromString(answer)
    if method.name == "ListTopics":
        assert not reply.topics  # every topic hidden from a caller with no DESCRIBE


def _fuzz(secured: tuple[Cluster, TlsSettings], service: str, batch: list[Any]) -> None:
    cluster, mallory = secured
    before = wait_agreed(cluster)
    asyncio.run(send(cluster, mallory, service, batch))
    assert all(p.alive() for p in cluster.procs.values()), cluster.logs()
    assert wait_agreed(cluster) == before


_SETTINGS = settings(
    max_examples=PER_SERVICE // BATCH,
    deadline=None,
    database=None,
    phases=[Phase.generate],
    suppress_health_check=list(HealthCheck),
)


@pytest.mark.parametrize("service", list(SERVICES))
def test_an_unauthorized_certificate_reaches_nothing(
    secured: tuple[Cluster, TlsSettings], service: str
) -> None:
    @seed(29)
    @_SETTINGS
    @given(batch=st.lists(requests_for(service), min_size=BATCH, max_size=BATCH))
    def fuzz(batch: list[Any]) -> None:
        _fuzz(secured, service, batch)

    denied_before = ANSWERS["PERMISSION_DENIED"]  # this service's own, in any test order
    fuzz()
    print(f"unauthorized fuzz after {service}: {dict(ANSWERS)}")
    assert ANSWERS["PERMISSION_DENIED"] > denied_before
