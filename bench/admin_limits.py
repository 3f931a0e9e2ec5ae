"""What the request limits cost and bound, on a real three-controller quorum.

Issue 17 item 3: one CreateTopics with 10^9 partitions ran placement on the
active controller's event loop until it died of MemoryError. With the limits
(quorum/controller/request_limits.py, default settings here) this measures:

- `refuse_billion_partitions_ms`: CreateTopics for 10^9 partitions, refused
  with POLICY_VIOLATION (p50 and max of `--refusals` calls, client round trip);
- `refuse_50mb_principal_ms`: CreateAcls with a 50 MB principal, refused with
  INVALID_REQUEST (it is sent, received and decoded, then refused);
- `create_at_limit_ms`: CreateTopics at the per-request limit (100 topics of
  100 partitions, replication factor 3: 10,000 partitions) until committed;
- `heartbeat_ms` p50/p99/max: broker heartbeats answered by the active
  controller while those largest-allowed creates run, i.e. how long the
  biggest permitted request holds the loop;
- `controller_rss_bytes`: the active controller's resident memory afterwards.

    .venv/bin/python bench/admin_limits.py [--creates 5 --refusals 20]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from metadata_scale import register_brokers
from report import emit, percentile, say
from write_systems import QuorumSystem

from quorum.admin_client import AdminClient
from quorum.client import QuorumClient
from quorum.common.channels import open_channel
from quorum.gen import admin_pb2, admin_pb2_grpc, broker_pb2, broker_pb2_grpc
from quorum.rpc.wire_errors import wire_error


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return -1


async def refusal_ms(stub: Any, method: str, request: Any, expected: str) -> float:
    started = time.perf_counter()
    try:
        await getattr(stub, method)(request, timeout=30)
    except grpc.aio.AioRpcError as err:
        elapsed = (time.perf_counter() - started) * 1000
        error = wire_error(err).error
        name = error.name if error is not None else err.code().name
        if name != expected:
            raise RuntimeError(f"{method}: expected {expected}, got {name}") from err
        return elapsed
    raise RuntimeError(f"{method} was accepted")


async def heartbeats(
    system: QuorumSystem, address: str, epochs: dict[int, int], stop: asyncio.Event
) -> tuple[list[float], int]:
    """Heartbeat latencies at the active controller, and how many times it moved:
    a heartbeat refused by a controller that stopped being active is no lag, and
    the next ones go to the new active controller (on a loaded machine an
    election during the run used to leave no heartbeat measured at all)."""
    stub = broker_pb2_grpc.BrokerLifecycleStub(open_channel(address))
    offset = max(epochs.values()) + 1
    lags: list[float] = []
    moves = 0
    while not stop.is_set():
        for broker, epoch in epochs.items():
            started = time.perf_counter()
            try:
                await stub.BrokerHeartbeat(
                    broker_pb2.BrokerHeartbeatRequest(
                        cluster_id=system.cluster_id,
                        broker_id=broker,
                        broker_epoch=epoch,
                        current_metadata_offset=offset,
                    ),
                    timeout=10,
                )
            except grpc.aio.AioRpcError:
                with contextlib.suppress(Exception):
                    client = QuorumClient(system.addresses(), system.cluster_id)
                    try:
                        leader = (await client.describe_quorum(timeout_s=2)).leader_id
                    finally:
                        await client.close()
                    if leader > 0 and system.addresses()[leader - 1] != address:
                        address = system.addresses()[leader - 1]
                        stub = broker_pb2_grpc.BrokerLifecycleStub(open_channel(address))
                        moves += 1
                break
            lags.append((time.perf_counter() - started) * 1000)
        await asyncio.sleep(0.005)
    return lags, moves


async def measure(system: QuorumSystem, address: str, args: argparse.Namespace) -> None:
    epochs = await register_brokers(system, address)
    stub = admin_pb2_grpc.AdminStub(open_channel(address))
    cid = system.cluster_id

    billion = admin_pb2.CreateTopicsRequest(cluster_id=cid, topics=[admin_pb2.CreatableTopic(
        name="huge", num_partitions=10**9, replication_factor=3)])  # fmt: skip
    times = [
        await refusal_ms(stub, "CreateTopics", billion, "POLICY_VIOLATION")
        for _ in range(args.refusals)
    ]
    emit(metric="refuse_billion_partitions_ms", value=round(percentile(times, 0.5), 2),
         max=round(max(times), 2), calls=len(times))  # fmt: skip

    principal = admin_pb2.CreateAclsRequest(cluster_id=cid, creations=[admin_pb2.AclBinding(
        resource_type=2, resource_name="t", pattern_type=3, principal="User:" + "p" * 50_000_000,
        host="*", operation=3, permission_type=3)])  # fmt: skip
    ms = await refusal_ms(stub, "CreateAcls", principal, "INVALID_REQUEST")
    emit(metric="refuse_50mb_principal_ms", value=round(ms, 1))

    stop = asyncio.Event()
    beats = asyncio.ensure_future(heartbeats(system, address, epochs, stop))
    creates = []
    client = AdminClient(system.addresses(), cid)  # follows the active controller
    for n in range(args.creates):
        request = admin_pb2.CreateTopicsRequest(cluster_id=cid, topics=[
            admin_pb2.CreatableTopic(name=f"limit-{n}-{t:03d}", num_partitions=100,
                                     replication_factor=3) for t in range(100)])  # fmt: skip
        started = time.perf_counter()
        reply = await client.admin("CreateTopics", request, deadline_s=60)
        creates.append((time.perf_counter() - started) * 1000)
        bad = [t for t in reply.topics if t.error.error_code]
        if bad:
            raise RuntimeError(f"CreateTopics at the limit failed: {bad[0]}")
    stop.set()
    lags, moves = await beats
    await client.close()
    emit(metric="create_at_limit_ms", value=round(percentile(creates, 0.5), 1),
         max=round(max(creates), 1), partitions_per_request=10_000,
         requests=len(creates))  # fmt: skip
    emit(metric="heartbeat_ms", p50=round(percentile(lags, 0.5), 2),
         p99=round(percentile(lags, 0.99), 2), max=round(max(lags), 2),
         value=round(percentile(lags, 0.99), 2), heartbeats=len(lags), leader_moves=moves,
         during="CreateTopics at the per-request limit")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--creates", type=int, default=5)
    parser.add_argument("--refusals", type=int, default=20)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-admin-limits-"))
    system = QuorumSystem(root)
    say(f"== starting three controllers under {root}")
    system.start()
    try:
        leader = system.leader()
        address = system.addresses()[leader - 1]
        asyncio.run(measure(system, address, args))
        emit(metric="controller_rss_bytes", value=rss_bytes(system.members.procs[leader].pid))
    finally:
        system.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
