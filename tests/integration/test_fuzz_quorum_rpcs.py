"""Seeded fuzzing of the quorum and broker RPCs against three real controllers.

Every request is one a hostile or broken client could send without being a
voter: random numbers in every field (negative, huge, past int32 epochs), a
right or wrong cluster id, senders that are not voters, and random bytes instead
of a message. After each batch every controller must still run, have logged no
traceback, and sit at the epoch, log end and image digest it had before; and the
quorum must still commit. The counts are printed for the README's figures.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from controller_cluster import Cluster, run, running_cluster

from quorum.gen import broker_pb2 as bpb
from quorum.gen import raft_pb2 as pb

pytestmark = pytest.mark.slow

REQUESTS_PER_BATCH = 300
BATCHES = 4
SEED = 17

INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)


def number(rng: random.Random, bounds: tuple[int, int]) -> int:
    """Mostly edge values, some uniform."""
    low, high = bounds
    edges = [low, -1, 0, 1, 2, 3, 2**31 - 2, 2**31 - 1, high, 10**9]
    value = rng.choice(edges) if rng.random() < 0.6 else rng.randint(low, high)
    return max(low, min(high, value))


def non_voter(rng: random.Random) -> int:
    return rng.choice([4242, 0, -1, 2**31 - 1, rng.randint(100, 2**31 - 1)])


def build(rng: random.Random, cluster_id: str) -> tuple[str, str, Any]:
    """(service, method, request) with random fields; the sender is never a voter."""
    cid = cluster_id if rng.random() < 0.7 else rng.choice(["", "other", "x" * 5000])
    kind = rng.randrange(8)
    if kind == 0:
        return "raft", "Fetch", pb.FetchRequest(
            cluster_id=cid, replica_id=non_voter(rng), epoch=number(rng, INT32),
            fetch_offset=number(rng, INT64), last_fetched_epoch=number(rng, INT32),
            known_high_watermark=number(rng, INT64),
        )  # fmt: skip
    if kind == 1:
        return "raft", "Vote", pb.VoteRequest(
            cluster_id=cid, candidate_epoch=number(rng, INT32), candidate_id=non_voter(rng),
            last_offset_epoch=number(rng, INT32), last_offset=number(rng, INT64),
            pre_vote=rng.random() < 0.5,
        )  # fmt: skip
    if kind == 2:
        return (
            "raft",
            "BeginQuorumEpoch",
            pb.BeginQuorumEpochRequest(
                cluster_id=cid, leader_epoch=number(rng, INT32), leader_id=non_voter(rng)
            ),
        )
    if kind == 3:
        return "raft", "EndQuorumEpoch", pb.EndQuorumEpochRequest(
            cluster_id=cid, leader_epoch=number(rng, INT32), leader_id=non_voter(rng),
            preferred_successors=[number(rng, INT32) for _ in range(rng.randrange(4))],
        )  # fmt: skip
    if kind == 4:
        return "raft", "FetchSnapshot", pb.FetchSnapshotRequest(
            cluster_id=cid, replica_id=non_voter(rng), epoch=number(rng, INT32),
            snapshot_id=pb.SnapshotId(end_offset=number(rng, INT64), epoch=number(rng, INT32)),
            position=number(rng, INT64), max_bytes=number(rng, INT32),
        )  # fmt: skip
    if kind == 5:
        return "broker", "MetadataFetch", bpb.MetadataFetchRequest(
            cluster_id=cid, broker_id=non_voter(rng), broker_epoch=number(rng, INT64),
            fetch_offset=number(rng, INT64), last_fetched_epoch=number(rng, INT32),
            current_state=rng.choice([0, 1, 2, 3, 4, 99, -1]), max_wait_ms=rng.choice([0, 1]),
            max_records=number(rng, INT32),
        )  # fmt: skip
    if kind == 6:
        return "raft", "DescribeQuorum", pb.DescribeQuorumRequest(cluster_id=cid)
    method = rng.choice(["Fetch", "Vote", "BeginQuorumEpoch", "EndQuorumEpoch", "FetchSnapshot"])
    return "raft", method, rng.randbytes(rng.randrange(1, 200))


SERVICES = {"raft": "quorum.raft.v1.RaftQuorum", "broker": "quorum.broker.v1.BrokerLifecycle"}


def serializer(request: Any) -> Callable[[Any], bytes]:
    return (lambda b: b) if isinstance(request, bytes) else (lambda m: m.SerializeToString())


async def send_batch(addresses: list[str], requests: list[tuple[str, str, Any]]) -> dict[str, int]:
    """Send every request to a random node; count answers by status code."""
    codes: dict[str, int] = {}
    channels = [grpc.aio.insecure_channel(a) for a in addresses]
    try:
        for i, (service, method, request) in enumerate(requests):
            call = channels[i % len(channels)].unary_unary(
                f"/{SERVICES[service]}/{method}",
                request_serializer=serializer(request),
                response_deserializer=lambda b: b,
            )
            try:
                await call(request, timeout=5)
                code = "OK"
            except grpc.aio.AioRpcError as err:
                code = err.code().name
            codes[code] = codes.get(code, 0) + 1
    finally:
        for channel in channels:
            await channel.close()
    return codes


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    with running_cluster(tmp_path) as c:
        c.write(5)
        yield c


def state(cluster: Cluster) -> dict[int, tuple[int, int, int, str]]:
    """Each node's (epoch, log end, applied offset, image digest)."""
    views = {n: cluster.describe(n) for n in cluster.procs}
    return {
        n: (v.leader_epoch, v.log_end_offset, v.applied_offset, v.image_digest)
        for n, v in views.items()
    }


def test_fuzzed_requests_from_non_voters_change_nothing(cluster: Cluster) -> None:
    rng = random.Random(SEED)
    totals: dict[str, int] = {}
    cluster.wait_until(lambda: len({s[1:] for s in state(cluster).values()}) == 1, 10, "agree")
    for _ in range(BATCHES):
        before = state(cluster)
        batch = [build(rng, cluster.cluster_id) for _ in range(REQUESTS_PER_BATCH)]
        for code, count in run(send_batch(cluster.voter_addresses(), batch)).items():
            totals[code] = totals.get(code, 0) + count
        assert all(p.alive() for p in cluster.procs.values()), cluster.logs()
        assert state(cluster) == before
    for proc in cluster.procs.values():
        assert "Traceback" not in proc.log_text(), proc.log_text()[-3000:]
    cluster.write(3)  # and the quorum still commits
    sent = sum(totals.values())
    print(f"fuzzed requests: {sent}, crashes: 0, state changes: 0, answers: {totals}")
    assert sent == REQUESTS_PER_BATCH * BATCHES
    assert "UNKNOWN" not in totals and "RESOURCE_EXHAUSTED" not in totals, totals
