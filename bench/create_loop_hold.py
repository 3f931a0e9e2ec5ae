"""How long one CreateTopics at the per-request limit holds the controller's loop.

In one process: the controller's image, its write queue (quorum/controller/
write_queue.py) and its CreateTopics build (`QuorumController.create_topics`'s),
with the Raft proposal replaced by a commit after `--replicate-ms` that applies
the records in one piece, as the Raft listener does. A ticker task on the same
loop wakes every millisecond; the longest gap between its wakes while a create
of 100 topics x 100 partitions (RF 3, 10,000 partitions) runs is the longest
the loop was held. Raft's own append and replication are not in this figure
(`bench/admin_limits.py` measures heartbeats on a real quorum).

    .venv/bin/python bench/create_loop_hold.py [--creates 10]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from report import emit

from quorum.controller import topic_ops
from quorum.controller.metadata_image import MetadataImage
from quorum.controller.record_codec import encode, wrap
from quorum.controller.write_queue import WriteQueue
from quorum.gen import admin_pb2 as api
from quorum.gen import metadata_pb2 as md


def image_with_brokers() -> MetadataImage:
    image = MetadataImage()
    for broker in (1, 2, 3):
        offset = image.applied_offset
        image.apply(offset, encode(wrap(register_broker=md.RegisterBrokerRecord(
            broker_id=broker, broker_epoch=offset))))  # fmt: skip
        image.apply(offset + 1, encode(wrap(unfence_broker=md.UnfenceBrokerRecord(
            broker_id=broker, broker_epoch=offset))))  # fmt: skip
    return image


async def measure(args: argparse.Namespace) -> list[float]:
    image = image_with_brokers()
    rng = random.Random(1)

    async def propose(data: list[bytes]) -> int:
        await asyncio.sleep(args.replicate_ms / 1000)
        first = image.applied_offset
        for i, record in enumerate(data):  # the commit: applied in one piece
            image.apply(first + i, record)
        return first + len(data) - 1

    queue = WriteQueue(image, 1, propose, lambda: True, lambda: 1)
    build = getattr(topic_ops, "create_topics_in_slices", topic_ops.build_create_topics)
    holds = []
    for n in range(args.creates):
        request = api.CreateTopicsRequest(topics=[api.CreatableTopic(
            name=f"t{n}-{t:03d}", num_partitions=100, replication_factor=3)
            for t in range(100)])  # fmt: skip
        longest = 0.0
        done = asyncio.Event()

        async def ticker(done: asyncio.Event) -> None:
            nonlocal longest
            last = time.perf_counter()
            while not done.is_set():
                await asyncio.sleep(0.001)
                now = time.perf_counter()
                longest = max(longest, now - last)
                last = now

        ticking = asyncio.ensure_future(ticker(done))
        await asyncio.sleep(0.01)
        await queue.submit(lambda r=request: build(image, r, rng))  # type: ignore[misc]
        done.set()
        await ticking
        holds.append(longest * 1000)
    return holds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--creates", type=int, default=10)
    parser.add_argument("--replicate-ms", type=float, default=5.0)
    args = parser.parse_args()
    gc.set_threshold(100_000, 10, 10)  # as the controller sets it
    holds = asyncio.run(measure(args))
    emit(metric="create_loop_hold_ms", value=round(statistics.median(holds), 1),
         max=round(max(holds), 1), min=round(min(holds), 1), creates=len(holds),
         partitions_per_request=10_000, load=round(os.getloadavg()[0], 1))  # fmt: skip


if __name__ == "__main__":
    main()
