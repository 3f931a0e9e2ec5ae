"""Clients of the quorum against links that fail the way real networks do.

A connection that opens but never carries a byte (a blackhole behind a proxy,
a peer whose SYN-ACK came from a middlebox) must still let a client's deadline
expire. Unary calls get that from gRPC's own deadline; the kept-open calls
(`WriteStream`, `MetadataFetchStream`, `FetchStream`) rely on `exchange()`
cancelling the call when its timer fires.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from controller_cluster import Cluster, running_cluster
from toxiproxy import Toxiproxy
from toxiproxy_server import toxiproxy_server

from quorum.client import QuorumClient, QuorumUnavailableError
from quorum.controller.record_codec import noop

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def toxiproxy() -> Iterator[Toxiproxy]:
    with toxiproxy_server() as server:
        yield server


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(Path(tmp_path_factory.mktemp("client-faults"))) as c:
        yield c


async def write_through(client: QuorumClient) -> float:
    """Seconds until a write with a 2 s deadline gives up (bounded at 10 s here)."""
    start = time.monotonic()
    try:
        await asyncio.wait_for(
            client.write([noop(b"x")], attempt_timeout_s=0.1, deadline_s=2), timeout=10
        )
    except QuorumUnavailableError:
        return time.monotonic() - start
    except TimeoutError:
        return float("inf")
    finally:
        await client.close()
    raise AssertionError("a write through a blackhole was acknowledged")


def blackholed(toxiproxy: Toxiproxy, cluster: Cluster, name: str) -> str:
    leader = cluster.wait_for_leader().leader_id
    proxy = toxiproxy.create(upstream=cluster.procs[leader].address, name=name)
    for stream in ("upstream", "downstream"):
        proxy.add_toxic(type="timeout", stream=stream, attributes={"timeout": 0})
    return str(proxy.listen)


def test_write_gives_up_on_a_connection_blackholed_after_it_was_established(
    toxiproxy: Toxiproxy, cluster: Cluster
) -> None:
    leader = cluster.wait_for_leader().leader_id
    proxy = toxiproxy.create(upstream=cluster.procs[leader].address, name="later")

    async def go() -> float:
        client = QuorumClient([proxy.listen], cluster.cluster_id)
        await client.write([noop(b"warm")], attempt_timeout_s=1, deadline_s=5)
        for stream in ("upstream", "downstream"):
            proxy.add_toxic(type="timeout", stream=stream, attributes={"timeout": 0})
        return await write_through(client)  # the same client: its connection was up

    assert asyncio.run(go()) < 3.0


def test_write_gives_up_on_a_connection_blackholed_from_the_start(
    toxiproxy: Toxiproxy, cluster: Cluster
) -> None:
    address = blackholed(toxiproxy, cluster, "from-start")

    async def go() -> float:
        return await write_through(QuorumClient([address], cluster.cluster_id))

    assert asyncio.run(go()) < 3.0
