"""How the image is written as snapshot records: one full-state record per
entity, under a key whose byte order replays correctly (features, brokers,
topics, partitions, configs, ACLs, producer ids)."""

from __future__ import annotations

from collections.abc import Iterator

from quorum.controller.image_entities import (
    AclEntry,
    BrokerRegistration,
    PartitionState,
    TopicImage,
)
from quorum.controller.record_codec import encode, wrap
from quorum.gen import metadata_pb2 as md
from snapshots.records import Record


def encode_view(
    features: list[tuple[str, int]],
    brokers: list[BrokerRegistration],
    topics: list[tuple[TopicImage, dict[int, PartitionState]]],
    configs: list[tuple[tuple[int, str], dict[str, str]]],
    acls: list[AclEntry],
    producer: md.MetadataRecord | None,
) -> Iterator[Record]:
    for name, level in features:
        yield feature_key(name), encode(feature_record(name, level))
    for broker in brokers:
        yield broker_key(broker.broker_id), encode(broker_record(broker))
    # Key order (topics, then partitions by topic id and partition id), so that
    # sorting the snapshot's records is one pass.
    topics.sort(key=lambda entry: entry[0].topic_id)
    for topic, _ in topics:
        yield topic_key(topic.topic_id), encode(topic_record(topic))
    for topic, partitions in topics:
        prefix = partition_key_prefix(topic.topic_id)
        yield from [
            (prefix + b"%010d" % pid, partition_value(topic, pid, partitions[pid]))
            for pid in sorted(partitions)
        ]
    for (rtype, rname), entries in configs:
        for key, value in entries.items():
            record = config_record(rtype, rname, key, value)
            yield config_key(rtype, rname, key), encode(record)
    for acl in acls:
        yield acl_key(acl.acl_id), encode(acl_record(acl))
    if producer is not None:
        yield PRODUCER_KEY, encode(producer)


PRODUCER_KEY = b"50/producer-ids"


def feature_key(name: str) -> bytes:
    return b"00/" + name.encode()


def broker_key(broker_id: int) -> bytes:
    return b"10/%010d" % broker_id


def topic_key(topic_id: str) -> bytes:
    return b"20/" + topic_id.encode()


def partition_key(topic_id: str, partition_id: int) -> bytes:
    return partition_key_prefix(topic_id) + b"%010d" % partition_id


def partition_key_prefix(topic_id: str) -> bytes:
    return b"21/" + topic_id.encode() + b"/"


def config_key(resource_type: int, resource_name: str, name: str) -> bytes:
    return b"30/%02d/" % resource_type + resource_name.encode() + b"\x00" + name.encode()


def split_config_key(rest: bytes) -> tuple[int, str, str]:
    rtype, _, tail = rest.partition(b"/")
    rname, _, name = tail.partition(b"\x00")
    return int(rtype), rname.decode(), name.decode()


def acl_key(acl_id: str) -> bytes:
    return b"40/" + acl_id.encode()


def feature_record(name: str, level: int) -> md.MetadataRecord:
    return wrap(feature_level=md.FeatureLevelRecord(name=name, feature_level=level))


def broker_record(b: BrokerRegistration) -> md.MetadataRecord:
    record = md.RegisterBrokerRecord(
        broker_id=b.broker_id,
        incarnation_id=b.incarnation_id,
        broker_epoch=b.broker_epoch,
        endpoints=[
            md.BrokerEndpoint(name=n, host=h, port=p, security_protocol=s)
            for n, h, p, s in b.endpoints
        ],
        features=[
            md.BrokerFeatureRange(name=n, min_supported_version=lo, max_supported_version=hi)
            for n, lo, hi in b.features
        ],
        fenced=b.fenced,
        in_controlled_shutdown=b.in_controlled_shutdown,
        log_dirs=b.log_dirs,
    )
    if b.rack is not None:
        record.rack = b.rack
    return wrap(register_broker=record)


def topic_record(t: TopicImage) -> md.MetadataRecord:
    return wrap(topic=md.TopicRecord(name=t.name, topic_id=t.topic_id))


def partition_value(t: TopicImage, pid: int, p: PartitionState) -> bytes:
    """The encoded snapshot record of an (immutable) partition state, memoised on
    it. Safe from a worker thread: a race only encodes the same bytes twice."""
    value = p.snapshot_value
    if value is None:
        value = encode(partition_record(t, pid, p))
        p.snapshot_value = value
    return value


def partition_record(t: TopicImage, pid: int, p: PartitionState) -> md.MetadataRecord:
    return wrap(
        partition=md.PartitionRecord(
            partition_id=pid,
            topic_id=t.topic_id,
            replicas=p.replicas,
            isr=p.isr,
            removing_replicas=p.removing_replicas,
            adding_replicas=p.adding_replicas,
            leader=p.leader,
            leader_epoch=p.leader_epoch,
            partition_epoch=p.partition_epoch,
        )
    )


def config_record(rtype: int, rname: str, name: str, value: str) -> md.MetadataRecord:
    return wrap(
        config=md.ConfigRecord(
            resource_type=rtype,  # type: ignore[arg-type]
            resource_name=rname,
            name=name,
            value=value,
        )
    )


def acl_record(a: AclEntry) -> md.MetadataRecord:
    return wrap(
        access_control_entry=md.AccessControlEntryRecord(
            id=a.acl_id,
            resource_type=a.resource_type,
            resource_name=a.resource_name,
            pattern_type=a.pattern_type,
            principal=a.principal,
            host=a.host,
            operation=a.operation,
            permission_type=a.permission_type,
        )
    )
