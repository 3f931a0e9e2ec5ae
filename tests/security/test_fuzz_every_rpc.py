"""Hypothesis-generated requests against every RPC of every service of three real
controllers: RaftQuorum, QuorumLog, Admin and BrokerLifecycle.

Each request is built from the method's descriptor with hostile values in every
field (`proto_strategies`): edge and overflowing integers, stale and future
epochs, wrong, empty and huge cluster ids, huge strings, unknown enum values,
very long repeated fields; or random bytes instead of a message. Streaming
methods get them over a stream. Raft senders are never voters (without mTLS a
voter's vote is legitimately obeyed; with it, the authorizer keeps non-cluster
principals out, see test_authorization.py).

Checked: every call is answered (a status or an answer, never UNKNOWN, i.e. no
unhandled exception in a servicer); after each write-type call that was refused
(a non-OK status, or every item refused) the leader's log end offset has not
moved; after each batch every controller still runs, and if the batch had no
accepted write, every controller's epoch, log end, applied offset and image
digest are what they were. A write that happens to be valid (a broker
registration with a random id, say) is counted, and the state re-read.
The figures (requests per service, crashes, state changes from refused
requests, answers by status) are printed for the README.

Budget: `FUZZ_REQUESTS` per service (default 5,000) in batches of
`BATCH` (`fuzz_rpc.py`); the module takes about a minute on two loaded cores.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.descriptor import MethodDescriptor
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass
from hypothesis import given, seed
from hypothesis import strategies as st

from quorum.common.channels import open_channel
from quorum.gen import admin_pb2 as api
from tests.integration.controller_cluster import Cluster
from tests.security.fuzz_rpc import (
    BATCH,
    FUZZ_REQUESTS,
    SERVICES,
    Tally,
    call,
    fuzz_settings,
    log_end,
    requests_for,
    wait_agreed,
)
from tests.security.proto_strategies import with_cluster_id

pytestmark = pytest.mark.slow

VOTERS = (1, 2, 3)

# Calls that may append to the metadata log when accepted.
WRITES = {
    "CreateTopics", "DeleteTopics", "CreatePartitions", "IncrementalAlterConfigs",
    "CreateAcls", "DeleteAcls", "ElectLeaders", "AlterPartition", "AllocateProducerIds",
    "UpdateFeatures", "UnregisterBroker", "AddRaftVoter", "RemoveRaftVoter", "UpdateRaftVoter",
    "RegisterBroker", "BrokerHeartbeat",
    "MetadataFetch", "MetadataFetchStream", "Write", "WriteStream",
}  # fmt: skip


# Requests that could move an epoch if a check were missing: an epoch change during
# their batches always fails. Other services' batches may see a load-caused election.
CAN_MOVE_EPOCHS = frozenset({"RaftQuorum"})


@dataclass
class Target:
    cluster: Cluster
    leader: int


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    c = Cluster.create(
        Path(tmp_path_factory.mktemp("fuzz")),
        # A broker registered by a lucky request is never fenced during the run,
        # so the leader writes nothing on its own.
        extra={"broker.session.timeout.ms": "3600000"},
    )
    c.start()
    try:
        leader = c.wait_for_leader(timeout_s=30).leader_id
        c.write(3)
        yield Target(c, leader)
    finally:
        c.stop_all()


_ALL_TALLIES: dict[str, Tally] = {}


def accepted(method: MethodDescriptor, answer: bytes) -> bool:
    """Whether an OK answer to a write says something was done: any item without
    an error, or an answer without per-item errors at all."""
    reply = GetMessageClass(method.output_type).FromString(answer)
    errors = list(_api_errors(reply))
    return not errors or any(e.error_code == 0 for e in errors)


def _api_errors(message: Message) -> Iterator[Any]:
    for desc, value in message.ListFields():
        if desc.type != desc.TYPE_MESSAGE or desc.message_type.GetOptions().map_entry:
            continue
        for item in value if desc.is_repeated else [value]:
            if desc.message_type.name == "ApiError":
                yield item
            else:
                yield from _api_errors(item)
    # An unset `error` field is error_code 0: success.
    if "error" in message.DESCRIPTOR.fields_by_name and not message.HasField("error"):
        yield api.ApiError()


async def send_batch(
    target: Target, service: str, batch: list[tuple[MethodDescriptor, Any]], tally: Tally
) -> int:
    """Send `batch` round the controllers; returns the accepted writes that moved
    the log. A refused write must leave the leader's log end where it was."""
    cluster = target.cluster
    channels = [open_channel(p.address) for p in cluster.procs.values()]
    leader = open_channel(cluster.procs[target.leader].address)
    accepted_here = 0
    try:
        end = await log_end(leader)
        for i, (method, request) in enumerate(batch):
            if isinstance(request, Message):
                request = with_cluster_id(request, cluster.cluster_id)
            # Writes go to the leader (a standby refuses them before any check).
            channel = leader if method.name in WRITES and i % 2 else channels[i % 3]
            started = time.monotonic()
            code, answer = await call(channel, SERVICES[service], method, request)
            if time.monotonic() - started > 1.0:
                tally.slow[f"{method.name}:{code}"] += 1
            tally.sent += 1
            tally.codes[code] += 1
            # UNKNOWN: an exception escaped a servicer; RESOURCE_EXHAUSTED only
            # comes from the rate limits, off here.
            assert code not in ("UNKNOWN", "INTERNAL", "RESOURCE_EXHAUSTED"), (method.name, code)
            if method.name not in WRITES:
                continue
            now = await log_end(leader)
            if answer is not None and accepted(method, answer):
                accepted_here += now[1] != end[1]  # a valid write; a no-op one moves nothing
                end = now
                continue
            if now[0] != end[0] and service not in CAN_MOVE_EPOCHS:
                # An election (a loaded machine): the new leader's epoch record moved
                # the log end. The batch's image digest check still covers this call.
                tally.elections += 1
                end = now
                continue
            assert now == end, f"refused {method.name} moved the log end {end} -> {now}"
            tally.refused_writes_checked += 1
    finally:
        for channel in [*channels, leader]:
            await channel.close()
    return accepted_here


