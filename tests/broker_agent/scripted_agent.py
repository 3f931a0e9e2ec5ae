"""A broker agent with a fresh local metadata cache, for tests that script its
controller (the agent's `admin` seam) instead of running one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from broker_agent.agent import BrokerAgent
from broker_agent.config import parse_broker_config
from broker_agent.metadata_cache import MetadataCache
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
