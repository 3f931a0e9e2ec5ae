"""What each controller RPC needs to be authorized for, as Kafka's controllers ask.

Only the table: whether the caller has it is `authorizer.Authorizer`'s answer,
asked once per call by `quorum/server/access.py`.

A request is allowed when every one of its `Requirement`s is; a requirement is
met by any of its alternatives (CreateTopics: CREATE on the cluster, or CREATE
on that topic). The whole call is refused on the first unmet requirement, so a
refusal changes nothing. Listing calls are not refused: their answers leave out
the topics the caller may not DESCRIBE, as Kafka's Metadata answer does.

- CreateTopics: CREATE on CLUSTER, or CREATE on each topic.
- DeleteTopics: DELETE on each topic (a topic id is resolved to its name first).
- CreatePartitions: ALTER on each topic.
- IncrementalAlterConfigs / DescribeConfigs: ALTER_CONFIGS / DESCRIBE_CONFIGS on
  the topic, or on CLUSTER for broker and cluster-wide resources.
- DescribeTopics with names: DESCRIBE on each topic.
- CreateAcls, DeleteAcls, ElectLeaders, UpdateFeatures, UnregisterBroker,
  AddRaftVoter, RemoveRaftVoter: ALTER
  on CLUSTER. DescribeAcls, DescribeQuorum: DESCRIBE on CLUSTER.
- AlterPartition, AllocateProducerIds, the broker calls (RegisterBroker,
  BrokerHeartbeat, MetadataFetch, FetchMetadataSnapshot), the Raft calls,
  UpdateRaftVoter and QuorumLog writes: CLUSTER_ACTION on CLUSTER.
- ListTopics, DescribeTopics without names, DescribeCluster: nothing (the first
  two are filtered).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from quorum.authz.authorizer import Action, Operation, Requirement, cluster, topic

_CONFIG_TOPIC = 2  # admin.proto ResourceType.TOPIC
TopicNameOf = Callable[[str], "str | None"]  # a topic id's name in the image


def _each(actions: Iterable[Action]) -> list[Requirement]:
    return [Requirement((a,)) for a in dict.fromkeys(actions)]


def _config_action(resource_type: int, name: str, operation: Operation) -> Action:
    return topic(name, operation) if resource_type == _CONFIG_TOPIC else cluster(operation)


def _create_topics(request: Any, topic_names: TopicNameOf) -> list[Requirement]:
    create = cluster(Operation.CREATE)
    names = dict.fromkeys(t.name for t in request.topics)
    return [Requirement((create, topic(n, Operation.CREATE))) for n in names]


def _delete_topics(request: Any, topic_names: TopicNameOf) -> list[Requirement]:
    names = list(request.names)
    # An unknown id needs no permission: it is refused per item as unknown.
    names += [n for n in map(topic_names, request.topic_ids) if n is not None]
    return _each(topic(n, Operation.DELETE) for n in names)


_RULES: dict[str, Callable[[Any, TopicNameOf], list[Requirement]] | Operation | str] = {
    "CreateTopicsRequest": _create_topics,
    "DeleteTopicsRequest": _delete_topics,
    "CreatePartitionsRequest": lambda r, _: _each(topic(t.name, Operation.ALTER) for t in r.topics),
    "IncrementalAlterConfigsRequest": lambda r, _: _each(
        _config_action(x.resource_type, x.resource_name, Operation.ALTER_CONFIGS)
        for x in r.resources
    ),
    "DescribeConfigsRequest": lambda r, _: _each(
        _config_action(x.resource_type, x.resource_name, Operation.DESCRIBE_CONFIGS)
        for x in r.resources
    ),
    "DescribeTopicsRequest": lambda r, _: _each(topic(n, Operation.DESCRIBE) for n in r.names),
    "CreateAclsRequest": Operation.ALTER,
    "DeleteAclsRequest": Operation.ALTER,
    "ElectLeadersRequest": Operation.ALTER,
    "UpdateFeaturesRequest": Operation.ALTER,
    "UnregisterBrokerRequest": Operation.ALTER,
    "AddRaftVoterRequest": Operation.ALTER,
    "RemoveRaftVoterRequest": Operation.ALTER,
    "UpdateRaftVoterRequest": Operation.CLUSTER_ACTION,
    "DescribeAclsRequest": Operation.DESCRIBE,
    "DescribeQuorumRequest": Operation.DESCRIBE,
    "AlterPartitionRequest": Operation.CLUSTER_ACTION,
    "AllocateProducerIdsRequest": Operation.CLUSTER_ACTION,
    "RegisterBrokerRequest": Operation.CLUSTER_ACTION,
    "BrokerHeartbeatRequest": Operation.CLUSTER_ACTION,
    "MetadataFetchRequest": Operation.CLUSTER_ACTION,
    "FetchMetadataSnapshotRequest": Operation.CLUSTER_ACTION,
    "VoteRequest": Operation.CLUSTER_ACTION,
    "BeginQuorumEpochRequest": Operation.CLUSTER_ACTION,
    "EndQuorumEpochRequest": Operation.CLUSTER_ACTION,
    "FetchRequest": Operation.CLUSTER_ACTION,
    "FetchSnapshotRequest": Operation.CLUSTER_ACTION,
    "WriteRequest": Operation.CLUSTER_ACTION,
    "ListTopicsRequest": "public",
    "DescribeClusterRequest": "public",
}


def requirements(request: Any, topic_names: TopicNameOf) -> list[Requirement]:
    """What `request` needs; `topic_names` gives a topic id's name (the image's).

    A request type with no rule needs CLUSTER_ACTION: a new RPC is closed to
    everyone but the cluster's own principals until someone decides otherwise."""
    rule = _RULES.get(type(request).__name__, Operation.CLUSTER_ACTION)
    if isinstance(rule, Operation):
        return [Requirement((cluster(rule),))]
    if isinstance(rule, str):
        return []
    return rule(request, topic_names)


def filters_topics(request: Any) -> bool:
    """Whether the answer lists topics the caller may not see (to be left out)."""
    name = type(request).__name__
    return name == "ListTopicsRequest" or (name == "DescribeTopicsRequest" and not request.names)


__all__ = ["TopicNameOf", "filters_topics", "requirements"]
