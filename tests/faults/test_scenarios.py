"""Fault scenarios on real controller (and broker) processes, every link through a
proxy, driven with `toxiproxy-python`; the client workload runs throughout and
both checkers judge the history once the faults have healed.

Each scenario prints one JSON line: writes attempted, acknowledged, refused, in
doubt, lost (must be 0) and the seconds without an acknowledged write. The
random run (scenario 8) lasts FAULT_RANDOM_S seconds (60 by default).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from fault_cluster import FaultCluster, name, to_thread
from shared_scenarios import impaired_follower, leader_isolation
from toxiproxy import Toxiproxy
from toxiproxy_server import toxiproxy_server
from workload import Workload, running

from quorum.controller.record_codec import noop
from quorum.gen import admin_pb2 as api
from quorum.gen import raft_pb2 as pb
from quorum.gen import raft_pb2_grpc as pb_grpc
from quorum.rpc.wire_errors import wire_error

pytestmark = pytest.mark.slow

RANDOM_S = float(os.environ.get("FAULT_RANDOM_S", "60"))


@pytest.fixture(scope="module")
def toxiproxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Toxiproxy]:
    with toxiproxy_server(tmp_path_factory.mktemp("toxiproxy") / "server.log") as server:
        yield server


@pytest.fixture
def fc(tmp_path: Path, toxiproxy: Toxiproxy) -> Iterator[FaultCluster]:
    cluster = FaultCluster.create(tmp_path, toxiproxy)
    try:
        cluster.cluster.start()
        cluster.leader()
        yield cluster
    finally:
        cluster.stop()
        for proxy in list(toxiproxy.proxies().values()):
            proxy.destroy()


def epoch(fc: FaultCluster) -> int:
    return int(fc.wait_converged().popitem()[1].leader_epoch)


# ---------------------------------------------------------------- scenario 1


def test_1_isolated_leader_is_replaced_resigns_and_rejoins(fc: FaultCluster) -> None:
    leader_isolation(fc, "1 leader isolation")


# ---------------------------------------------------------------- scenario 2


def test_2_isolated_follower_returns_without_disturbing_the_leader(fc: FaultCluster) -> None:
    leader = fc.leader()
    before = epoch(fc)
    follower = next(n for n in fc.ids if n != leader)

    async def scenario() -> tuple[Workload, float, float]:
        workload = fc.workload()
        async with running(workload):
            await asyncio.sleep(1)
            cut = time.monotonic()
            await to_thread(fc.net.isolate, name(follower))
            await asyncio.sleep(4)  # well past the election timeout (1 s)
            heal = time.monotonic()
            await to_thread(fc.net.heal)
            await asyncio.sleep(3)
        return workload, cut, heal

    workload, cut, heal = asyncio.run(scenario())
    fc.check(workload, "2 follower isolation", (cut, heal))
    assert epoch(fc) == before, "pre-vote should keep the returning follower from an election"
    assert fc.leader() == leader


# ---------------------------------------------------------------- scenario 3


@pytest.mark.parametrize("direction", ["deaf", "mute"])
def test_3_asymmetric_partition_of_a_follower(fc: FaultCluster, direction: str) -> None:
    """deaf: the follower sends but hears nothing; mute: it hears but nothing it
    sends arrives. Either way the leader keeps its epoch and nothing is lost."""
    leader = fc.leader()
    before = epoch(fc)
    follower = next(n for n in fc.ids if n != leader)

    async def scenario() -> tuple[Workload, float, float]:
        workload = fc.workload()
        async with running(workload):
            await asyncio.sleep(1)
            cut = time.monotonic()
            fault = fc.net.deafen if direction == "deaf" else fc.net.mute
            await to_thread(fault, name(follower))
            await asyncio.sleep(4)
            heal = time.monotonic()
            await to_thread(fc.net.heal)
            await asyncio.sleep(3)
        return workload, cut, heal

    workload, cut, heal = asyncio.run(scenario())
    fc.check(workload, f"3 asymmetric ({direction}) follower", (cut, heal))
    assert epoch(fc) == before
    assert fc.leader() == leader


# ---------------------------------------------------------------- scenario 4


def test_4_slow_follower_links_leave_commit_latency_near_the_fast_path(
    fc: FaultCluster,
) -> None:
    impaired_follower(fc, lambda follower: fc.net.slow(follower, 200, 50), "4 slow follower")


# ---------------------------------------------------------------- scenario 7


def test_7_rolling_restart_of_every_controller_under_writes(fc: FaultCluster) -> None:
    """Each controller in turn SIGTERMed and restarted while the workload runs.
    A write a stopping controller had appended is answered REQUEST_TIMED_OUT (it
    may still commit); refusals from a controller while it stops are counted as in
    doubt, everything else is checked as usual."""

    async def scenario() -> tuple[Workload, float, float, list[tuple[int, float, float]]]:
        workload = fc.workload()
        stops = []
        async with running(workload):
            await asyncio.sleep(1)
            start = time.monotonic()
            for node in fc.ids:
                sigterm = time.monotonic()
                fc.cluster.kill(node, 15)  # SIGTERM: a leader hands over first
                code = await to_thread(fc.cluster.wait_exit, node)
                stops.append((node, sigterm - 0.05, time.monotonic()))
                assert code == 0, fc.cluster.logs()
                fc.cluster.start(node)
                await to_thread(fc.wait_caught_up, node)
                await asyncio.sleep(1)
            end = time.monotonic()
            await asyncio.sleep(1)
        return workload, start, end, stops

    workload, start, end, stops = asyncio.run(scenario())
    doubted = sum(workload.doubt_refusals(*stop) for stop in stops)
    print(f"{doubted} refusals from stopping controllers counted as in doubt")
    figures = fc.check(workload, "7 rolling restart", (start, end))
    assert figures["unavailable_s"] < 5


def test_7_a_write_refused_by_a_stopping_leader_is_not_committed(fc: FaultCluster) -> None:
    """The bug above, made certain: the followers' acknowledgements are held back
    1.5 s (latency on their requests to the leader only), so a write is on every
    follower but not yet known committed when the leader is stopped."""
    leader = fc.leader()
    followers = [n for n in fc.ids if n != leader]
    for follower in followers:
        fc.net.add(name(follower), name(leader), "upstream", "latency", latency=1500)

    async def scenario() -> tuple[str, int]:
        workload = fc.workload(appenders=0, registers=0)
        payload = b"w9-1"
        request = pb.WriteRequest(cluster_id=fc.cluster.cluster_id, records=[noop(payload)])
        stub = pb_grpc.QuorumLogStub(workload.channel(leader))
        write = asyncio.ensure_future(stub.Write(request, timeout=10))
        await asyncio.sleep(0.5)
        fc.cluster.kill(leader, 15)
        try:
            reply = await write
            outcome = f"acknowledged at {reply.last_offset}"
        except grpc.aio.AioRpcError as err:
            error = wire_error(err).error
            outcome = error.name if error is not None else err.code().name
        await to_thread(fc.cluster.wait_exit, leader)
        fc.net.heal()
        fc.cluster.start(leader)
        return outcome, 0

    outcome, _ = asyncio.run(scenario())
    logs = fc.committed_logs()
    committed = any(b"w9-1" in log.records.values() for log in logs)
    print(f"the write's answer: {outcome}; committed afterwards: {committed}")
    # A stopping leader answers REQUEST_TIMED_OUT ("may still commit") for a write it
    # appended; only a definite refusal promises the write is not there.
    assert outcome.startswith("acknowledged") or outcome == "REQUEST_TIMED_OUT" or not committed, (
        f"refused with {outcome}, yet committed"
    )


# ---------------------------------------------------------------- scenario 8


def random_fault(fc: FaultCluster, rng: random.Random) -> str:
    nodes = [name(n) for n in fc.ids]
    a, b = rng.sample(nodes, 2)
    match rng.choice(["isolate", "cut", "deaf", "latency", "reset", "slicer", "limit"]):
        case "isolate":
            fc.net.isolate(a)
            return f"isolate {a}"
        case "cut":
            fc.net.partition(a, b)
            return f"cut {a}-{b}"
        case "deaf":
            fc.net.deafen(a)
            return f"deafen {a}"
        case "latency":
            ms = rng.choice([50, 200, 1500])
            fc.net.slow(a, ms, ms // 4)
            return f"latency {ms} ms on {a}"
        case "reset":
            fc.net.add(a, b, "downstream", "reset_peer", timeout=rng.choice([0, 500]))
            return f"reset_peer {a}->{b}"
        case "slicer":
            fc.net.add(a, b, "upstream", "slicer", average_size=64, size_variation=32, delay=500)
            return f"slicer {a}->{b}"
        case _:
            fc.net.add(a, b, "downstream", "limit_data", bytes=rng.choice([100, 10_000]))
            return f"limit_data {a}->{b}"


def test_8_random_faults(fc: FaultCluster) -> None:
    seed = int(os.environ.get("FAULT_SEED", str(random.randrange(1 << 30))))
    rng = random.Random(seed)
    print(f"random faults for {RANDOM_S:.0f}s, FAULT_SEED={seed}")

    async def scenario() -> tuple[Workload, float, float]:
        workload = fc.workload()
        async with running(workload):
            start = time.monotonic()
            while time.monotonic() - start < RANDOM_S:
                faults = [await to_thread(random_fault, fc, rng) for _ in range(rng.randint(1, 2))]
                hold = rng.uniform(0.5, 4)
                print(f"  +{time.monotonic() - start:5.1f}s {', '.join(faults)} for {hold:.1f}s")
                await asyncio.sleep(hold)
                await to_thread(fc.net.heal)
                await asyncio.sleep(rng.uniform(0.5, 3))
            end = time.monotonic()
            await asyncio.sleep(3)
        return workload, start, end

    workload, start, end = asyncio.run(scenario())
    fc.check(workload, f"8 random faults ({RANDOM_S:.0f}s, seed {seed})", (start, end))


# ---------------------------------------------------------------- scenario 5

SESSION_MS = 3000
BROKERS = (101, 102, 103)


@pytest.fixture
def fcb(tmp_path: Path, toxiproxy: Toxiproxy) -> Iterator[FaultCluster]:
    cluster = FaultCluster.create(
        tmp_path,
        toxiproxy,
        brokers=BROKERS,
        extra={"broker.session.timeout.ms": str(SESSION_MS)},
        broker_extra={
            "broker__session__timeout__ms": str(SESSION_MS),
            "broker__heartbeat__interval__ms": "500",
        },
    )
    try:
        cluster.cluster.start()
        cluster.leader()
        cluster.cluster.start_brokers()
        yield cluster
    finally:
        cluster.stop()
        for proxy in list(toxiproxy.proxies().values()):
            proxy.destroy()


def brokers_view(fc: FaultCluster) -> dict[int, api.BrokerDescription]:
    reply = fc.cluster.call("admin", "DescribeCluster", api.DescribeClusterRequest())
    return {b.broker_id: b for b in reply.brokers}


def partitions(fc: FaultCluster, topic: str) -> list[api.PartitionDescription]:
    reply = fc.cluster.call("admin", "DescribeTopics", api.DescribeTopicsRequest(names=[topic]))
    return list(reply.topics[0].partitions)


def test_5_broker_cut_off_is_fenced_its_leaderships_move_and_it_returns(
    fcb: FaultCluster,
) -> None:
    fc = fcb

    def all_online() -> bool:
        view = brokers_view(fc)
        return len(view) == 3 and all(b.state == "ONLINE" for b in view.values())

    fc.cluster.wait_until(all_online, 30, "brokers ONLINE")
    topic = api.CreatableTopic(
        name="orders", num_partitions=6, replication_factor=3, configs={"min.insync.replicas": "1"}
    )
    reply = fc.cluster.call("admin", "CreateTopics", api.CreateTopicsRequest(topics=[topic]))
    assert reply.topics[0].error.error_code == 0, reply
    victim = 101
    assert any(p.leader == victim for p in partitions(fc, "orders"))
    leaderless: list[str] = []
    samples = 0

    def sample() -> bool:
        """True once the victim is fenced; records any partition left without a
        leader while an unfenced ISR member could lead."""
        nonlocal samples
        samples += 1
        view = brokers_view(fc)
        for p in partitions(fc, "orders"):
            live = [r for r in p.isr if r in view and not view[r].fenced]
            if p.leader < 0 and live:
                leaderless.append(f"partition {p.partition} leaderless, ISR {list(p.isr)} live")
        return view[victim].fenced

    cut = time.monotonic()
    fc.net.isolate(name(victim))
    fc.cluster.wait_until(sample, SESSION_MS / 1000 + 10, f"broker {victim} fenced")
    fenced_s = time.monotonic() - cut
    after = partitions(fc, "orders")
    assert all(p.leader in (102, 103) for p in after), after
    assert all(victim not in p.isr for p in after), after
    heal = time.monotonic()
    fc.net.heal()
    fc.cluster.wait_until(
        lambda: not sample() and brokers_view(fc)[victim].state == "ONLINE",
        30,
        f"broker {victim} back ONLINE",
    )
    unfenced_s = time.monotonic() - heal
    print(json.dumps({"scenario": "5 broker cut off", "fenced_after_s": round(fenced_s, 2),
                      "unfenced_after_heal_s": round(unfenced_s, 2), "samples": samples,
                      "leaderless_with_live_isr": len(leaderless)}))  # fmt: skip
    assert not leaderless, leaderless[:5]
    assert SESSION_MS / 1000 - 1 <= fenced_s <= SESSION_MS / 1000 + 5


# ---------------------------------------------------------------- scenario 6


def acls(count: int, start: int) -> api.CreateAclsRequest:
    return api.CreateAclsRequest(
        creations=[
            api.AclBinding(
                resource_type=2,
                resource_name=f"topic-{i:06d}-" + "x" * 60,
                pattern_type=3,
                principal=f"User:user-{i:06d}",
                host="*",
                operation=3,
                permission_type=3,
            )
            for i in range(start, start + count)
        ]
    )


def snapshot_bytes(data_dir: Path) -> int:
    """The newest snapshot's size on disk. Retention may delete a snapshot (or a
    file of one) while we walk, so vanished entries are skipped and retried.
    Dot-directories (the transfer archives, temporary writes) are not snapshots."""
    snapshots = data_dir / "__cluster_metadata-0" / "snapshots"
    for _ in range(20):
        try:
            newest = max(
                (d for d in snapshots.iterdir() if d.is_dir() and not d.name.startswith(".")),
                key=lambda d: d.stat().st_mtime,
            )
            return sum(f.stat().st_size for f in newest.rglob("*") if f.is_file())
        except FileNotFoundError:
            time.sleep(0.05)
    raise AssertionError(f"snapshots under {snapshots} kept vanishing")


def test_6_snapshot_transfer_over_a_bandwidth_limited_link(
    tmp_path: Path, toxiproxy: Toxiproxy
) -> None:
    """A follower away while the leader snapshots and cuts its log catches up by
    FetchSnapshot over a link limited to 100 KB/s: the transfer completes, the
    snapshot's checksum is verified on install, and the images agree."""
    rate_kb_s = 100
    fc = FaultCluster.create(
        tmp_path,
        toxiproxy,
        extra={
            "metadata.snapshot.max.new.record.bytes": "65536",
            "metadata.log.segment.bytes": "65536",
            "metadata.max.retention.bytes": "0",
        },
    )
    try:
        fc.cluster.start()
        leader = fc.leader()
        follower = next(n for n in fc.ids if n != leader)
        fc.net.isolate(name(follower))
        for start in range(0, 3000, 250):
            reply = fc.cluster.call("admin", "CreateAcls", acls(250, start))
            assert all(r.error.error_code == 0 for r in reply.results), reply
        fc.cluster.wait_until(
            lambda: fc.cluster.describe(leader).log_start_offset > 0, 30, "the leader's log cut"
        )
        size = snapshot_bytes(fc.cluster.procs[leader].data_dir)
        for other in fc.ids:
            if other != follower:
                fc.net.throttle(name(follower), name(other), rate_kb_s)
                fc.net.throttle(name(other), name(follower), rate_kb_s)
        start_s = time.monotonic()
        fc.net.remove("timeout")  # the cut ends; the throttle stays
        proc = fc.cluster.procs[follower]
        fc.cluster.wait_until(
            lambda: proc.metrics()["quorum_raft_snapshots_installed_total"] >= 1,
            120,
            "the snapshot installed",
        )
        took = time.monotonic() - start_s
        fc.net.heal()
        views = fc.wait_converged()
        digests = {
            n: (v.applied_offset, fc.cluster.describe(n).image_digest) for n, v in views.items()
        }
        assert len(set(digests.values())) == 1, digests
        print(json.dumps({"scenario": "6 snapshot over 100 KB/s", "snapshot_bytes": size,
                          "transfer_s": round(took, 2),
                          "floor_s": round(size / (rate_kb_s * 1000), 2)}))  # fmt: skip
        assert "installed snapshot" in proc.log_text()
        assert took >= 0.5 * size / (rate_kb_s * 1000), (took, size)
    finally:
        fc.stop()
        for proxy in list(toxiproxy.proxies().values()):
            proxy.destroy()
