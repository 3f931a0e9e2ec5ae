"""Partition leadership and ISR changes as PartitionChange records.

Leader elections requested by operators (ElectLeaders), ISR changes proposed by
partition leaders (AlterPartition), the moves that follow a broker being fenced,
shutting down or coming back, and the automatic preferred-leader rebalance.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from quorum.controller import config_schema as cs
from quorum.controller.api_errors import ApiError
from quorum.controller.leader_election import (
    NO_LEADER,
    ChangeSpec,
    on_broker_available,
    on_broker_unavailable,
    preferred_election,
    unclean_election,
    validate_alter_partition,
)
from quorum.controller.metadata_image import MetadataImage, PartitionState, TopicImage
from quorum.controller.record_codec import wrap
from quorum.controller.topic_ops import OK, Records, acceptable_leader, api_error
from quorum.gen import admin_pb2 as api
from quorum.gen import metadata_pb2 as md


def change_record(topic_id: str, pid: int, spec: ChangeSpec) -> md.MetadataRecord:
    record = md.PartitionChangeRecord(partition_id=pid, topic_id=topic_id)
    if spec.leader is not None:
        record.leader = spec.leader
    if spec.isr is not None:
        record.isr.ids.extend(spec.isr)
    return wrap(partition_change=record)


UNCLEAN_KEY = "unclean.leader.election.enable"


def unclean_allowed(
    image: MetadataImage,
    topic: TopicImage,
    changed: Mapping[tuple[int, str], Mapping[str, str]] | None = None,
) -> bool:
    """The topic's effective setting; `changed` overrides configs (resource type,
    name) as a write about to commit leaves them."""
    changed = changed or {}
    value = cs.topic_value(
        UNCLEAN_KEY,
        changed.get((cs.TOPIC, topic.name), image.config(cs.TOPIC, topic.name)),
        changed.get((cs.CLUSTER, ""), image.config(cs.CLUSTER, "")),
    )
    return value.lower() == "true"


def elections_for_unclean_enabled(
    image: MetadataImage, changed: Mapping[tuple[int, str], Mapping[str, str]]
) -> Records:
    """Configs turning `unclean.leader.election.enable` on elect, in the same
    commit, a leader for the partitions already offline under them (a live
    replica outside the ISR, its data lost as the seed says): what the operator
    turned it on for. Only the configs changed here are looked at; a partition
    that goes offline later is elected when its last ISR member is fenced."""
    if not any(UNCLEAN_KEY in configs for configs in changed.values()) and not any(
        UNCLEAN_KEY in image.config(rtype, name) for rtype, name in changed
    ):
        return []
    acceptable = acceptable_leader(image)
    records: Records = []
    for topic in image.topics_by_id.values():
        if unclean_allowed(image, topic) or not unclean_allowed(image, topic, changed):
            continue
        for pid, part in sorted(topic.partitions.items()):
            spec = on_broker_available(part, acceptable, unclean_allowed=True)
            if spec is not None:
                records.append(change_record(topic.topic_id, pid, spec))
    return records


def _partitions_of(
    image: MetadataImage, broker: int
) -> Iterator[tuple[TopicImage, int, PartitionState]]:
    for topic in image.topics_by_id.values():
        for pid, part in topic.partitions.items():
            if broker in part.replicas:
                yield topic, pid, part


def moves_for_unavailable_broker(
    image: MetadataImage, broker: int, acceptable: Callable[[int], bool]
) -> Records:
    """Leadership off, and out of ISRs, for a broker being fenced."""
    records = []
    for topic, pid, part in _partitions_of(image, broker):
        spec = on_broker_unavailable(part, broker, acceptable, unclean_allowed(image, topic))
        if spec is not None:
            records.append(change_record(topic.topic_id, pid, spec))
    return records


def moves_for_shutdown(
    image: MetadataImage, broker: int, acceptable: Callable[[int], bool]
) -> Records:
    """Controlled shutdown: move leadership away (offline only where no other ISR
    member can lead); leave the broker in ISRs where removing it would take them
    below min.insync.replicas."""
    from quorum.controller.topic_ops import min_isr  # local: avoid an import cycle

    records = []
    for topic, pid, part in _partitions_of(image, broker):
        floor = min_isr(image, topic)
        isr = part.isr
        if broker in isr and len(isr) - 1 >= floor and len(isr) > 1:
            isr = tuple(r for r in isr if r != broker)
        leader = part.leader
        if part.leader == broker:
            # With no other ISR member to take over the partition goes offline now,
            # as KRaft does: it would the moment the broker stops anyway.
            leader = next((r for r in part.replicas if r in isr and acceptable(r)), NO_LEADER)
        spec = ChangeSpec(
            leader if leader != part.leader else None, isr if isr != part.isr else None
        )
        if spec.leader is not None or spec.isr is not None:
            records.append(change_record(topic.topic_id, pid, spec))
    return records


def moves_for_available_broker(
    image: MetadataImage, broker: int, acceptable: Callable[[int], bool]
) -> Records:
    records = []
    for topic, pid, part in _partitions_of(image, broker):
        spec = on_broker_available(part, acceptable, unclean_allowed(image, topic))
        if spec is not None:
            records.append(change_record(topic.topic_id, pid, spec))
    return records


def leads_anything(image: MetadataImage, broker: int) -> bool:
    return any(part.leader == broker for _t, _p, part in _partitions_of(image, broker))


def build_elect_leaders(
    image: MetadataImage, request: api.ElectLeadersRequest
) -> tuple[Records, api.ElectLeadersResponse]:
    acceptable = acceptable_leader(image)
    records: Records = []
    response = api.ElectLeadersResponse()
    wanted: list[tuple[str, int]] = []
    if request.partitions:
        for item in request.partitions:
            topic = image.topic(item.topic)
            pids = list(item.partitions) or (sorted(topic.partitions) if topic else [0])
            wanted.extend((item.topic, p) for p in pids)
    else:
        for name in sorted(image.topics_by_name):
            wanted.extend((name, p) for p in sorted(image.topics_by_name[name].partitions))
    for name, pid in wanted:
        result = response.results.add(topic=name, partition=pid)
        topic = image.topic(name)
        part = topic.partitions.get(pid) if topic else None
        if topic is None or part is None:
            result.error.CopyFrom(
                api_error(ApiError.UNKNOWN_TOPIC_OR_PARTITION, f"no partition {name}-{pid}")
            )
            continue
        if request.election_type == api.UNCLEAN:
            error, spec = unclean_election(part, acceptable)
        else:
            error, spec = preferred_election(part, acceptable)
        result.leader = spec.leader if spec and spec.leader is not None else part.leader
        result.error.CopyFrom(api_error(error, "") if error is not ApiError.NONE else OK)
        if spec is not None:
            records.append(change_record(topic.topic_id, pid, spec))
    return records, response


def build_alter_partition(
    image: MetadataImage, request: api.AlterPartitionRequest
) -> tuple[Records, api.AlterPartitionResponse]:
    records: Records = []
    response = api.AlterPartitionResponse()
    broker = image.brokers.get(request.broker_id)

    def eligible(replica: int) -> bool:
        b = image.brokers.get(replica)
        return b is not None and not b.fenced and not b.in_controlled_shutdown

    for item in request.partitions:
        result = response.results.add(topic_id=item.topic_id, partition=item.partition)
        part = image.partition(item.topic_id, item.partition)
        if broker is None or broker.broker_epoch != request.broker_epoch:
            error = ApiError.STALE_BROKER_EPOCH if broker else ApiError.BROKER_ID_NOT_REGISTERED
            result.error.CopyFrom(api_error(error, f"broker {request.broker_id}"))
            continue
        if part is None:
            result.error.CopyFrom(
                api_error(ApiError.UNKNOWN_TOPIC_OR_PARTITION, f"{item.topic_id}-{item.partition}")
            )
            continue
        error = validate_alter_partition(
            part,
            request.broker_id,
            item.leader_epoch,
            item.partition_epoch,
            list(item.new_isr),
            eligible,
        )
        if error is not ApiError.NONE:
            result.error.CopyFrom(api_error(error, _alter_message(error, part)))
            result.leader, result.leader_epoch = part.leader, part.leader_epoch
            result.isr.extend(part.isr)
            result.partition_epoch = part.partition_epoch
            continue
        new_isr = tuple(item.new_isr)
        result.error.CopyFrom(OK)
        result.leader, result.leader_epoch = part.leader, part.leader_epoch
        result.isr.extend(new_isr)
        result.partition_epoch = part.partition_epoch + (new_isr != part.isr)
        if new_isr != part.isr:
            records.append(change_record(item.topic_id, item.partition, ChangeSpec(isr=new_isr)))
    return records, response


def _alter_message(error: ApiError, part: PartitionState) -> str:
    return {
        ApiError.NOT_LEADER_OR_FOLLOWER: f"the leader is broker {part.leader}",
        ApiError.FENCED_LEADER_EPOCH: f"the leader epoch is {part.leader_epoch}",
        ApiError.INVALID_UPDATE_VERSION: f"the partition epoch is {part.partition_epoch}",
        ApiError.INELIGIBLE_REPLICA: "the ISR may hold only live, unfenced replicas",
        ApiError.INVALID_REQUEST: "the ISR must be non-empty, distinct, and hold the leader",
    }.get(error, "")


def build_rebalance(image: MetadataImage) -> Records:
    """Automatic preferred-leader rebalance, as `auto.leader.rebalance.enable` asks:
    for each broker whose share of preferred-but-not-led partitions is above
    `leader.imbalance.per.broker.percentage`, move those back to it."""
    cluster = image.config(cs.CLUSTER, "")
    if cluster.get("auto.leader.rebalance.enable", "true").lower() != "true":
        return []
    threshold = int(cluster.get("leader.imbalance.per.broker.percentage", "10"))
    acceptable = acceptable_leader(image)
    preferred: dict[int, list[tuple[TopicImage, int, PartitionState]]] = {}
    for topic in image.topics_by_id.values():
        for pid, part in topic.partitions.items():
            if part.replicas:
                preferred.setdefault(part.replicas[0], []).append((topic, pid, part))
    records: Records = []
    for _broker, parts in sorted(preferred.items()):
        off = [(t, p, s) for t, p, s in parts if s.leader != s.replicas[0]]
        if not off or 100 * len(off) / len(parts) <= threshold:
            continue
        for topic, pid, part in off:
            _, spec = preferred_election(part, acceptable)
            if spec is not None:
                records.append(change_record(topic.topic_id, pid, spec))
    return records
