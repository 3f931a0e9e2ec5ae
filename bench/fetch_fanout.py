"""The active controller's own CPU per MetadataFetch answer, without gRPC.

`bench/convergence.py` measures fan-out end to end, where gRPC's per-message
cost and the agents' CPU dominate and a loaded machine blurs the rest. This
bench runs the `QuorumController` in-process over an in-memory Raft client that
commits at once: `--brokers` caught-up fetches are parked, one record commits,
every parked fetch is answered and its answer encoded to the bytes gRPC would
send. It reports the process CPU per answer from the commit on (wake, batches,
encoding); with `--whole`, from before the fetches arrive (their checks and
heartbeats, the park) to the answers: the part of the fan-out that the
controller's code decides. `--servicer` (implies `--whole`) sends each fetch
through the gRPC servicer's own code (`BrokerLifecycleServicer._fetch`: the
cluster id, throttle and ACL checks, the wire times) as the controller's
MetadataFetchStream does, with no gRPC under it.

    .venv/bin/python bench/fetch_fanout.py [--brokers 200 --commits 200 --partitions 0 --whole]
    .venv/bin/python bench/fetch_fanout.py --brokers 200 --servicer
    .venv/bin/python bench/fetch_fanout.py --brokers 200 --floor-answer  # the harness's own cost
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from report import emit

from quorum.common.meta_properties import random_uuid
from quorum.controller.controller import QuorumController
from quorum.controller.metadata_image import MetadataImage
from quorum.gen import admin_pb2 as api
from quorum.gen import broker_pb2 as bpb
from quorum.raft.client_api import LeaderAndEpoch, RaftListener
from quorum.raft.config import ProposeResult
from quorum.raft.records import Batch, SnapshotId


class InstantRaft:
    """A single voter that commits every proposal at once (reads are indexed)."""

    def __init__(self) -> None:
        self.batches: list[Batch] = []
        self.ends: list[int] = []
        self.listeners: list[RaftListener] = []
        self.node_id = 1
        self.leader_committed_epoch = True
        self.log_start_offset = 0

    async def propose(self, records: list[bytes]) -> ProposeResult:
        base = self.log_end_offset
        self.batches.append(Batch(base, 1, tuple(records), int(time.time() * 1000)))
        self.ends.append(self.batches[-1].next_offset)
        for listener in self.listeners:
            listener.handle_commit([self.batches[-1]])
        return ProposeResult(1, base, base + len(records) - 1)

    def leader_and_epoch(self) -> LeaderAndEpoch:
        return LeaderAndEpoch(1, 1)

    @property
    def high_watermark(self) -> int:
        return self.log_end_offset

    @property
    def log_end_offset(self) -> int:
        return self.ends[-1] if self.ends else 0

    def read_committed(self, offset: int, max_records: int) -> Sequence[Batch]:
        return self.batches[bisect.bisect_right(self.ends, offset) :]

    def latest_snapshot(self) -> SnapshotId | None:
        return None

    def create_snapshot(self, end_offset: int, capture: object) -> None:
        return None

    def register(self, listener: RaftListener) -> None:
        self.listeners.append(listener)


def registration(broker_id: int) -> bpb.RegisterBrokerRequest:
    listener = bpb.Listener(name="PLAINTEXT", host="h", port=9092, security_protocol="PLAINTEXT")
    return bpb.RegisterBrokerRequest(
        broker_id=broker_id, incarnation_id=random_uuid(), listeners=[listener]
    )


class NoContext:
    """The servicer's `context` where no call is refused (nothing is read from it)."""

    async def abort_with_status(self, status: object) -> None:
        raise AssertionError(f"refused: {status}")


async def answer(c: QuorumController, request: bpb.MetadataFetchRequest) -> bytes:
    """What the servicer hands gRPC: encoded bytes (main's code: a message it serializes)."""
    servicer = SERVICERS.get(id(c))
    if servicer is not None:
        return await servicer._fetch(request, NoContext())
    if hasattr(c, "metadata_fetch_answer"):
        return bytes((await c.metadata_fetch_answer(request, 0)).encode())
    return bytes((await c.metadata_fetch(request, 0)).SerializeToString())


async def commit(c: QuorumController, i: int, partitions: int) -> None:
    """One commit: a broker registration (one record), or a topic of `partitions`
    partitions (one record each, and the topic's)."""
    if not partitions:
        await c.register_broker(registration(100_000 + i))
        return
    topic = api.CreatableTopic(name=f"t{i}", num_partitions=partitions, replication_factor=1)
    reply = await c.create_topics(api.CreateTopicsRequest(topics=[topic]))
    assert reply.topics[0].error.error_code == 0, reply


