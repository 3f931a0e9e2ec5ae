"""A child of bench/groups.py: COUNT aiokafka members of one group in this process,
driven by one-line commands on stdin, each answered by one JSON line on stdout.

    ready                -> {"ready": true} once every member has started
    poll                 -> {"assigned": [[partition, ...] per member],
                             "coordinators": [coordinator id or null per member],
                             "moved": [wall time or null per member]}
    watch ID             -> {"watching": ID}: from now, note when each member's
                            coordinator is known and is not broker ID
    stop                 -> {"stopped": true}, then exit

Spreading a large group over several such processes keeps one process's share of
a core from being what a coordinator failover measures (500 members in one
process reached the new coordinator 8-11 s after the election).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import time
from typing import Any


async def serve(args: argparse.Namespace) -> None:
    from aiokafka import AIOKafkaConsumer

    consumers = [
        AIOKafkaConsumer(
            args.topic,
            bootstrap_servers=args.bootstrap,
            group_id=args.group,
            session_timeout_ms=10_000,
            heartbeat_interval_ms=500,
            enable_auto_commit=False,
            fetch_max_wait_ms=args.fetch_wait_ms,
            request_timeout_ms=40_000,
        )
        for _ in range(args.count)
    ]
    await asyncio.gather(*(c.start() for c in consumers))
    old: int | None = None
    moved: list[float | None] = [None] * len(consumers)

    def watch_moves() -> None:
        if old is None:
            return
        now = time.time()
        for i, c in enumerate(consumers):
            node = c._coordinator.coordinator_id
            if moved[i] is None and node is not None and node != old:
                moved[i] = now

    async def track() -> None:
        while True:
            watch_moves()
            await asyncio.sleep(0.01)

    tracker = asyncio.create_task(track())
    try:
        while True:
            line = (await asyncio.to_thread(sys.stdin.readline)).strip()
            answer: dict[str, Any]
            if line in ("", "stop"):
                break
            if line == "ready":
                answer = {"ready": True}
            elif line == "poll":
                watch_moves()
                answer = {
                    "assigned": [sorted(tp.partition for tp in c.assignment()) for c in consumers],
                    "coordinators": [c._coordinator.coordinator_id for c in consumers],
                    "moved": moved,
                }
            elif line.startswith("watch "):
                old = int(line.split()[1])
                answer = {"watching": old}
            else:
                answer = {"error": f"unknown command {line!r}"}
            print(json.dumps(answer), flush=True)
    finally:
        tracker.cancel()
        await asyncio.gather(*(c.stop() for c in consumers), return_exceptions=True)
    print(json.dumps({"stopped": True}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--fetch-wait-ms", type=int, default=500)
    parser.add_argument("--debug-log", help="aiokafka's DEBUG log to this file (diagnosis)")
    args = parser.parse_args()
    if args.debug_log:
        logging.basicConfig(
            filename=args.debug_log,
            level=logging.DEBUG,
            format="%(asctime)s.%(msecs)03d %(name)s %(levelname)s %(message)s",
            datefmt="%H:%M:%S",
        )
    asyncio.run(serve(args))


if __name__ == "__main__":
    main()
