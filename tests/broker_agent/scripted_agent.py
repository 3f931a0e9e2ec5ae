"""A broker agent with a fresh local metadata cache, for tests that script its
controller (the agent's `admin` seam) instead of running one."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from broker_agent.agent import BrokerAgent
from broker_agent.config import parse_broker_config
from broker_agent.metadata_cache import MetadataCache
from quorum.gen import broker_pb2 as bpb
from snapshots.policy import SnapshotPolicy


def scripted_agent(
    tmp_path: Path, node_id: int, controller: Any
) -> tuple[BrokerAgent, MetadataCache]:
    """Broker `node_id`, its cache under `tmp_path/meta`, talking to `controller`."""
    cache = MetadataCache(tmp_path / "meta", SnapshotPolicy(1 << 30, 3_600_000), 1 << 20, 0)
    config = parse_broker_config({
        "node.id": str(node_id), "process.roles": "broker",
        "controller.quorum.voters": "1@127.0.0.1:9",
        "listeners": "PLAINTEXT://127.0.0.1:9092", "metadata.log.dir": str(tmp_path / "meta"),
    })  # fmt: skip
    return BrokerAgent(config, "cluster", cache, None, controller), cache


class OneAnswerController:
    """Registers the broker, answers its first fetch with `batches`, then stops the
    agent (set `agent` once it is built) at its next fetch."""

    def __init__(self, batches: Sequence[bpb.MetadataBatch]) -> None:
        self.agent: Any = None
        self.batches = list(batches)
        self.end = max((b.base_offset + len(b.records) for b in batches), default=0)

    async def broker(self, method: str, request: Any, deadline_s: float) -> Any:
        return bpb.RegisterBrokerResponse(broker_epoch=0)

    async def metadata_fetch(self, request: Any, deadline_s: float) -> Any:
        await asyncio.sleep(0)
        if request.want_shutdown:
            return bpb.MetadataFetchResponse(should_shut_down=True, is_fenced=True)
        if request.fetch_offset > 0:
            self.agent.request_stop()
            return bpb.MetadataFetchResponse(high_watermark=self.end)
        return bpb.MetadataFetchResponse(batches=self.batches, high_watermark=self.end)

    async def close(self) -> None:
        pass
