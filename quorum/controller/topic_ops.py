"""Topic writes (create, delete, add partitions) as records, and topic reads.

Each builder validates every item against the committed image and returns the
records of the valid items plus a result per item; an invalid item changes
nothing and does not stop the valid ones.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Generator, Iterable

from quorum.controller import config_schema as cs
from quorum.controller.api_errors import ApiError, ControllerError
from quorum.controller.leader_election import elect_leader, under_min_isr
from quorum.controller.metadata_image import MetadataImage, PartitionState, TopicImage
from quorum.controller.record_codec import new_uuid, wrap
from quorum.controller.replica_placement import BrokerInfo, place_replicas, validate_assignment
from quorum.controller.request_limits import DEFAULTS, RequestLimits
from quorum.controller.validation import (
    check_partition_budget,
    topic_counts_problem,
    validate_topic_name,
)
from quorum.gen import admin_pb2 as api
from quorum.gen import metadata_pb2 as md

Records = list[md.MetadataRecord]


def api_error(error: ApiError, message: str = "") -> api.ApiError:
    return api.ApiError(error_code=error.value, error_name=error.name, message=message)


OK = api_error(ApiError.NONE)


class CollisionWarnings:
    """'.' and '_' collide in metric names; Kafka warns about such pairs. The names
    that can collide, folded ('.' read as '_'), are indexed once per request and
    only when a name in it can collide: a scan of every topic for each new one made
    a 100-topic create in a cluster of N such topics cost 100 N comparisons."""

    def __init__(self, existing: Iterable[str]) -> None:
        self._existing = existing
        self._folded: dict[str, str] | None = None

    def warning(self, name: str) -> str:
        """The warning for creating `name` (empty when it collides with nothing)."""
        if "." not in name and "_" not in name:
            return ""
        if self._folded is None:
            self._folded = {}
            for existing in self._existing:
                self._add(existing)
        other = self._folded.get(name.replace(".", "_"))
        if other is None or other == name:
            return ""
        return f"topic {name!r} collides with {other!r} once '.' is read as '_' (metric names)"

    def created(self, name: str) -> None:
        """`name` is created by the same request: later names are checked against it."""
        if self._folded is not None:
            self._add(name)

    def _add(self, name: str) -> None:
        assert self._folded is not None
        if "." in name or "_" in name:
            self._folded.setdefault(name.replace(".", "_"), name)


def acceptable_leader(image: MetadataImage) -> Callable[[int], bool]:
    def ok(broker_id: int) -> bool:
        broker = image.brokers.get(broker_id)
        return broker is not None and not broker.fenced and not broker.in_controlled_shutdown

    return ok


def usable_brokers(image: MetadataImage) -> list[BrokerInfo]:
    ok = acceptable_leader(image)
    return [BrokerInfo(b.broker_id, b.rack) for b in image.brokers.values() if ok(b.broker_id)]


def partition_records(
    image: MetadataImage, topic_id: str, first: int, assignment: list[tuple[int, ...]]
) -> Records:
    usable = {b.broker_id for b in usable_brokers(image)}
    out = []
    for i, replicas in enumerate(assignment, start=first):
        if usable.issuperset(replicas):
            # The usual case (placement picks usable brokers): all in sync, and
            # the election's answer is the first replica.
            isr, leader = replicas, replicas[0]
        else:
            live = tuple(r for r in replicas if r in usable)
            leader = elect_leader(replicas, live, usable.__contains__, False).leader
            isr = live if live else replicas
        out.append(
            wrap(
                partition=md.PartitionRecord(
                    partition_id=i,
                    topic_id=topic_id,
                    replicas=replicas,
                    isr=isr,
                    leader=leader,
                    leader_epoch=0,
                    partition_epoch=0,
                )
            )
        )
    return out


def _assignment_from_request(
    image: MetadataImage,
    num_partitions: int,
    replication_factor: int,
    explicit: list[api.ReplicaAssignment],
    rng: random.Random,
    first: int = 0,
) -> list[tuple[int, ...]]:
    if explicit:
        by_partition = {a.partition_index: tuple(a.broker_ids) for a in explicit}
        if len(by_partition) != len(explicit):
            raise ControllerError(
                ApiError.INVALID_REPLICA_ASSIGNMENT, "a partition is assigned twice"
            )
        validate_assignment(by_partition, set(image.brokers), first)
        return [by_partition[p] for p in sorted(by_partition)]
    if num_partitions <= 0:
        num_partitions = default_partitions(image)
    if replication_factor <= 0:
        replication_factor = int(
            image.config(cs.CLUSTER, "").get("default.replication.factor", "1")
        )
    return place_replicas(num_partitions, replication_factor, usable_brokers(image), rng, first)


def default_partitions(image: MetadataImage) -> int:
    return int(image.config(cs.CLUSTER, "").get("num.partitions", "1"))


def _partitions_to_create(image: MetadataImage, request: api.CreateTopicsRequest) -> int:
    """What the request would add if every item were valid, defaults resolved."""
    default = default_partitions(image)
    total = 0
    for item in request.topics:
        if item.assignments:
            total += len(item.assignments)
        elif item.num_partitions in (0, -1):
            total += default
        elif item.num_partitions > 0:
            total += item.num_partitions
    return total


# Partitions built between two pauses of a sliced build: about 5 ms of work, so
# the largest request the limits allow (10,000 partitions) yields the loop
# every few milliseconds instead of holding it for the whole build.
SLICE_PARTITIONS = 1000

Sliced = Generator[None, None, tuple[Records, api.CreateTopicsResponse]]


def build_create_topics(
    image: MetadataImage,
    request: api.CreateTopicsRequest,
    rng: random.Random,
    limits: RequestLimits = DEFAULTS,
) -> tuple[Records, api.CreateTopicsResponse]:
    """`create_topics_in_slices` run to its end in one go."""
    slices = create_topics_in_slices(image, request, rng, limits)
    while True:
        try:
            next(slices)
        except StopIteration as done:
            return done.value


def create_topics_in_slices(
    image: MetadataImage,
    request: api.CreateTopicsRequest,
    rng: random.Random,
    limits: RequestLimits = DEFAULTS,
) -> Sliced:
    """Refuses the whole request (ControllerError) past the partition limits,
    before any placement runs; otherwise answers per topic. A generator that
    pauses (yields) after every `SLICE_PARTITIONS` partitions built, so the
    write queue can let the event loop serve others in between; it reads the
    image only, so the records are the same however the pauses fall."""
    check_partition_budget(image.partition_count, _partitions_to_create(image, request), limits)
    records: Records = []
    response = api.CreateTopicsResponse()
    seen: set[str] = set()
    collisions = CollisionWarnings(image.topics_by_name)
    built = 0  # partitions built since the last pause
    for item in request.topics:
        result = response.topics.add(name=item.name)
        try:
            validate_topic_name(item.name)
            if item.name in seen:
                raise ControllerError(
                    ApiError.INVALID_REQUEST, f"topic {item.name!r} appears twice in the request"
                )
            seen.add(item.name)
            if image.topic(item.name) is not None:
                raise ControllerError(
                    ApiError.TOPIC_ALREADY_EXISTS, f"topic {item.name!r} already exists"
                )
            problem = topic_counts_problem(item)
            if problem is not None:
                raise problem
            assignment = _assignment_from_request(
                image, item.num_partitions, item.replication_factor, list(item.assignments), rng
            )
            factor = len(assignment[0])
            configs = dict(item.configs)
            cs.validate_topic_configs(configs, factor)
        except ControllerError as err:
            result.error.CopyFrom(api_error(err.error, err.message))
            continue
        topic_id = new_uuid(rng)
        result.topic_id = topic_id
        result.error.CopyFrom(OK)
        result.num_partitions = len(assignment)
        result.replication_factor = factor
        result.warning = collisions.warning(item.name)
        collisions.created(item.name)
        for key, value in sorted(configs.items()):
            result.configs.add(name=key, value=value, source=api.DYNAMIC_TOPIC_CONFIG)
        if request.validate_only:
            continue
        records.append(wrap(topic=md.TopicRecord(name=item.name, topic_id=topic_id)))
        for start in range(0, len(assignment), SLICE_PARTITIONS):
            chunk = assignment[start : start + SLICE_PARTITIONS]
            records.extend(partition_records(image, topic_id, start, chunk))
            built += len(chunk)
            if built >= SLICE_PARTITIONS:
                built = 0
                yield
        for key, value in sorted(configs.items()):
            records.append(
                wrap(
                    config=md.ConfigRecord(
                        resource_type=md.CONFIG_RESOURCE_TOPIC,
                        resource_name=item.name,
                        name=key,
                        value=value,
                    )
                )
            )
    return records, response


def build_delete_topics(
    image: MetadataImage, request: api.DeleteTopicsRequest
) -> tuple[Records, api.DeleteTopicsResponse]:
    records: Records = []
    response = api.DeleteTopicsResponse()
    doomed: set[str] = set()
    targets: list[tuple[str, str, TopicImage | None]] = [
        (name, "", image.topic(name)) for name in request.names
    ] + [("", tid, image.topic_by_id(tid)) for tid in request.topic_ids]
    for name, tid, topic in targets:
        result = response.topics.add(name=name, topic_id=tid)
        if topic is None:
            error = ApiError.UNKNOWN_TOPIC_OR_PARTITION if name else ApiError.UNKNOWN_TOPIC_ID
            result.error.CopyFrom(api_error(error, f"no topic {name or tid!r}"))
            continue
        result.name, result.topic_id = topic.name, topic.topic_id
        result.error.CopyFrom(OK)
        if topic.topic_id not in doomed:
            doomed.add(topic.topic_id)
            records.append(wrap(remove_topic=md.RemoveTopicRecord(topic_id=topic.topic_id)))
    return records, response


def build_create_partitions(
    image: MetadataImage,
    request: api.CreatePartitionsRequest,
    rng: random.Random,
    limits: RequestLimits = DEFAULTS,
) -> tuple[Records, api.CreatePartitionsResponse]:
    """Refuses the whole request (ControllerError) past the partition limits,
    before any placement runs; otherwise answers per topic."""
    adding = 0
    for item in request.topics:
        topic = image.topic(item.name)
        if topic is not None and item.count > len(topic.partitions):
            adding += item.count - len(topic.partitions)
    check_partition_budget(image.partition_count, adding, limits)
    records: Records = []
    response = api.CreatePartitionsResponse()
    for item in request.topics:
        result = response.topics.add(name=item.name)
        topic = image.topic(item.name)
        try:
            if topic is None:
                raise ControllerError(
                    ApiError.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {item.name!r}"
                )
            current = len(topic.partitions)
            if item.count <= current:
                raise ControllerError(
                    ApiError.INVALID_PARTITIONS,
                    f"topic {item.name!r} has {current} partitions; the new count "
                    f"{item.count} must be larger",
                )
            factor = len(topic.partitions[0].replicas)
            if item.assignments:
                assignment = _assignment_from_request(
                    image, 0, 0, list(item.assignments), rng, first=current
                )
                if len(assignment) != item.count - current or len(assignment[0]) != factor:
                    raise ControllerError(
                        ApiError.INVALID_REPLICA_ASSIGNMENT,
                        f"need {item.count - current} new partitions of {factor} replicas",
                    )
            else:
                assignment = place_replicas(
                    item.count - current, factor, usable_brokers(image), rng, current
                )
        except ControllerError as err:
            result.error.CopyFrom(api_error(err.error, err.message))
            continue
        result.error.CopyFrom(OK)
        if not request.validate_only and topic is not None:
            records.extend(partition_records(image, topic.topic_id, current, assignment))
    return records, response


def min_isr(image: MetadataImage, topic: TopicImage) -> int:
    value = cs.topic_value(
        "min.insync.replicas", image.config(cs.TOPIC, topic.name), image.config(cs.CLUSTER, "")
    )
    return int(value)


def describe_partition(
    image: MetadataImage, pid: int, part: PartitionState, min_insync: int
) -> api.PartitionDescription:
    ok = acceptable_leader(image)
    return api.PartitionDescription(
        partition=pid,
        leader=part.leader,
        leader_epoch=part.leader_epoch,
        partition_epoch=part.partition_epoch,
        replicas=part.replicas,
        isr=part.isr,
        offline_replicas=[r for r in part.replicas if not ok(r)],
        under_min_isr=under_min_isr(part.isr, min_insync),
        min_isr=min_insync,
        under_replicated=len(part.isr) < len(part.replicas),
    )


def describe_topics(
    image: MetadataImage, request: api.DescribeTopicsRequest
) -> api.DescribeTopicsResponse:
    response = api.DescribeTopicsResponse()
    names = list(request.names) or sorted(image.topics_by_name)
    for name in names:
        result = response.topics.add(name=name)
        topic = image.topic(name)
        if topic is None:
            result.error.CopyFrom(
                api_error(ApiError.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {name!r}")
            )
            continue
        result.topic_id = topic.topic_id
        result.error.CopyFrom(OK)
        floor = min_isr(image, topic)
        for pid in sorted(topic.partitions):
            result.partitions.append(describe_partition(image, pid, topic.partitions[pid], floor))
    return response


def list_topics(image: MetadataImage) -> api.ListTopicsResponse:
    response = api.ListTopicsResponse()
    for name in sorted(image.topics_by_name):
        topic = image.topics_by_name[name]
        first = topic.partitions.get(0)
        response.topics.add(
            name=name,
            topic_id=topic.topic_id,
            partitions=len(topic.partitions),
            replication_factor=len(first.replicas) if first else 0,
        )
    return response
