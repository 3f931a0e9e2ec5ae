"""The broker agent's own CPU per MetadataFetch, without gRPC.

`bench/convergence.py` measures fan-out end to end, where the agents' CPU per
fetch is gRPC's and the agent's together. This bench runs one real `BrokerAgent`
with its real metadata cache on disk in-process, over a scripted controller that
answers every fetch after one turn of the event loop with one new topic config
record (what a caught-up broker gets per commit in convergence.py), encoded and
parsed as gRPC would. It
reports the process CPU per fetch: the fetch loop, the apply into the cache and
its local log, the stats; the part of the agent's cost that the agent's code
decides (`bench/fanout_floor.py` measures gRPC's).

    .venv/bin/python bench/agent_fetch_cost.py [--fetches 20000 --rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from report import emit

from broker_agent.agent import BrokerAgent
from broker_agent.config import parse_broker_config
from broker_agent.main import open_cache
from quorum.controller.image_records import config_record
from quorum.gen import admin_pb2 as api
from quorum.gen import broker_pb2 as bpb

WARM_UP = 100


class OneRecordPerFetch:
    """Registers the broker, then answers each fetch with the next record. The
    answers are built and serialized before the measurement (the active
    controller builds one per commit for every broker), so what is measured is
    the agent's: the parse, the fetch loop, the apply."""

    def __init__(self, fetches: int) -> None:
        self.fetches = fetches
        self.answered = 0
        self.done = asyncio.get_running_loop().create_future()
        self.answers = {offset: self.answer(offset) for offset in range(fetches + WARM_UP + 1)}

    @staticmethod
    def answer(offset: int) -> bytes:
        record = config_record(api.TOPIC, "convergence", "retention.ms", str(60_000 + offset))
        response = bpb.MetadataFetchResponse(
            high_watermark=offset + 1, is_caught_up=True, controller_receive_time_ms=1,
            controller_send_time_ms=2, controller_id=1,
        )  # fmt: skip
        response.batches.add(base_offset=offset, epoch=1, append_time_ms=1, commit_time_ms=1,
                             records=[record.SerializeToString()])  # fmt: skip
        return response.SerializeToString()  # type: ignore[no-any-return]

    async def broker(self, method: str, request: Any, deadline_s: float = 0) -> Any:
        return bpb.RegisterBrokerResponse(broker_epoch=7)

    async def metadata_fetch(self, request: Any, deadline_s: float = 0) -> Any:
        await asyncio.sleep(0)  # a fetch over gRPC waits for its answer at least once
        self.answered += 1
        if self.answered > self.fetches + WARM_UP:
            if not self.done.done():
                self.done.set_result(None)
            await asyncio.sleep(3600)
        offset = request.fetch_offset
        data = self.answers.get(offset) or self.answer(offset)
        return bpb.MetadataFetchResponse.FromString(data)

    async def close(self) -> None:
        pass


async def measure(fetches: int) -> float:
    root = Path(tempfile.mkdtemp(prefix="bench-agent-fetch-"))
    config = parse_broker_config({
        "node.id": "1001", "process.roles": "broker",
        "controller.quorum.voters": "1@127.0.0.1:1", "listeners": "PLAINTEXT://127.0.0.1:2",
        "metadata.log.dir": str(root / "broker"), "log.level": "WARNING",
    })  # fmt: skip
    cache = open_cache(config, False)
    controller = OneRecordPerFetch(fetches)
    agent = BrokerAgent(config, "cluster", cache, None, controller)  # type: ignore[arg-type]
    run = asyncio.ensure_future(agent.run())
    try:
        while controller.answered < WARM_UP:
            await asyncio.sleep(0)
        first, started = controller.answered, time.process_time()
        await controller.done
        return (time.process_time() - started) / (controller.answered - first) * 1e6
    finally:
        run.cancel()
        await asyncio.gather(run, return_exceptions=True)
        cache.close()
        import shutil

        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fetches", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    for _ in range(args.rounds):
        us = asyncio.run(measure(args.fetches))
        emit(metric="agent_cpu_us_per_fetch", value=round(us, 1), fetches=args.fetches,
             load_average=[round(x, 2) for x in os.getloadavg()])  # fmt: skip


if __name__ == "__main__":
    main()
