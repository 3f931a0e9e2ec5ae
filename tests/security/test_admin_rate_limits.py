"""`admin.request.rate.per.client` on real controllers over mTLS: a client past its
rate is refused with THROTTLING_QUOTA_EXCEEDED and a retry time, another client
is not slowed by it, a throttled write changes nothing, the refusals are counted."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from quorum.admin_client import AdminClient
from quorum.common.channels import open_channel
from quorum.common.local_ca import LocalCa
from quorum.common.tls import TlsSettings
from quorum.gen import admin_pb2 as api
from quorum.gen import admin_pb2_grpc as api_grpc
from quorum.rpc.wire_errors import wire_error
from tests.integration.controller_cluster import Cluster, run
from tests.security.secure_cluster import client_settings, create_mtls_cluster

RATE = 5


@dataclass
class Rated:
    cluster: Cluster
    alice: TlsSettings
    bob: TlsSettings


@pytest.fixture(scope="module")
def rated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rated]:
    ca = LocalCa("rate limit CA")
    c = create_mtls_cluster(
        Path(tmp_path_factory.mktemp("rates")),
        ca,
        extra={
            "admin.request.rate.per.client": str(RATE),
            "admin.request.burst.per.client": str(RATE),
        },
    )
    alice = client_settings(ca.write(c.root / "certs", "alice"))
    bob = client_settings(ca.write(c.root / "certs", "bob"))
    c.start()
    try:
        c.wait_for_leader(timeout_s=30)
        yield Rated(c, alice, bob)
    finally:
        c.stop_all()


def burst(address: str, tls: TlsSettings, request: object, count: int) -> list[str]:
    """`count` calls back to back: 'OK' or the Kafka error name of each."""

    async def go() -> list[str]:
        channel = open_channel(address, tls=tls)
        method = "CreateTopics" if isinstance(request, api.CreateTopicsRequest) else "ListTopics"
        stub = getattr(api_grpc.AdminStub(channel), method)
        results = []
        try:
            for _ in range(count):
                try:
                    await stub(request, timeout=5)
                    results.append("OK")
                except grpc.aio.AioRpcError as err:
                    error = wire_error(err)
                    assert err.code() is grpc.StatusCode.RESOURCE_EXHAUSTED, err
                    assert int(error.metadata["throttle_time_ms"]) > 0
                    results.append(error.error.name if error.error else err.code().name)
        finally:
            await channel.close()
        return results

    return run(go())


def test_a_client_past_its_rate_is_throttled_and_another_is_not(rated: Rated) -> None:
    cluster = rated.cluster
    address = cluster.procs[1].address
    asyncio.run(asyncio.sleep(1.2))  # full buckets, whatever test spent them before
    alice = burst(address, rated.alice, api.ListTopicsRequest(), 4 * RATE)
    assert alice[:RATE] == ["OK"] * RATE
    assert alice.count("THROTTLING_QUOTA_EXCEEDED") >= 2 * RATE
    bob = burst(address, rated.bob, api.ListTopicsRequest(), RATE)
    assert bob == ["OK"] * RATE
    metrics = cluster.procs[1].metrics()
    assert metrics['quorum_controller_throttled_requests_total{request="ListTopics"}'] >= 2 * RATE


def test_a_throttled_write_changes_nothing_and_the_rate_comes_back(rated: Rated) -> None:
    cluster = rated.cluster
    leader = cluster.wait_for_leader()
    address = cluster.procs[leader.leader_id].address
    before = cluster.describe(leader.leader_id)
    create = api.CreateTopicsRequest(
        topics=[api.CreatableTopic(name="x", num_partitions=1, replication_factor=1)],
        validate_only=True,
    )
    results = burst(address, rated.alice, create, 4 * RATE)
    assert "THROTTLING_QUOTA_EXCEEDED" in results
    after = cluster.describe(leader.leader_id)
    assert (after.log_end_offset, after.image_digest) == (
        before.log_end_offset,
        before.image_digest,
    )
    asyncio.run(asyncio.sleep(1.2))  # a second later: a full burst again
    again = burst(address, rated.alice, api.ListTopicsRequest(), RATE)
    assert again == ["OK"] * RATE


def test_the_admin_client_waits_out_the_throttle(rated: Rated) -> None:
    """Kafka's clients wait `throttle_time_ms` and retry; so does AdminClient."""
    cluster = rated.cluster

    async def go() -> int:
        client = AdminClient([cluster.procs[2].address], cluster.cluster_id, tls=rated.bob)
        try:
            for _ in range(3 * RATE):
                await client.admin("ListTopics", api.ListTopicsRequest(), deadline_s=10)
            return 3 * RATE
        finally:
            await client.close()

    started = time.monotonic()
    assert run(go()) == 3 * RATE
    assert time.monotonic() - started >= 1.5  # paced by the rate, not refused
