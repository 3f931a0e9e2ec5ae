"""Which ISRs a partition leader without follower fetching asks to expand.

Without a `LeaderFetchClient` the agent keeps its old rule: as leader of a
partition, it asks the controller (AlterPartition) to put back into the ISR the
replicas that are online again (registered, unfenced, not shutting down).
"""

from __future__ import annotations

from quorum.controller.metadata_image import MetadataImage
from quorum.gen import admin_pb2 as api


def isr_expansions(image: MetadataImage, me: int) -> list[api.AlterPartitionItem]:
    """One AlterPartition item per partition `me` leads whose ISR lacks an online replica."""

    def online(broker_id: int) -> bool:
        broker = image.brokers.get(broker_id)
        return broker is not None and not broker.fenced and not broker.in_controlled_shutdown

    items = []
    for topic in image.topics_by_id.values():
        for pid, part in topic.partitions.items():
            if part.leader != me or len(part.isr) == len(part.replicas):
                continue
            missing = [r for r in part.replicas if r not in part.isr and online(r)]
            if missing:
                new_isr = [r for r in part.replicas if r in part.isr or r in missing]
                items.append(
                    api.AlterPartitionItem(
                        topic_id=topic.topic_id,
                        partition=pid,
                        leader_epoch=part.leader_epoch,
                        new_isr=new_isr,
                        partition_epoch=part.partition_epoch,
                    )
                )
    return items
