"""The Kafka listener's own CPU per request, on asyncio's loop and on uvloop's.

A child process serves one `KafkaListener` whose dispatch answers every
OffsetCommit at once with a fixed answer (no coordinator, no replication), so
what is measured is the request path alone: frame reading, decoding, encoding
the answer and writing it, and the event loop under them. The load comes from
this process (`--connections` connections, one request in flight each, the
frames `bench/groups.py` sends); the child's CPU over the run divided by the
requests answered is the figure. Runs alternate the loops.

    .venv/bin/python bench/kafka_listener.py [--seconds 5] [--connections 64] [--rounds 3]

One JSON object per measurement on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import struct
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from groups import CommitFrames
from report import emit, process_cpu_s

from broker_agent.event_loop import loop_factory
from broker_agent.kafka import codec
from broker_agent.kafka.listener import Connection, KafkaListener
from broker_agent.kafka.versions import ApiKey


def serve(use_uvloop: bool, ready: Any) -> None:
    async def dispatch(request: codec.DecodedRequest, conn: Connection) -> Any:
        cls = codec.response_class(ApiKey.OFFSET_COMMIT, request.api_version)
        partitions = [{"partition_index": 0, "error_code": 0}]
        answer = {"throttle_time": 0, "topics": [{"name": "t", "partitions": partitions}]}
        return codec.build(cls, answer)

    async def main() -> None:
        listener = KafkaListener("PLAINTEXT", "127.0.0.1", 0, dispatch, 1 << 20)
        ready.send(await listener.start())
        await asyncio.Event().wait()

    factory = loop_factory() if use_uvloop else None
    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(main())


async def load(port: int, seconds: float, connections: int) -> int:
    frames = CommitFrames("bench-group", "t", 0)
    stop_at = time.monotonic() + seconds
    counts = [0] * connections

    async def one(i: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        correlation = 0
        while time.monotonic() < stop_at:
            correlation += 1
            writer.write(frames.frame(correlation, correlation))
            size = struct.unpack(">i", await reader.readexactly(4))[0]
            await reader.readexactly(size)
            counts[i] += 1
        writer.close()

    await asyncio.gather(*(one(i) for i in range(connections)))
    return sum(counts)


def measure(use_uvloop: bool, seconds: float, connections: int) -> None:
    if use_uvloop and loop_factory() is None:
        return  # uvloop is not installed here: asyncio's loop only
    parent, child = multiprocessing.Pipe()
    server = multiprocessing.Process(target=serve, args=(use_uvloop, child), daemon=True)
    server.start()
    try:
        port = parent.recv()
        assert server.pid is not None
        before = process_cpu_s(server.pid)
        started = time.monotonic()
        requests = asyncio.run(load(port, seconds, connections))
        elapsed = time.monotonic() - started
        used = process_cpu_s(server.pid) - before
    finally:
        server.kill()
        server.join()
    emit(
        measurement="kafka_listener_cpu_per_request",
        loop="uvloop" if use_uvloop else "asyncio",
        connections=connections,
        requests_per_s=round(requests / elapsed),
        server_cpu_us_per_request=round(used / max(requests, 1) * 1e6, 1),
        load_average=round(os.getloadavg()[0], 1),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    for _ in range(args.rounds):
        for use_uvloop in (False, True):
            measure(use_uvloop, args.seconds, args.connections)


if __name__ == "__main__":
    main()
