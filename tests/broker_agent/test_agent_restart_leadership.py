"""A restarted broker must not lead on what its metadata cache remembers.

Found by the seed-003 tests on real processes: broker 10, SIGKILLed while it led
a partition in epoch 0, restarted and for a moment led it again in epoch 0 (its
cache's view) although the controllers had long moved leadership to broker 11 in
epoch 1: its replica manager was handed the cached image right after
registration. A producer routed by the same stale view could have had an
`acks=all` write acknowledged by it and then truncated away. As Kafka's brokers
publish their metadata image only once caught up, the replica manager now sees
none until the image holds this broker's own registration; by then the
controllers have fenced the old incarnation and moved its leaderships away.

In process: the real agent, cache and replica manager; a scripted controller.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from broker_agent.agent import BrokerAgent
from broker_agent.config import parse_broker_config
from broker_agent.metadata_cache import MetadataCache
from broker_agent.partitions.replica_config import ReplicaConfig
from broker_agent.partitions.replica_manager import ReplicaManager
from quorum.controller.metadata_image import MetadataImage
from quorum.controller.record_codec import encode, wrap
from quorum.gen import broker_pb2 as bpb
from quorum.gen import metadata_pb2 as md
from quorum.raft.records import Batch
from snapshots.policy import SnapshotPolicy

ME, OTHER = 10, 11
TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAQ"


def register(broker: int, epoch: int, incarnation: str) -> md.MetadataRecord:
    endpoint = md.BrokerEndpoint(
        name="PLAINTEXT", host="127.0.0.1", port=9092 + broker, security_protocol="PLAINTEXT"
    )
    return wrap(
        register_broker=md.RegisterBrokerRecord(
            broker_id=broker, broker_epoch=epoch, incarnation_id=incarnation, endpoints=[endpoint]
        )
    )


BEFORE_THE_CRASH = [
    register(ME, 0, "old"),
    register(OTHER, 1, "other"),
    wrap(topic=md.TopicRecord(name="orders", topic_id=TOPIC_ID)),
    wrap(
        partition=md.PartitionRecord(
            partition_id=0, topic_id=TOPIC_ID, replicas=[ME, OTHER], isr=[ME, OTHER], leader=ME
        )
    ),
]
# Committed while the broker was down: fenced, its leadership moved; then its
# new incarnation registers (the registration's offset is its broker epoch).
WHILE_DOWN = [
    wrap(fence_broker=md.FenceBrokerRecord(broker_id=ME, broker_epoch=0)),
    wrap(
        partition_change=md.PartitionChangeRecord(
            partition_id=0, topic_id=TOPIC_ID, leader=OTHER, isr=md.BrokerIdList(ids=[OTHER])
        )
    ),
]
NEW_EPOCH = len(BEFORE_THE_CRASH) + len(WHILE_DOWN)


class ScriptedController:
    """Registration, then one MetadataFetch with everything committed since the
    cache's offset, then a controlled shutdown."""

    def __init__(self, agent_box: list[BrokerAgent]) -> None:
        self.agent_box = agent_box
        self.fetches = 0

    async def broker(self, method: str, request: Any, deadline_s: float) -> Any:
        assert method == "RegisterBroker"
        return bpb.RegisterBrokerResponse(broker_epoch=NEW_EPOCH)

    async def metadata_fetch(self, request: Any, deadline_s: float) -> Any:
        self.fetches += 1
        if request.want_shutdown:
            return bpb.MetadataFetchResponse(should_shut_down=True, is_fenced=True)
        if self.fetches > 1:
            self.agent_box[0].request_stop()
            return bpb.MetadataFetchResponse(high_watermark=NEW_EPOCH + 1, is_fenced=True)
        records = [*WHILE_DOWN, register(ME, NEW_EPOCH, "new")]
        assert request.fetch_offset == len(BEFORE_THE_CRASH)
        return bpb.MetadataFetchResponse(
            batches=[bpb.MetadataBatch(
                base_offset=request.fetch_offset, epoch=1,
                records=[encode(r) for r in records]),
            ],
            high_watermark=NEW_EPOCH + 1,
            is_fenced=True,
        )  # fmt: skip

    async def close(self) -> None:
        pass


class RecordingReplicaManager(ReplicaManager):
    """Remembers the (leader, leader epoch) of orders-0 in every image it was given."""

    seen: list[tuple[int, int]]

    def on_metadata(self, image: MetadataImage, *, open_in_background: bool = False) -> None:
        part = image.partition(TOPIC_ID, 0)
        assert part is not None
        self.seen.append((part.leader, part.leader_epoch))
        super().on_metadata(image, open_in_background=open_in_background)


def test_a_restarted_broker_applies_no_leadership_before_it_caught_up(tmp_path: Path) -> None:
    policy = SnapshotPolicy(1 << 30, 3_600_000)
    cache = MetadataCache(tmp_path / "meta", policy, 1 << 20, 0)
    cache.append([Batch(0, 0, tuple(encode(r) for r in BEFORE_THE_CRASH), 0, False)])
    assert cache.image.partition(TOPIC_ID, 0).leader == ME  # what the cache remembers
    config = parse_broker_config({
        "node.id": str(ME), "process.roles": "broker",
        "controller.quorum.voters": "1@127.0.0.1:9",
        "listeners": "PLAINTEXT://127.0.0.1:9092", "metadata.log.dir": str(tmp_path / "meta"),
    })  # fmt: skip
    box: list[BrokerAgent] = []
    controller = ScriptedController(box)

    async def go() -> tuple[list[tuple[int, int]], str]:
        replicas = RecordingReplicaManager(
            ME, tmp_path / "logs", ReplicaConfig(tick_interval_ms=None)
        )
        replicas.seen = []
        agent = BrokerAgent(config, "cluster", cache, None, controller, replicas=replicas)  # type: ignore[arg-type]
        box.append(agent)
        try:
            assert await agent.run() == 0
            # Its log opens in a worker thread and may join after the agent stopped.
            for _ in range(1000):
                if replicas.partition_state("orders", 0) is not None:
                    break
                await asyncio.sleep(0.01)
            part = replicas.partition_state("orders", 0)
            assert part is not None
            return replicas.seen, part.role.name
        finally:
            await replicas.close()

    seen, role = asyncio.run(go())
    cache.close()
    assert (ME, 0) not in seen, seen  # never the cached, stale leadership
    assert seen and seen[0] == (OTHER, 1)
    assert role == "FOLLOWER"
