"""An agent without follower fetching asks for ISR expansions only after a broker
or a partition changed, not after every fetch.

Such an agent (no replica manager, or one without a `LeaderFetchClient`) keeps
the old rule: as leader, it asks the controller to put back into the ISR the
replicas that are online again. It used to scan every partition of the image
after each fetch that moved the image, which in the fan-out bench is every
fetch (one topic config change each), and to ask again for the same expansion
after a config change. In process: the real agent and cache, a scripted
controller that records AlterPartition requests.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from quorum.controller.image_records import config_record
from quorum.controller.record_codec import encode, wrap
from quorum.gen import admin_pb2 as api
from quorum.gen import broker_pb2 as bpb
from quorum.gen import metadata_pb2 as md
from tests.broker_agent.scripted_agent import scripted_agent

ME, OTHER = 10, 11
TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAQ"


def register(broker: int, epoch: int) -> md.MetadataRecord:
    return wrap(
        register_broker=md.RegisterBrokerRecord(
            broker_id=broker, broker_epoch=epoch, incarnation_id=f"i{broker}"
        )
    )


# The broker leads orders-0, whose other replica is online but out of the ISR.
START = [
    register(ME, 0),
    register(OTHER, 1),
    wrap(unfence_broker=md.UnfenceBrokerRecord(broker_id=ME, broker_epoch=0)),
    wrap(unfence_broker=md.UnfenceBrokerRecord(broker_id=OTHER, broker_epoch=1)),
    wrap(topic=md.TopicRecord(name="orders", topic_id=TOPIC_ID)),
    wrap(
        partition=md.PartitionRecord(
            partition_id=0, topic_id=TOPIC_ID, replicas=[ME, OTHER], isr=[ME], leader=ME
        )
    ),
]
CONFIG_CHANGE = [config_record(api.TOPIC, "orders", "retention.ms", "1000")]
# Another leader epoch, the ISR as it was: the expansion is still owed.
PARTITION_CHANGE = [
    wrap(partition_change=md.PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, leader=ME))
]


class ScriptedController:
    """Answers each fetch with the next scripted batch (then stops the agent);
    records every AlterPartition; refuses the ones listed in `refuse`."""

    def __init__(self, batches: list[list[md.MetadataRecord]], refuse: set[int]) -> None:
        self.batches = batches
        self.refuse = refuse
        self.alter_requests: list[api.AlterPartitionRequest] = []
        self.fetched_after_alter: list[int] = []  # AlterPartition count at each fetch
        self.agent: Any = None

    async def broker(self, method: str, request: Any, deadline_s: float) -> Any:
        assert method == "RegisterBroker", method
        return bpb.RegisterBrokerResponse(broker_epoch=0)

    async def admin(self, method: str, request: Any, deadline_s: float) -> Any:
        assert method == "AlterPartition", method
        self.alter_requests.append(request)
        refused = len(self.alter_requests) in self.refuse
        error = api.ApiError(error_code=120, error_name="NEW_LEADER_ELECTED") if refused else None
        return api.AlterPartitionResponse(
            results=[
                api.AlterPartitionResult(
                    topic_id=item.topic_id, partition=item.partition, error=error
                )
                for item in request.partitions
            ]
        )

    async def metadata_fetch(self, request: Any, deadline_s: float) -> Any:
        await asyncio.sleep(0)
        self.fetched_after_alter.append(len(self.alter_requests))
        if request.want_shutdown:
            return bpb.MetadataFetchResponse(should_shut_down=True, is_fenced=True)
        if not self.batches:
            self.agent.request_stop()
            return bpb.MetadataFetchResponse(high_watermark=request.fetch_offset)
        records = self.batches.pop(0)
        return bpb.MetadataFetchResponse(
            batches=[bpb.MetadataBatch(
                base_offset=request.fetch_offset, epoch=1, records=[encode(r) for r in records],
            )],
            high_watermark=request.fetch_offset + len(records),
        )  # fmt: skip

    async def close(self) -> None:
        pass


def run(
    tmp_path: Path, batches: list[list[md.MetadataRecord]], refuse: frozenset[int] = frozenset()
) -> ScriptedController:
    controller = ScriptedController(batches, set(refuse))
    agent, cache = scripted_agent(tmp_path, ME, controller)
    controller.agent = agent
    try:
        assert asyncio.run(asyncio.wait_for(agent.run(), 10)) == 0
    finally:
        cache.close()
    return controller


def test_an_expansion_is_asked_for_once_and_not_again_after_a_config_change(
    tmp_path: Path,
) -> None:
    controller = run(tmp_path, [START, CONFIG_CHANGE, CONFIG_CHANGE])
    assert len(controller.alter_requests) == 1
    [item] = controller.alter_requests[0].partitions
    assert (item.topic_id, item.partition, list(item.new_isr)) == (TOPIC_ID, 0, [ME, OTHER])
    assert controller.alter_requests[0].broker_id == ME


def test_a_partition_change_makes_the_agent_look_again(tmp_path: Path) -> None:
    controller = run(tmp_path, [START, CONFIG_CHANGE, PARTITION_CHANGE])
    assert len(controller.alter_requests) == 2  # still owed after the new leader epoch


def test_a_refused_expansion_is_asked_for_again_after_the_next_fetch(tmp_path: Path) -> None:
    controller = run(tmp_path, [START, CONFIG_CHANGE], refuse=frozenset({1}))
    assert len(controller.alter_requests) == 2
    # the second request came after the next fetch, not in a loop of its own
    assert controller.fetched_after_alter[:2] == [0, 1]
