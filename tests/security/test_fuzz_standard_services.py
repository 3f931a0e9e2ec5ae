"""Hypothesis-generated requests against grpcio's own servicers on three real
controllers: the standard health service (Check, and Watch, a server stream)
and server reflection (ServerReflectionInfo, a bidirectional stream).

The same generators and checks as test_fuzz_every_rpc.py (`fuzz_rpc.py`): hostile values in
every field (huge service names and symbols, control characters, unknown
extension numbers) or random bytes instead of a message. Watch is bounded: its
first answer is read and the stream cancelled. Every call must end in a status
or an answer that parses as the method's reply, never UNKNOWN or INTERNAL (an
exception escaping a servicer or a wrapper); after each batch every controller
still runs and its epoch, log end, applied offset and image digest are what
they were (neither service may write anything).

Budget: `FUZZ_REQUESTS` per service (default 5,000) in batches of `BATCH`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.descriptor import MethodDescriptor
from google.protobuf.message_factory import GetMessageClass
from hypothesis import given, seed
from hypothesis import strategies as st

from quorum.common.channels import open_channel
from tests.integration.controller_cluster import Cluster
from tests.security.fuzz_rpc import (
    BATCH,
    FUZZ_REQUESTS,
    STANDARD_SERVICES,
    Tally,
    call,
    fuzz_settings,
    log_end,
    requests_for,
    wait_agreed,
)

pytestmark = pytest.mark.slow

_TALLIES: dict[str, Tally] = {}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster.create(Path(tmp_path_factory.mktemp("fuzz-std")))
    c.start()
    try:
        c.wait_for_leader(timeout_s=30)
        c.write(3)
        # A leader and a majority are not all three: the first batch talks to every
        # controller, and one still starting refused the connection.
        c.wait_until(lambda: all(c.describe(n) for n in c.procs), 30, "every controller up")
        yield c
    finally:
        c.stop_all()


async def send_batch(cluster: Cluster, service: str, batch: list[Any], tally: Tally) -> None:
    channels = [open_channel(p.address) for p in cluster.procs.values()]
    try:
        ends = [await log_end(c) for c in channels]
        for i, (method, request) in enumerate(batch):
            code, answer = await call(channels[i % 3], STANDARD_SERVICES[service], method, request)
            tally.sent += 1
            tally.codes[code] += 1
            assert code not in ("UNKNOWN", "INTERNAL"), (method.name, code, request)
            if answer is not None:
                GetMessageClass(method.output_type).FromString(answer)  # a valid reply
        assert [await log_end(c) for c in channels] == ends
    finally:
        for channel in channels:
            await channel.close()


def fuzz(cluster: Cluster, service: str, batch: list[tuple[MethodDescriptor, Any]]) -> None:
    tally = _TALLIES.setdefault(service, Tally())
    before = wait_agreed(cluster)
    asyncio.run(send_batch(cluster, service, batch, tally))
    dead = [n for n, p in cluster.procs.items() if not p.alive()]
    assert not dead, f"controllers {dead} died\n{cluster.logs()}"
    assert wait_agreed(cluster) == before, f"{service}: state changed"
    tally.batches += 1
    tally.strict_batches += 1


@seed(23)
@fuzz_settings()
@given(batch=st.lists(requests_for("Health"), min_size=BATCH, max_size=BATCH))
def test_fuzz_health(cluster: Cluster, batch: list[tuple[MethodDescriptor, Any]]) -> None:
    fuzz(cluster, "Health", batch)


@seed(23)
@fuzz_settings()
@given(batch=st.lists(requests_for("ServerReflection"), min_size=BATCH, max_size=BATCH))
def test_fuzz_server_reflection(
    cluster: Cluster, batch: list[tuple[MethodDescriptor, Any]]
) -> None:
    fuzz(cluster, "ServerReflection", batch)


def test_both_services_got_their_requests_and_the_quorum_still_commits(cluster: Cluster) -> None:
    """The totals, and a working quorum. The suite runs in a random order: run
    before any of the two above (or alone), it first fuzzes the services not fuzzed yet."""
    fuzz_tests = {"Health": test_fuzz_health, "ServerReflection": test_fuzz_server_reflection}
    assert set(fuzz_tests) == set(STANDARD_SERVICES)
    for service, fuzz_test in fuzz_tests.items():
        if service not in _TALLIES:
            fuzz_test(cluster=cluster)
    for service in STANDARD_SERVICES:
        tally = _TALLIES.get(service)
        assert tally is not None and tally.sent >= FUZZ_REQUESTS, (service, tally)
        print(
            f"{service}: {tally.sent} requests, crashes 0, state changes 0 "
            f"({tally.strict_batches}/{tally.batches} batches digest-checked), "
            f"answers {dict(tally.codes)}"
        )
    for proc in cluster.procs.values():
        assert "Traceback" not in proc.log_text(), proc.log_text()[-3000:]
        rss = proc.metrics()["process_resident_memory_bytes"]
        print(f"controller {proc.node_id}: {rss / 2**20:.0f} MiB resident after the fuzzing")
    cluster.write(3)
