"""Who a forwarded admin request is decided for (`quorum/server/access.py`), with a
stand-in for grpc's servicer context (the seam the servicers see): the client a
broker names, only when the caller may forward (CLUSTER_ACTION); anyone else is
refused, and without an authorizer the claim counts for nothing, rate limits
included."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest

from quorum.authz.authorizer import (
    CLUSTER_NAME,
    AuthorizerConfig,
    Operation,
    Permission,
    ResourceType,
)
from quorum.common.tls import FORWARDED_HOST, FORWARDED_PRINCIPAL
from quorum.controller.metadata_image import AclEntry
from quorum.controller.rate_limit import RateLimiter
from quorum.gen import admin_pb2 as api
from quorum.server.access import AccessControl


class Aborted(Exception):
    def __init__(self, status: grpc.Status) -> None:
        super().__init__(status.details)
        self.status = status


class Context:
    def __init__(self, principal: str, claim: str | None = None) -> None:
        self.principal = principal
        self.claim = claim

    def auth_context(self) -> dict[str, list[bytes]]:
        return {"x509_subject": [self.principal.removeprefix("User:").encode()]}

    def peer(self) -> str:
        return "ipv4:10.0.0.7:5000"

    def invocation_metadata(self) -> tuple[tuple[str, Any], ...]:
        if self.claim is None:
            return ()
        return ((FORWARDED_PRINCIPAL, self.claim.encode()), (FORWARDED_HOST, "10.9.9.9"))

    async def abort_with_status(self, status: grpc.Status) -> None:
        raise Aborted(status)


def acl(principal: str, resource_type: ResourceType, name: str, op: Operation) -> AclEntry:
    return AclEntry(acl_id=f"{principal}-{op.name}", resource_type=resource_type,
                    resource_name=name, pattern_type=3, principal=principal, host="*",
                    operation=op, permission_type=Permission.ALLOW)  # fmt: skip


ACLS = [
    acl("User:CN=broker-101", ResourceType.CLUSTER, CLUSTER_NAME, Operation.CLUSTER_ACTION),
    acl("User:CN=bob", ResourceType.CLUSTER, CLUSTER_NAME, Operation.CREATE),
]
CREATE = api.CreateTopicsRequest(topics=[api.CreatableTopic(name="t")])


def access(enabled: bool = True, rate: int = 0) -> AccessControl:
    config = AuthorizerConfig(enabled=enabled, super_users=frozenset({"User:CN=admin"}))
    return AccessControl(config, lambda: ACLS, lambda _: None, RateLimiter(rate))


def check(control: AccessControl, context: Context) -> None:
    asyncio.run(control.check(context, CREATE))


def test_a_broker_forwards_and_the_client_is_decided_for() -> None:
    check(access(), Context("User:CN=broker-101", claim="User:CN=bob"))
    with pytest.raises(Aborted) as denied:
        check(access(), Context("User:CN=broker-101", claim="User:CN=alice"))
    assert "User:CN=alice is not authorized" in denied.value.status.details


def test_only_a_broker_may_claim_a_principal() -> None:
    with pytest.raises(Aborted) as denied:
        check(access(), Context("User:CN=alice", claim="User:CN=admin"))
    assert "only a broker" in denied.value.status.details
    check(access(), Context("User:CN=admin", claim="User:CN=bob"))  # a super user may


def test_without_an_authorizer_a_claim_counts_for_nothing() -> None:
    control = access(enabled=False, rate=1)
    asyncio.run(control.throttle(Context("User:CN=alice", claim="User:CN=one"), CREATE))
    with pytest.raises(Aborted) as throttled:  # the same caller under another name
        asyncio.run(control.throttle(Context("User:CN=alice", claim="User:CN=two"), CREATE))
    assert "User:CN=alice is over" in throttled.value.status.details