SERVICERS: dict[int, Any] = {}  # controller id -> its servicer, with --servicer


async def run(
    brokers: int, commits: int, partitions: int, whole: bool = False, servicer: bool = False
) -> float:
    raft = InstantRaft()
    c = QuorumController(raft, MetadataImage(), "cluster-a", {1: "a:1"})
    if servicer:
        from quorum.server.admin_servicer import ControllerCalls
        from quorum.server.broker_servicer import BrokerLifecycleServicer

        SERVICERS[id(c)] = BrokerLifecycleServicer(ControllerCalls(c, {1: "a:1"}), None)
    epochs = {b: (await c.register_broker(registration(b))).broker_epoch for b in range(brokers)}

    def fetch(b: int) -> bpb.MetadataFetchRequest:
        return bpb.MetadataFetchRequest(
            cluster_id="cluster-a", broker_id=b, broker_epoch=epochs[b],
            fetch_offset=raft.high_watermark,
            max_wait_ms=10_000, current_state=bpb.ONLINE,
        )  # fmt: skip

    for b in range(brokers):  # unfence everyone first
        await answer(c, fetch(b))
    spent = 0.0
    for i in range(commits):
        if whole:
            started = time.process_time()
        parked = [asyncio.ensure_future(answer(c, fetch(b))) for b in range(brokers)]
        await asyncio.sleep(0)  # every fetch parks
        if not whole:
            started = time.process_time()
        await commit(c, i, partitions)
        await asyncio.gather(*parked)
        spent += time.process_time() - started
    return spent / (commits * brokers) * 1e6


async def run_floor_answer(brokers: int, commits: int) -> float:
    """The same harness around bench/fanout_floor.py's answer (one future shared by
    every parked fetch, one small message appended to shared bytes): what the
    harness itself costs per answer, so that the controller's excess is the rest."""
    loop = asyncio.get_running_loop()
    state: dict[str, Any] = {"hw": 0, "commit": loop.create_future()}

    async def floor_answer(request: bpb.MetadataFetchRequest) -> bytes:
        received_ms = time.time_ns() // 1_000_000
        if request.fetch_offset >= state["hw"]:
            await state["commit"]
        own = bpb.MetadataFetchResponse(
            is_caught_up=True, controller_receive_time_ms=received_ms, controller_id=1,
            controller_send_time_ms=time.time_ns() // 1_000_000,
        )  # fmt: skip
        return b"shared" + own.SerializeToString()

    spent = 0.0
    for _ in range(commits):
        started = time.process_time()
        requests = [
            bpb.MetadataFetchRequest(
                cluster_id="cluster-a",
                broker_id=b,
                broker_epoch=5,
                fetch_offset=state["hw"],
                max_wait_ms=10_000,
                current_state=bpb.ONLINE,
            )
            for b in range(brokers)
        ]
        parked = [asyncio.ensure_future(floor_answer(r)) for r in requests]
        await asyncio.sleep(0)
        state["hw"] += 1
        waiting, state["commit"] = state["commit"], loop.create_future()
        waiting.set_result(None)
        await asyncio.gather(*parked)
        spent += time.process_time() - started
    return spent / (commits * brokers) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--brokers", default="50,200,500")
    parser.add_argument("--commits", type=int, default=200)
    parser.add_argument("--partitions", type=int, default=0, help="0: one record per commit")
    parser.add_argument(
        "--whole",
        action="store_true",
        help="count each fetch's first half too (checks, heartbeat, park), not only the answer",
    )
    parser.add_argument(
        "--servicer",
        action="store_true",
        help="each fetch through BrokerLifecycleServicer._fetch (implies --whole)",
    )
    parser.add_argument(
        "--floor-answer",
        action="store_true",
        help="the floor's answer in the same harness (the harness's own cost)",
    )
    args = parser.parse_args()
    whole = args.whole or args.servicer
    for brokers in (int(b) for b in args.brokers.split(",")):
        if args.floor_answer:
            us = asyncio.run(run_floor_answer(brokers, args.commits))
        else:
            us = asyncio.run(run(brokers, args.commits, args.partitions, whole, args.servicer))
        emit(metric="controller_cpu_us_per_answer", value=round(us, 1), brokers=brokers,
             commits=args.commits, partitions=args.partitions, whole=whole,
             servicer=args.servicer, floor_answer=args.floor_answer,
             load_average=[round(x, 2) for x in os.getloadavg()])  # fmt: skip


if __name__ == "__main__":
    main()
