"""Three controllers and three broker agents, all real processes over real gRPC.

The module's tests share one cluster (`--dist loadscope` keeps them on one
worker) and run in any order: before each test every process runs, every broker
is ONLINE, the topics `orders` and `strict` have full ISRs and their preferred
leaders (`settled`), and each test makes the rest of the state it asserts on.
All brokers come ONLINE; a killed broker is fenced within its session and its
leaderships and ISR places move; a restarted one comes back FENCED, catches up,
goes ONLINE and is put back into ISRs by the leaders' AlterPartition; a SIGTERM'd
broker hands its leaderships over before it exits; a controller failover fences
nobody; a broker below the controllers' log start loads a snapshot; a damaged
cache stops a broker with a clear error until it is told to rebuild. Malformed
and stale MetadataFetch calls change nothing.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from controller_cluster import BIN, Cluster, run

from quorum.admin_client import AdminClient, AdminError
from quorum.common.meta_properties import random_uuid
from quorum.gen import admin_pb2 as api
from quorum.gen import broker_pb2 as bpb
from quorum.gen import broker_pb2_grpc as bpb_grpc
from quorum.rpc.wire_errors import wire_error

BROKERS = (11, 12, 13)
SESSION_MS = 3000
HEARTBEAT_MS = 500
TOPIC = "orders"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster.create(
        Path(tmp_path_factory.mktemp("brokers")),
        extra={
            "broker.session.timeout.ms": str(SESSION_MS),
            # Frequent controller snapshots move the log start, so a broker that
            # was away long enough must load a snapshot.
            "metadata.snapshot.max.new.record.bytes": "4096",
            "metadata.log.segment.bytes": "8192",
        },
    )
    c.start()
    try:
        c.wait_for_leader()
        c.add_brokers(
            *BROKERS,
            broker__heartbeat__interval__ms=str(HEARTBEAT_MS),
            broker__session__timeout__ms=str(SESSION_MS),
            metadata__snapshot__max__new__record__bytes="2048",
            controlled__shutdown__timeout__ms="15000",
        )
        c.start_brokers()
        yield c
    finally:
        c.stop_all()


def call(cluster: Cluster, kind: str, method: str, request: Any) -> Any:
    return cluster.call(kind, method, request, deadline_s=20)


def brokers_view(cluster: Cluster) -> dict[int, api.BrokerDescription]:
    reply = call(cluster, "admin", "DescribeCluster", api.DescribeClusterRequest())
    return {b.broker_id: b for b in reply.brokers}


def agent_state(cluster: Cluster, broker_id: int) -> str:
    metrics = cluster.brokers[broker_id].metrics()
    return next(
        key.split('"')[1]
        for key, value in metrics.items()
        if key.startswith("quorum_broker_state{") and value == 1.0
    )


def partitions(cluster: Cluster, topic: str = TOPIC) -> list[api.PartitionDescription]:
    reply = call(cluster, "admin", "DescribeTopics", api.DescribeTopicsRequest(names=[topic]))
    assert reply.topics[0].error.error_code == 0, reply
    return list(reply.topics[0].partitions)


def high_watermark(cluster: Cluster) -> int:
    return int(cluster.describe(cluster.wait_for_leader().leader_id).high_watermark)


def caught_up(cluster: Cluster, broker_id: int) -> bool:
    metrics = cluster.brokers[broker_id].metrics()
    return metrics["quorum_broker_metadata_last_applied_record_offset"] + 1 >= high_watermark(
        cluster
    )


def create_topic(
    cluster: Cluster, name: str, partitions_: int, min_isr: int, replication_factor: int = 3
) -> None:
    reply = call(cluster, "admin", "CreateTopics", api.CreateTopicsRequest(topics=[
        api.CreatableTopic(
            name=name, num_partitions=partitions_, replication_factor=replication_factor,
            configs={"min.insync.replicas": str(min_isr)},
        )
    ]))  # fmt: skip
    assert reply.topics[0].error.error_code == 0, reply


def wait_online(cluster: Cluster, *broker_ids: int, timeout_s: float = 20) -> None:
    def online() -> bool:
        view = brokers_view(cluster)
        return all(
            agent_state(cluster, b) == "ONLINE" and view[b].state == "ONLINE" for b in broker_ids
        )

    cluster.wait_until(online, timeout_s, f"brokers {broker_ids} ONLINE")


@pytest.fixture(scope="module")
def topics(cluster: Cluster) -> None:
    """`orders` (6 partitions, min.insync.replicas 2) and `strict` (3, min 3)."""
    wait_online(cluster, *BROKERS)
    create_topic(cluster, TOPIC, 6, min_isr=2)
    create_topic(cluster, "strict", 3, min_isr=3)


@pytest.fixture(autouse=True)
def settled(cluster: Cluster, topics: None) -> None:
    """What every test starts from, whatever ran before it: all controllers and
    brokers running, the brokers ONLINE and caught up, full ISRs, preferred leaders."""
    for node_id, proc in cluster.procs.items():
        if not proc.alive():
            cluster.start(node_id)
    for node_id in cluster.procs:  # a restarted controller answers before tests dial it
        serving = f"controller {node_id} serving"
        cluster.wait_until(lambda n=node_id: answers(cluster, n), 30, serving)
    dead = [b for b in BROKERS if not cluster.brokers[b].alive()]
    if dead:
        cluster.start_brokers(*dead)
    wait_online(cluster, *BROKERS, timeout_s=30)
    cluster.wait_until(
        lambda: all(len(p.isr) == 3 for t in (TOPIC, "strict") for p in partitions(cluster, t)),
        30,
        "full ISRs (AlterPartition from the leaders)",
    )
    call(cluster, "admin", "ElectLeaders", api.ElectLeadersRequest(
        election_type=api.PREFERRED))  # fmt: skip
    for b in BROKERS:
        cluster.wait_until(lambda b=b: caught_up(cluster, b), 15, f"broker {b} caught up")


def answers(cluster: Cluster, node_id: int) -> bool:
    try:
        cluster.describe(node_id)
    except Exception:  # refused while it starts, whatever the client wraps it in
        return False
    return True


def kill_until_fenced(cluster: Cluster, broker_id: int) -> float:
    """SIGKILL the broker; seconds until the controller fenced it."""
    cluster.brokers[broker_id].popen.send_signal(signal.SIGKILL)  # type: ignore[union-attr]
    killed = time.monotonic()
    cluster.wait_until(
        lambda: brokers_view(cluster)[broker_id].fenced, (SESSION_MS + HEARTBEAT_MS) / 1000 + 3,
        f"broker {broker_id} fenced",
    )  # fmt: skip
    return time.monotonic() - killed


def test_every_broker_registers_and_comes_online(cluster: Cluster) -> None:
    wait_online(cluster, *BROKERS)
    view = brokers_view(cluster)
    for b in BROKERS:
        assert view[b].reported_state == "ONLINE"
        assert 0 <= view[b].last_heartbeat_age_ms < SESSION_MS
        assert view[b].port == cluster.brokers[b].port
    for b in BROKERS:
        cluster.wait_until(lambda b=b: caught_up(cluster, b), 10, f"broker {b} caught up")
    assert {p.leader for p in partitions(cluster)} == set(BROKERS)


def test_the_apply_trace_records_every_applied_record_with_its_times(cluster: Cluster) -> None:
    trace = cluster.brokers[11].data_dir / "apply-trace.jsonl"
    rows = [json.loads(line) for line in trace.read_text().splitlines()]
    offsets = [r["offset"] for r in rows]
    assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
    types = {r["record_type"] for r in rows}
    assert {"register_broker", "topic", "partition", "config"} <= types, types
    created = [r for r in rows if r["record_type"] == "partition"]
    for r in created:
        assert r["broker_id"] == 11
        # Append (the leader's wall-anchored clock) shortly before commit (its wall clock).
        assert -50 <= r["commit_time_ms"] - r["append_time_ms"] < 5000, r
        assert r["commit_time_ms"] <= r["receive_time_ms"] + 1000
        assert r["receive_time_ms"] <= r["apply_time_ms"]
        assert abs(r["clock_offset_ms"]) < 1000  # one machine: the clocks agree


def test_a_killed_broker_is_fenced_and_its_leaderships_and_isr_places_move(
    cluster: Cluster,
) -> None:
    before = partitions(cluster)
    assert any(p.leader == 11 for p in before)
    fenced_after = kill_until_fenced(cluster, 11)
    # Fenced no earlier than its session allows (it was heartbeating until killed).
    assert fenced_after >= SESSION_MS / 1000 - HEARTBEAT_MS / 1000 - 0.5, fenced_after
    after = partitions(cluster)
    assert all(p.leader in (12, 13) for p in after), after
    assert all(11 not in p.isr and len(p.isr) == 2 for p in after), after
    assert not any(p.under_min_isr for p in after)
    strict = partitions(cluster, "strict")
    assert all(p.under_min_isr for p in strict), strict


def test_the_restarted_broker_catches_up_goes_online_and_rejoins_the_isrs(
    cluster: Cluster,
) -> None:
    kill_until_fenced(cluster, 11)
    cluster.start_brokers(11)
    wait_online(cluster, 11)
    log = cluster.brokers[11].log_text()
    start_line = [line for line in log.splitlines() if "starting at metadata offset" in line][-1]
    assert not start_line.endswith("offset 0; controllers"), start_line
    assert int(start_line.split("metadata offset ")[1].split(";")[0]) > 0
    assert "FENCED -> ONLINE" in log.split(start_line)[1]
    cluster.wait_until(
        lambda: (
            all(len(p.isr) == 3 for p in partitions(cluster))
            and all(len(p.isr) == 3 for p in partitions(cluster, "strict"))
        ),
        15,
        "broker 11 back in every ISR (AlterPartition from the leaders)",
    )
    assert not any(p.under_min_isr for p in partitions(cluster, "strict"))


def test_sigterm_moves_leaderships_away_before_the_broker_exits(cluster: Cluster) -> None:
    assert any(p.leader == 12 for p in partitions(cluster))  # preferred leaders (settled)
    proc = cluster.brokers[12]
    assert proc.popen is not None
    proc.popen.send_signal(signal.SIGTERM)
    assert proc.popen.wait(20) == 0
    after = partitions(cluster)
    assert all(p.leader in (11, 13) for p in after), after
    assert all(p.leader != -1 for p in after)
    view = brokers_view(cluster)
    assert view[12].fenced
    text = proc.log_text()
    assert text.index("-> STOPPING") < text.index("STOPPING -> OFFLINE")
    cluster.start_brokers(12)
    wait_online(cluster, 12)


def test_a_controller_failover_fences_no_live_broker(cluster: Cluster) -> None:
    old = cluster.wait_for_leader().leader_id
    cluster.kill(old)
    cluster.wait_exit(old)
    new = cluster.wait_for_leader([n for n in cluster.procs if n != old]).leader_id
    time.sleep((SESSION_MS + 2 * HEARTBEAT_MS) / 1000)
    view = brokers_view(cluster)
    assert not any(view[b].fenced for b in BROKERS), view
    assert all(agent_state(cluster, b) == "ONLINE" for b in BROKERS)
    create_topic(cluster, "after-failover", 2, min_isr=1)
    for b in BROKERS:
        cluster.wait_until(lambda b=b: caught_up(cluster, b), 10, f"broker {b} follows {new}")
    cluster.start(old)


def test_a_broker_below_the_log_start_loads_a_snapshot(cluster: Cluster) -> None:
    wait_online(cluster, 13)  # run alone, the agent may still be starting
    cluster.wait_until(lambda: caught_up(cluster, 13), 10, "broker 13 caught up")
    proc = cluster.brokers[13]
    assert proc.popen is not None
    proc.popen.send_signal(signal.SIGTERM)
    assert proc.popen.wait(20) == 0
    stopped_at = int(json.loads(
        (proc.data_dir / "apply-trace.jsonl").read_text().splitlines()[-1])["offset"])  # fmt: skip
    snapshot_moved_the_log_start(cluster, past=stopped_at + 1, prefix="while-away")
    cluster.start_brokers(13)
    wait_online(cluster, 13)
    cluster.wait_until(lambda: caught_up(cluster, 13), 10, "broker 13 caught up")
    metrics = proc.metrics()
    assert metrics["quorum_broker_metadata_snapshots_loaded_total"] >= 1
    assert metrics["quorum_broker_metadata_snapshot_load_seconds_count"] >= 1
    assert metrics["quorum_broker_metadata_load_errors_total"] == 0
    assert "loading snapshot" in proc.log_text()


def test_a_corrupted_cache_stops_the_broker_until_told_to_rebuild(cluster: Cluster) -> None:
    wait_online(cluster, 13)  # run alone, the agent may still be starting
    create_topic(cluster, "cache-filler", 6, 1)
    cluster.wait_until(lambda: caught_up(cluster, 13), 10, "broker 13 caught up")
    proc = cluster.brokers[13]
    assert proc.popen is not None
    proc.popen.send_signal(signal.SIGTERM)
    assert proc.popen.wait(20) == 0
    segments = sorted((proc.data_dir / "__cluster_metadata-0").glob("*.log"))
    damaged = max(segments, key=lambda p: p.stat().st_size)
    data = bytearray(damaged.read_bytes())
    assert len(data) > 200
    data[len(data) // 3] ^= 0xFF
    damaged.write_bytes(bytes(data))
    result = subprocess.run(
        [str(BIN / "broker-agent"), "--config", str(proc.config)],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert result.returncode == 1, result
    assert damaged.name in result.stderr and "--rebuild-metadata-cache" in result.stderr
    cluster.start_brokers(13, flags=("--rebuild-metadata-cache",))
    wait_online(cluster, 13)
    cluster.wait_until(lambda: caught_up(cluster, 13), 10, "broker 13 rebuilt")


def fetch(cluster: Cluster, **fields: Any) -> Any:
    return call(cluster, "broker", "MetadataFetch", bpb.MetadataFetchRequest(**fields))


def refused(cluster: Cluster, **fields: Any) -> str:
    with pytest.raises(AdminError) as caught:
        fetch(cluster, **fields)
    return caught.value.name


def wait_until_quiet(cluster: Cluster, quiet_s: float = 2.0, timeout_s: float = 30.0) -> None:
    """Until nothing has been committed for `quiet_s`: brokers restarted by earlier
    tests rejoin ISRs (AlterPartition) once their followers catch up, a little
    after they are unfenced, and those commits would wake a parked fetch."""
    deadline = time.monotonic() + timeout_s
    last, since = -1, time.monotonic()
    while time.monotonic() < deadline:
        hw = cluster.wait_for_leader().high_watermark
        if hw != last:
            last, since = hw, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            return
        time.sleep(0.2)
    raise AssertionError(f"the metadata log kept moving for {timeout_s}s")


def test_bad_metadata_fetches_get_their_error_codes_and_change_nothing(
    cluster: Cluster,
) -> None:
    wait_until_quiet(cluster)
    epoch = brokers_view(cluster)[11].broker_epoch
    before = cluster.describe(cluster.wait_for_leader().leader_id)
    assert refused(cluster, broker_id=11, broker_epoch=epoch - 1) == "STALE_BROKER_EPOCH"
    assert refused(cluster, broker_id=99, broker_epoch=1) == "BROKER_ID_NOT_REGISTERED"
    assert refused(cluster, broker_id=11, broker_epoch=epoch, fetch_offset=-1) == "INVALID_REQUEST"
    assert (
        refused(cluster, broker_id=11, broker_epoch=epoch, fetch_offset=10**9)
        == "OFFSET_OUT_OF_RANGE"
    )
    assert (
        refused(cluster, cluster_id="another-cluster", broker_id=11, broker_epoch=epoch)
        == "INCONSISTENT_CLUSTER_ID"
    )
    with pytest.raises(AdminError) as caught:
        call(cluster, "broker", "RegisterBroker", bpb.RegisterBrokerRequest(
            broker_id=11, incarnation_id=random_uuid()))  # fmt: skip
    assert caught.value.name == "DUPLICATE_BROKER_REGISTRATION"
    after = cluster.describe(cluster.wait_for_leader().leader_id)
    assert after.image_digest == before.image_digest


def test_the_fetch_stream_answers_each_request_in_order_and_refuses_with_the_same_codes(
    cluster: Cluster,
) -> None:
    """MetadataFetchStream: one call, one answer per request in order; a refusal
    ends the call with the unary call's error code; a standby says NOT_CONTROLLER."""
    epoch = brokers_view(cluster)[11].broker_epoch
    view = records_past_the_log_start(cluster, 3, "fetch-stream-filler")
    active = cluster.procs[view.leader_id].address
    standby = next(p.address for i, p in cluster.procs.items() if i != view.leader_id)
    start, hw = view.log_start_offset, view.high_watermark

    def request(**fields: Any) -> bpb.MetadataFetchRequest:
        return bpb.MetadataFetchRequest(
            cluster_id=cluster.cluster_id, broker_id=11, broker_epoch=epoch,
            current_state=bpb.ONLINE, max_records=1, **fields)  # fmt: skip

    async def exchanges() -> tuple[list[Any], str, str]:
        channel, standby_channel = (grpc.aio.insecure_channel(a) for a in (active, standby))
        try:
            call = bpb_grpc.BrokerLifecycleStub(channel).MetadataFetchStream()
            answers = []
            for offset in (start, start + 1, start + 2):
                await call.write(request(fetch_offset=offset))
                answers.append(await call.read())
            await call.write(request(fetch_offset=hw + 10**9))
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await call.read()
            refusal = wire_error(caught.value)
            standby_call = bpb_grpc.BrokerLifecycleStub(standby_channel).MetadataFetchStream()
            await standby_call.write(request(fetch_offset=start))
            with pytest.raises(grpc.aio.AioRpcError) as redirected:
                await standby_call.read()
            hint = wire_error(redirected.value)
            assert hint.leader_address == active
            assert refusal.error is not None and hint.error is not None
            return answers, refusal.error.name, hint.error.name
        finally:
            await channel.close()
            await standby_channel.close()

    before = cluster.describe(view.leader_id).image_digest
    answers, refusal, redirect = run(exchanges())
    firsts = [a.batches[0].base_offset for a in answers]
    assert firsts == [start, start + 1, start + 2], answers
    assert all(a.batches[0].records for a in answers)
    assert refusal == "OFFSET_OUT_OF_RANGE"
    assert redirect == "NOT_CONTROLLER"
    assert cluster.describe(view.leader_id).image_digest == before


