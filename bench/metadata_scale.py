"""A million partitions through the admin API on a real three-controller quorum.

Starts three `quorum-controller` processes (default settings), registers three
brokers and keeps them heartbeating (unfenced, as live brokers), then creates `--topics` topics of
`--partitions` partitions at replication factor 3 with CreateTopics requests of
`--topics-per-request` topics, keeping `--in-flight` requests outstanding. Then:

- `partitions_commit_s`: from the first request to the last acknowledgement
  (every acknowledgement means committed on a majority and applied);
- `records_per_s`: topic + partition records committed per second;
- `controller_rss_bytes`: resident memory of the active controller afterwards;
- `snapshot_bytes`: the active controller's snapshot that covers the last topic
  (the controllers run with `metadata.snapshot.max.interval.ms=5000` so one is
  taken soon after the last commit; every other setting is the default);
- `rejoin_s`: `kill -9` a standby controller, restart it, and time from the
  restart until it has loaded its snapshot, fetched the tail and applied up to
  the high watermark it saw at restart;
- `broker_empty_cache_online_s`: a real `broker-agent` process that was ONLINE
  is `kill -9`ed, fenced once its session runs out, its metadata directory
  wiped and formatted again, and started: from that start until the active
  controller's DescribeCluster shows it ONLINE again (registered anew, the
  controller's snapshot fetched and installed, the tail applied, unfenced).

    .venv/bin/python bench/metadata_scale.py [--topics 10000 --partitions 100]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from report import emit, say
from write_systems import VENV_BIN, QuorumSystem, free_port, wait_for

from quorum.admin_client import AdminClient
from quorum.client import QuorumClient
from quorum.common.channels import open_channel
from quorum.common.meta_properties import random_uuid
from quorum.gen import admin_pb2, admin_pb2_grpc, broker_pb2, broker_pb2_grpc

BROKERS = 3
HEARTBEAT_S = 1.0


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def newest_snapshot(data_dir: Path) -> tuple[int, int]:
    """(end offset, bytes on disk) of the newest published snapshot, or (-1, 0)."""
    snapshots = sorted(
        p
        for p in (data_dir / "__cluster_metadata-0" / "snapshots").glob("*.snapshot")
        if p.is_dir()
    )
    if not snapshots:
        return -1, 0
    newest = snapshots[-1]
    size = sum(f.stat().st_size for f in newest.rglob("*") if f.is_file())
    return int(newest.name.split("-")[0]), size


async def describe(system: QuorumSystem, address: str | None = None) -> Any:
    client = QuorumClient(system.addresses(), system.cluster_id)
    try:
        return await client.describe_quorum(address, timeout_s=5)
    finally:
        await client.close()


async def register_brokers(system: QuorumSystem, leader_address: str) -> dict[int, int]:
    """Register the brokers and heartbeat them until unfenced; their epochs."""
    stub = broker_pb2_grpc.BrokerLifecycleStub(open_channel(leader_address))
    epochs = {}
    for broker in range(1, BROKERS + 1):
        reply = await stub.RegisterBroker(
            broker_pb2.RegisterBrokerRequest(
                cluster_id=system.cluster_id,
                broker_id=broker,
                incarnation_id=random_uuid(),
                listeners=[
                    broker_pb2.Listener(
                        name="PLAINTEXT",
                        host="127.0.0.1",
                        port=19092 + broker,
                        security_protocol="PLAINTEXT",
                    )
                ],
            )
        )
        epochs[broker] = reply.broker_epoch
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        offset = (await describe(system)).high_watermark
        if not await heartbeat_all(system, stub, epochs, offset):
            return epochs
        await asyncio.sleep(0.1)
    raise RuntimeError("brokers stayed fenced")


async def heartbeat_all(
    system: QuorumSystem, stub: Any, epochs: dict[int, int], offset: int
) -> int:
    """One heartbeat per broker; how many are still fenced."""
    fenced = 0
    for broker, epoch in epochs.items():
        beat = await stub.BrokerHeartbeat(
            broker_pb2.BrokerHeartbeatRequest(
                cluster_id=system.cluster_id,
                broker_id=broker,
                broker_epoch=epoch,
                current_metadata_offset=offset,
            ),
            timeout=10,
        )
        fenced += beat.is_fenced
    return fenced


class Heartbeats:
    """Keeps the brokers' sessions alive for the whole run, as live brokers would
    (a broker silent for `broker.session.timeout.ms` is fenced, and fencing the
    only three brokers would move every partition's leadership)."""

    def __init__(self, system: QuorumSystem, leader_address: str, epochs: dict[int, int]):
        self.stop_event = threading.Event()

        async def beat() -> None:
            stub = broker_pb2_grpc.BrokerLifecycleStub(open_channel(leader_address))
            offset = max(epochs.values()) + 1  # past every registration: caught up
            while not self.stop_event.is_set():
                with contextlib.suppress(grpc.RpcError):
                    await heartbeat_all(system, stub, epochs, offset)
                await asyncio.sleep(HEARTBEAT_S)

        self.thread = threading.Thread(target=lambda: asyncio.run(beat()), daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.stop_event.set()
        self.thread.join(timeout=30)


async def create_all(
    system: QuorumSystem, leader_address: str, args: argparse.Namespace
) -> tuple[float, int]:
    stub = admin_pb2_grpc.AdminStub(open_channel(leader_address))
    queue: asyncio.Queue[int] = asyncio.Queue()
    for start in range(0, args.topics, args.topics_per_request):
        queue.put_nowait(start)
    created = 0

    async def worker() -> None:
        nonlocal created
        while not queue.empty():
            start = queue.get_nowait()
            names = range(start, min(start + args.topics_per_request, args.topics))
            request = admin_pb2.CreateTopicsRequest(
                cluster_id=system.cluster_id,
                topics=[
                    admin_pb2.CreatableTopic(
                        name=f"bench-{n:06d}",
                        num_partitions=args.partitions,
                        replication_factor=3,
                    )
                    for n in names
                ],
            )
            reply = await stub.CreateTopics(request, timeout=120)
            errors = [t for t in reply.topics if t.error.error_code != 0]
            if errors:
                raise RuntimeError(f"CreateTopics failed: {errors[0]}")
            created += len(reply.topics)
            if created % (args.topics // 10 or 1) < args.topics_per_request:
                say(f"   {created} topics committed")

    started = time.monotonic()
    await asyncio.gather(*(worker() for _ in range(args.in_flight)))
    return time.monotonic() - started, created


BROKER = 9000


def broker_state(system: QuorumSystem) -> tuple[str, int]:
    """Broker 9000's state and epoch in the active controller's DescribeCluster."""

    async def ask() -> tuple[str, int]:
        client = AdminClient(system.addresses(), system.cluster_id)
        try:
            reply = await client.admin("DescribeCluster", admin_pb2.DescribeClusterRequest())
            for b in reply.brokers:
                if b.broker_id == BROKER:
                    return b.state, b.broker_epoch
            return "ABSENT", -1
        finally:
            await client.close()

    return asyncio.run(ask())


def broker_empty_cache_online_s(system: QuorumSystem, root: Path) -> float:
    """Start a real broker agent until ONLINE, kill it, wipe its metadata cache,
    start it again: seconds from that start until it is ONLINE again."""
    from quorum.common.config import render_properties

    config = root / f"broker-{BROKER}.properties"
    data = root / f"broker-{BROKER}"
    config.write_text(render_properties({
        "node.id": str(BROKER), "process.roles": "broker",
        "controller.quorum.voters": ",".join(
            f"{i}@{a}" for i, a in zip((1, 2, 3), system.addresses(), strict=True)),
        "listeners": f"PLAINTEXT://127.0.0.1:{free_port()}",
        "metadata.log.dir": str(data),
        "broker.heartbeat.interval.ms": "500",
    }))  # fmt: skip

    def format_storage() -> None:
        shutil.rmtree(data, ignore_errors=True)
        subprocess.run([str(VENV_BIN / "quorumctl"), "storage", "format", "--cluster-id",
                        system.cluster_id, "--config", str(config)], check=True,
                       capture_output=True)  # fmt: skip

    command = [str(VENV_BIN / "broker-agent"), "--config", str(config)]
    log = (root / f"broker-{BROKER}.log").open("ab")

    def start() -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )

    format_storage()
    proc = start()
    try:
        wait_for(lambda: broker_state(system)[0] == "ONLINE", 300, "broker ONLINE")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    # A new incarnation may register once the old session ran out (fenced).
    wait_for(lambda: broker_state(system)[0] == "FENCED", 60, "the killed broker fenced")
    old_epoch = broker_state(system)[1]
    format_storage()  # the restart finds an empty cache
    started = time.monotonic()
    proc = start()
    try:
        wait_for(
            lambda: (
                broker_state(system) not in {("FENCED", old_epoch)}
                and broker_state(system)[0] == "ONLINE"
            ),
            300,
            "broker ONLINE again",
        )
        return time.monotonic() - started
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def run(args: argparse.Namespace, root: Path) -> None:
    system = QuorumSystem(root, {"metadata.snapshot.max.interval.ms": "5000"})
    say(f"== starting three controllers under {root}")
    system.start()
    try:
        leader = system.leader()
        leader_address = system.addresses()[leader - 1]
        epochs = asyncio.run(register_brokers(system, leader_address))
        heartbeats = Heartbeats(system, leader_address, epochs)
        say(f"== creating {args.topics} topics x {args.partitions} partitions x RF 3")
        seconds, created = asyncio.run(create_all(system, leader_address, args))
        partitions = created * args.partitions
        params = {"topics": created, "partitions": partitions, "replication_factor": 3}
        emit(metric="partitions_commit_s", value=round(seconds, 2), **params)
        emit(
            metric="records_per_s",
            value=round((created + partitions) / seconds),
            **params,
        )
        emit(
            metric="controller_rss_bytes",
            value=rss_bytes(system.members.procs[leader].pid),
            **params,
        )
        end = asyncio.run(describe(system)).high_watermark
        leader_dir = root / f"controller-{leader}"
        say("== waiting for a snapshot that covers the last topic")
        wait_for(lambda: newest_snapshot(leader_dir)[0] >= end, 120, "a covering snapshot")
        offset, size = newest_snapshot(leader_dir)
        emit(metric="snapshot_bytes", value=size, snapshot_end_offset=offset, **params)

        standby = next(m for m in (1, 2, 3) if m != leader)
        system.kill(standby)
        target = asyncio.run(describe(system)).high_watermark
        say(f"== restarting standby controller {standby}; target offset {target}")
        restarted = time.monotonic()
        system.restart(standby)
        address = system.addresses()[standby - 1]

        def caught_up() -> bool:
            view = asyncio.run(describe(system, address))
            return view.applied_offset >= target and view.leader_id > 0

        wait_for(caught_up, 300, f"controller {standby} to rejoin")
        emit(
            metric="rejoin_s",
            value=round(time.monotonic() - restarted, 2),
            applied_offset=target,
            **params,
        )
        say(f"== broker {BROKER}: ONLINE, kill -9, empty metadata cache, restart")
        emit(
            metric="broker_empty_cache_online_s",
            value=round(broker_empty_cache_online_s(system, root), 2),
            **params,
        )
        heartbeats.stop()
    finally:
        system.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=10_000)
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--topics-per-request", type=int, default=100)
    parser.add_argument("--in-flight", type=int, default=2)
    parser.add_argument("--keep-dir", action="store_true")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-metadata-"))
    try:
        run(args, root)
    finally:
        if not args.keep_dir:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