def fuzz(target: Target, service: str, batch: list[tuple[MethodDescriptor, Any]]) -> None:
    cluster = target.cluster
    tally = _ALL_TALLIES.setdefault(service, Tally())
    before = wait_agreed(cluster)
    took = asyncio.run(send_batch(target, service, batch, tally))
    dead = [n for n, p in cluster.procs.items() if not p.alive()]
    assert not dead, f"controllers {dead} died\n{cluster.logs()}"
    tally.batches += 1
    tally.accepted_writes += took
    after = wait_agreed(cluster)
    if took == 0:
        same_epochs = {s[0] for s in after.values()} == {s[0] for s in before.values()}
        if same_epochs or service in CAN_MOVE_EPOCHS:
            assert after == before, f"{service}: state changed by refused requests"
        else:  # an election wrote its epoch record: the image must still be the same
            assert {s[3] for s in after.values()} == {s[3] for s in before.values()}, (
                f"{service}: state changed by refused requests"
            )
        tally.strict_batches += 1
    else:
        assert len({s[1:] for s in after.values()}) == 1, after  # replicas agree
    target.leader = cluster.wait_for_leader(timeout_s=30).leader_id  # after any election


@seed(23)
@fuzz_settings()
@given(batch=st.lists(requests_for("RaftQuorum"), min_size=BATCH, max_size=BATCH))
def test_fuzz_raft_quorum(target: Target, batch: list[tuple[MethodDescriptor, Any]]) -> None:
    fuzz(target, "RaftQuorum", batch)


@seed(23)
@fuzz_settings()
@given(batch=st.lists(requests_for("QuorumLog"), min_size=BATCH, max_size=BATCH))
def test_fuzz_quorum_log(target: Target, batch: list[tuple[MethodDescriptor, Any]]) -> None:
    fuzz(target, "QuorumLog", batch)


@seed(23)
@fuzz_settings()
@given(batch=st.lists(requests_for("Admin"), min_size=BATCH, max_size=BATCH))
def test_fuzz_admin(target: Target, batch: list[tuple[MethodDescriptor, Any]]) -> None:
    fuzz(target, "Admin", batch)


@seed(23)
@fuzz_settings()
@given(batch=st.lists(requests_for("BrokerLifecycle"), min_size=BATCH, max_size=BATCH))
def test_fuzz_broker_lifecycle(target: Target, batch: list[tuple[MethodDescriptor, Any]]) -> None:
    fuzz(target, "BrokerLifecycle", batch)


def test_every_service_got_its_requests_and_the_quorum_still_commits(target: Target) -> None:
    """The totals, and a working quorum. The suite runs in a random order: run
    before any of the four above (or alone), it first fuzzes the services not fuzzed yet."""
    fuzz_tests = {
        "RaftQuorum": test_fuzz_raft_quorum,
        "QuorumLog": test_fuzz_quorum_log,
        "Admin": test_fuzz_admin,
        "BrokerLifecycle": test_fuzz_broker_lifecycle,
    }
    assert set(fuzz_tests) == set(SERVICES)
    for service, fuzz_test in fuzz_tests.items():
        if service not in _ALL_TALLIES:
            fuzz_test(target=target)
    for service in SERVICES:
        tally = _ALL_TALLIES.get(service)
        assert tally is not None and tally.sent >= FUZZ_REQUESTS, (service, tally)
        print(
            f"{service}: {tally.sent} requests, crashes 0, state changes from refused "
            f"requests 0 ({tally.refused_writes_checked} refused writes checked one by one, "
            f"{tally.strict_batches}/{tally.batches} batches digest-checked, "
            f"{tally.accepted_writes} valid writes accepted), answers {dict(tally.codes)}, "
            f"slower than 1 s: {dict(tally.slow)}, elections during batches: {tally.elections}"
        )
    for proc in target.cluster.procs.values():
        assert "Traceback" not in proc.log_text(), proc.log_text()[-3000:]
    target.cluster.write(3)