def snapshot_moved_the_log_start(
    cluster: Cluster, past: int = 0, prefix: str = "log-start-filler"
) -> None:
    """Commit topics until a controller snapshot has moved the log start past
    `past` (the cluster snapshots every 4 KiB of new records and rolls 8 KiB
    segments; how many records a topic costs depends on the ISR changes it
    brings, so the test counts offsets, not topics)."""
    for i in range(30):
        if cluster.wait_for_leader().log_start_offset > past:
            return
        create_topic(cluster, f"{prefix}-{i}", 20, min_isr=1, replication_factor=2)
    raise AssertionError(f"30 topics committed and the log start is not past {past}")


def records_past_the_log_start(cluster: Cluster, count: int, prefix: str) -> Any:
    """The leader's view once at least `count` committed records lie between the
    log start and the HW: a snapshot taken for another test of the module may
    have moved the log start up to the end (twice seen in clean-clone runs)."""
    for i in range(10):
        wait_until_quiet(cluster)
        view = cluster.wait_for_leader()
        if view.high_watermark - view.log_start_offset >= count:
            return view
        create_topic(cluster, f"{prefix}-{i}", 1, 1)
    raise AssertionError(f"fewer than {count} records past the log start: {view}")


def test_a_caught_up_fetch_returns_on_the_next_commit_never_past_the_watermark(
    cluster: Cluster,
) -> None:
    snapshot_moved_the_log_start(cluster)  # a fetch below it must be told to load one
    epoch = brokers_view(cluster)[11].broker_epoch
    view = records_past_the_log_start(cluster, 3, "caught-up-filler")
    hw, start = view.high_watermark, view.log_start_offset
    below = fetch(cluster, broker_id=11, broker_epoch=epoch, fetch_offset=start - 1)
    assert below.HasField("load_snapshot") and not below.batches
    assert below.load_snapshot.end_offset >= start
    reply = fetch(cluster, broker_id=11, broker_epoch=epoch, fetch_offset=start, max_records=50)
    assert reply.batches and all(
        b.base_offset + len(b.records) <= reply.high_watermark for b in reply.batches
    )

    async def parked_then_commit() -> tuple[float, Any]:
        client = AdminClient(cluster.voter_addresses(), cluster.cluster_id)
        try:
            started = time.monotonic()
            parked = asyncio.ensure_future(client.broker("MetadataFetch", bpb.MetadataFetchRequest(
                broker_id=11, broker_epoch=epoch, fetch_offset=hw, max_wait_ms=10_000,
                current_state=bpb.ONLINE)))  # fmt: skip
            await asyncio.sleep(0.5)
            assert not parked.done()
            wake = api.CreatableTopic(name="wake-up", num_partitions=1, replication_factor=1)
            await client.admin("CreateTopics", api.CreateTopicsRequest(topics=[wake]))
            answer = await parked
            return time.monotonic() - started, answer
        finally:
            await client.close()

    seconds, answer = run(parked_then_commit())
    assert seconds < 5, seconds  # well before its 10 s max wait
    assert answer.batches and answer.batches[0].base_offset >= hw


