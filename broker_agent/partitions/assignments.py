"""What committed metadata says about this broker's replicas, read from the
metadata image (its read side only): the partitions, and each topic's configs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from quorum.controller.metadata_image import MetadataImage

TOPIC_RESOURCE = 2  # Kafka's ConfigResource.Type.TOPIC


@dataclass(frozen=True, slots=True)
class PartitionAssignment:
    topic: str
    topic_id: str
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int


@dataclass(frozen=True, slots=True)
class MetadataView:
    """Every partition with a replica on this broker, and every topic's configs."""

    partitions: tuple[PartitionAssignment, ...]
    topic_configs: Mapping[str, Mapping[str, str]]


def view_for_broker(image: MetadataImage, broker_id: int) -> MetadataView:
    parts: list[PartitionAssignment] = []
    configs: dict[str, Mapping[str, str]] = {}
    for topic in image.topics_by_id.values():
        mine = False
        for pid, state in topic.partitions.items():
            if broker_id in state.replicas:
                mine = True
                parts.append(
                    PartitionAssignment(
                        topic.name, topic.topic_id, pid, tuple(state.replicas), tuple(state.isr),
                        state.leader, state.leader_epoch, state.partition_epoch,
                    )
                )  # fmt: skip
        if mine:
            configs[topic.name] = image.config(TOPIC_RESOURCE, topic.name)
    return MetadataView(tuple(parts), configs)
