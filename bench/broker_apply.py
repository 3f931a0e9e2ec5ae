"""A broker's own CPU for one CreateTopics of `--batch` topics, part by part, in one
process with no cluster: what the forwarding broker does between the commit and
its answer, measured in CPU time (`time.thread_time`), which the other processes
of a shared machine move far less than wall time.

The commit is what the controller writes for the batch (a TopicRecord and a
PartitionRecord per topic, one partition, one replica, the replicas spread over
brokers 101-103 as the controller places them), appended to a real
`MetadataCache` (the metadata log, the image) and handed to a real
`ReplicaManager` of broker 101 (`on_metadata(open_in_background=True)`, as the
agent calls it), on the broker's event loop; its new logs open in the worker
thread and join on the loop. Per commit: the cache's append (log write, decode,
`apply_record`), the replica manager's `on_metadata`, the opens (the worker
thread's CPU, per log) and the join, each the median over `--commits` commits,
then their deletes (not counted). `--profile` prints cProfile's top functions of
the loop's part.

    .venv/bin/python bench/broker_apply.py [--batch 100 --commits 60]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from report import emit

from broker_agent import event_loop
from broker_agent.metadata_cache import MetadataCache
from broker_agent.partitions.replica_manager import ReplicaManager
from quorum.controller.record_codec import encode, wrap
from quorum.gen import metadata_pb2 as md
from quorum.raft.records import Batch
from snapshots.policy import SnapshotPolicy

BROKER = 101
BROKERS = (101, 102, 103)


def create_records(names: list[str], first_broker: int) -> list[bytes]:
    out = []
    for i, name in enumerate(names):
        topic_id = uuid.uuid4().hex[:22]
        broker = BROKERS[(first_broker + i) % len(BROKERS)]
        out.append(encode(wrap(topic=md.TopicRecord(name=name, topic_id=topic_id))))
        out.append(encode(wrap(partition=md.PartitionRecord(
            partition_id=0, topic_id=topic_id, replicas=[broker], isr=[broker], leader=broker,
            leader_epoch=0, partition_epoch=0,
        ))))  # fmt: skip
    return out


def delete_records(cache: MetadataCache, names: list[str]) -> list[bytes]:
    out = []
    for name in names:
        topic = cache.image.topic(name)
        assert topic is not None
        out.append(encode(wrap(remove_topic=md.RemoveTopicRecord(topic_id=topic.topic_id))))
    return out


class ThreadCpu:
    """CPU seconds the opener's worker threads used, summed (from /proc)."""

    def __call__(self) -> float:
        total = 0
        for task in Path(f"/proc/{os.getpid()}/task").iterdir():
            if int(task.name) == threading.get_native_id():
                continue
            fields = (task / "stat").read_text().rpartition(")")[2].split()
            total += int(fields[11]) + int(fields[12])
        return total / os.sysconf("SC_CLK_TCK")


async def run(args: argparse.Namespace, root: Path) -> None:
    cache = MetadataCache(root / "metadata", SnapshotPolicy(1 << 40, 1 << 40), 1 << 30, 0)
    replicas = ReplicaManager(BROKER, root / "logs")
    await replicas.start()
    profile = cProfile.Profile() if args.profile else None
    parts: dict[str, list[float]] = {"append_ms": [], "on_metadata_ms": [], "join_ms": []}
    opens_cpu, opened = 0.0, 0
    workers = ThreadCpu()
    offset = cache.next_offset

    def commit(records: list[bytes]) -> None:
        nonlocal offset
        cache.append([Batch(offset, 1, tuple(records), 0, False)])
        offset += len(records)

    real_join = replicas._join_opened
    joins: list[float] = []

    def timed_join(keys: list[tuple[str, int]], results: list[object]) -> None:
        start = time.thread_time()
        real_join(keys, results)  # type: ignore[arg-type]
        joins.append(time.thread_time() - start)

    replicas._opener._on_opened = timed_join
    try:
        for n in range(args.commits):
            names = [f"t{n:04d}-{i:04d}" for i in range(args.batch)]
            records = create_records(names, n)
            before_workers = workers()
            if profile:
                profile.enable()
            start = time.thread_time()
            commit(records)
            appended = time.thread_time()
            replicas.on_metadata(cache.image, open_in_background=True)
            done = time.thread_time()
            if profile:
                profile.disable()
            parts["append_ms"].append(1000 * (appended - start))
            parts["on_metadata_ms"].append(1000 * (done - appended))
            while replicas._opener.opening:
                await asyncio.sleep(0.001)
            opens_cpu += workers() - before_workers
            opened += sum(1 for name in names if replicas.partition_state(name, 0))
            parts["join_ms"].append(1000 * sum(joins))
            joins.clear()
            commit(delete_records(cache, names))
            replicas.on_metadata(cache.image, open_in_background=True)
            replicas._deleter.wait()
    finally:
        await replicas.close()
        cache.close()
    emit(
        batch=args.batch,
        commits=args.commits,
        **{k: round(statistics.median(v), 3) for k, v in parts.items()},
        open_cpu_ms_per_log=round(1000 * opens_cpu / max(opened, 1), 3),
        logs_per_commit=round(opened / args.commits, 1),
        load_average=[round(x, 1) for x in os.getloadavg()],
    )
    if profile:
        stats = pstats.Stats(profile, stream=sys.stderr)
        stats.sort_stats("cumulative").print_stats(30)
        stats.sort_stats("tottime").print_stats(20)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--commits", type=int, default=60)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-broker-apply-") as root:
        event_loop.run(run(args, Path(root)))


if __name__ == "__main__":
    main()