def catches_sigterm(pid: int, timeout_s: float = 10.0) -> None:
    """Wait until the process has a SIGTERM handler (bit 15 of SigCgt in /proc)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status = Path(f"/proc/{pid}/status").read_text()
        caught = int(next(line for line in status.splitlines() if line.startswith("SigCgt:"))
                     .split()[1], 16)  # fmt: skip
        if caught & (1 << (signal.SIGTERM - 1)):
            return
        time.sleep(0.002)
    raise AssertionError(f"process {pid} never installed a SIGTERM handler")


def test_a_sigterm_at_any_point_of_start_up_ends_the_agent_cleanly(cluster: Cluster) -> None:
    cluster.add_brokers(14)
    proc = cluster.brokers[14]
    for delay_s in (0.0, 0.2, 0.6):
        started = subprocess.Popen(
            [str(BIN / "broker-agent"), "--config", str(proc.config)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        # From the first moment the process can catch SIGTERM (before that the
        # interpreter itself is still starting and runs no code of ours).
        try:
            catches_sigterm(started.pid)
            time.sleep(delay_s)
            started.send_signal(signal.SIGTERM)
            _, err = started.communicate(timeout=45)
        finally:
            if started.poll() is None:  # never leave it running, whatever failed
                started.kill()
                started.communicate()
        assert started.returncode == 0, (delay_s, err)
        assert b"Traceback" not in err, err
