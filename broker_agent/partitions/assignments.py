"""What committed metadata says about this broker's replicas, read from the
metadata image (its read side only): the partitions, and each topic's configs.

`BrokerView` keeps that up to date as the image moves, from the image's change
log: an applied batch costs what its records changed, not every partition of
the cluster. Before it, every applied batch (a topic created, an ISR change,
a broker heartbeat's fencing) walked every topic of the image and every hosted
replica, on the broker's event loop: half of a forwarded CreateTopics' broker
CPU at batch 1 (docs/benchmarks.md, issue 36's fifth pass).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from quorum.controller.metadata_image import MetadataImage, TopicImage

TOPIC_RESOURCE = 2  # Kafka's ConfigResource.Type.TOPIC

Key = tuple[str, int]  # (topic name, partition id)


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


class BrokerView:
    """The `MetadataView` of one broker, as mappings kept current by `update`."""

    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        self.partitions: dict[Key, PartitionAssignment] = {}
        # hosted topics' configs: the image's own mappings (read, never changed)
        self.topic_configs: dict[str, Mapping[str, str]] = {}
        self._hosted: dict[str, tuple[str, set[int]]] = {}  # topic id -> name, partitions here
        self._image: MetadataImage | None = None
        self._offset = -1

    def update(self, image: MetadataImage) -> set[Key] | None:
        """Catch up with `image`: the replicas whose assignment or topic configs
        may have changed since the last update (added, changed or gone), or None
        when the view was rebuilt whole (the first look, another image, or one
        that loaded a snapshot since)."""
        changes = None
        if image is self._image and self._offset <= image.applied_offset:
            changes = image.topic_changes_since(self._offset)
        self._image, self._offset = image, image.applied_offset
        if changes is None:
            self._rebuild(image)
            return None
        dirty: set[Key] = set()
        # Topics removed or created first, whole: a topic deleted and created
        # again under its name in one batch leaves the new one's replicas.
        for topic_id in changes.topic_ids:
            dirty.update(self._drop_topic(topic_id))
        for topic_id in changes.topic_ids:
            topic = image.topics_by_id.get(topic_id)
            if topic is not None:
                for partition_id in topic.partitions:
                    dirty.update(self._refresh(image, topic, partition_id))
        for topic_id, partition_id in changes.partitions:
            topic = image.topics_by_id.get(topic_id)
            if topic is not None and topic_id not in changes.topic_ids:
                dirty.update(self._refresh(image, topic, partition_id))
        for name in changes.config_topics:
            topic = image.topics_by_name.get(name)
            if topic is not None and topic.topic_id in self._hosted:
                self.topic_configs[name] = image.config(TOPIC_RESOURCE, name)
                dirty.update((name, p) for p in self._hosted[topic.topic_id][1])
        return dirty

    def _rebuild(self, image: MetadataImage) -> None:
        self.partitions, self.topic_configs, self._hosted = {}, {}, {}
        broker_id = self.broker_id
        for topic in image.topics_by_id.values():
            mine: set[int] = set()
            for pid, state in topic.partitions.items():
                if broker_id in state.replicas:
                    mine.add(pid)
                    self.partitions[(topic.name, pid)] = _assignment(topic, pid)
            if mine:
                self._hosted[topic.topic_id] = (topic.name, mine)
                self.topic_configs[topic.name] = image.config(TOPIC_RESOURCE, topic.name)

    def _drop_topic(self, topic_id: str) -> list[Key]:
        hosted = self._hosted.pop(topic_id, None)
        if hosted is None:
            return []
        name, partition_ids = hosted
        self.topic_configs.pop(name, None)
        keys = [(name, p) for p in partition_ids]
        for key in keys:
            self.partitions.pop(key, None)
        return keys

    def _refresh(self, image: MetadataImage, topic: TopicImage, partition_id: int) -> list[Key]:
        """One partition as the image has it now."""
        key = (topic.name, partition_id)
        state = topic.partitions.get(partition_id)
        hosted = self._hosted.get(topic.topic_id)
        if state is not None and self.broker_id in state.replicas:
            self.partitions[key] = _assignment(topic, partition_id)
            if hosted is None:
                self._hosted[topic.topic_id] = (topic.name, {partition_id})
                self.topic_configs[topic.name] = image.config(TOPIC_RESOURCE, topic.name)
            else:
                hosted[1].add(partition_id)
            return [key]
        if hosted is None or partition_id not in hosted[1]:
            return []
        del self.partitions[key]
        hosted[1].discard(partition_id)
        if not hosted[1]:
            del self._hosted[topic.topic_id]
            self.topic_configs.pop(topic.name, None)
        return [key]


def _assignment(topic: TopicImage, partition_id: int) -> PartitionAssignment:
    state = topic.partitions[partition_id]
    return PartitionAssignment(
        topic.name, topic.topic_id, partition_id, tuple(state.replicas), tuple(state.isr),
        state.leader, state.leader_epoch, state.partition_epoch,
    )  # fmt: skip
