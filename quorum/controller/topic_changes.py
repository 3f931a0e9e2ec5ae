"""What a run of image changes did to topics, read from the changed entities' keys.

A broker's replica manager applies only that instead of every partition it hosts
(`MetadataImage.topic_changes_since`), so a metadata apply costs what changed, not
the image.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from quorum.controller.image_records import split_config_key
from quorum.gen import metadata_pb2 as md


@dataclass(frozen=True, slots=True)
class TopicChanges:
    """Topics created or removed (by id), partitions written (topic id, partition
    id), topics whose configs changed (by name). A removed topic's partitions and
    configs are covered by its id."""

    topic_ids: set[str]
    partitions: set[tuple[str, int]]
    config_topics: set[str]


def topic_changes(keys: Iterable[bytes]) -> TopicChanges:
    """The topics, partitions and topic configs among the image's entity keys."""
    changes = TopicChanges(set(), set(), set())
    for key in keys:
        kind, rest = key[:3], key[3:]
        if kind == b"21/":
            topic_id, _, partition_id = rest.decode().rpartition("/")
            changes.partitions.add((topic_id, int(partition_id)))
        elif kind == b"20/":
            changes.topic_ids.add(rest.decode())
        elif kind == b"30/":
            resource_type, resource_name, _ = split_config_key(rest)
            if resource_type == md.CONFIG_RESOURCE_TOPIC:
                changes.config_topics.add(resource_name)
    return changes
