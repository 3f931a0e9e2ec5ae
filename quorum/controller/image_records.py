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
from quorum.controller.partition_states import PartitionStates
from quorum.controller.record_codec import RECORD_VERSION, encode, wrap
from quorum.gen import metadata_pb2 as md
from snapshots.records import Record

# A partition's snapshot record, byte for byte what encoding `partition_record`
# gives (protobuf writes fields in number order): the envelope's version, the
# `partition` field's tag (21, length-delimited) and length, then the
# PartitionRecord: partition_id (1, omitted at 0), topic_id (2), and the shared
# state's fields 3-9 (`PartitionState.tail`).
_ENVELOPE = encode(md.MetadataRecord(version=RECORD_VERSION)) + b"\xaa\x01"
_PARTITION_ID_TAG = b"\x08"
_TOPIC_ID_TAG = b"\x12"
MAX_PARTITION_ID = (1 << 31) - 1  # an int32 field: larger reads differently decoded
TOPICS_KEPT = 1 << 16  # topic ids and states remembered by PartitionRecords, then forgotten
_UNSEEN = PartitionState((), (), -1, -1, -1)  # a marker: no state looked up yet


def encode_view(
    features: list[tuple[str, int]],
    brokers: list[BrokerRegistration],
    topics: list[tuple[TopicImage, dict[int, PartitionState]]],
    configs: list[tuple[tuple[int, str], dict[str, str]]],
    acls: list[AclEntry],
    producer: md.MetadataRecord | None,
) -> Iterator[Record]:
    # Every section in key order, as the snapshot writer checksums without sorting
    # (a million records were a 250 MB list to sort).
    for name, level in sorted(features):
        yield feature_key(name), encode(feature_record(name, level))
    for broker in sorted(brokers, key=lambda b: b.broker_id):
        yield broker_key(broker.broker_id), encode(broker_record(broker))
    # Topics, then partitions by topic id and partition id (topic ids are of one
    # length, so no id's partition keys sort inside another's).
    topics.sort(key=lambda entry: entry[0].topic_id)
    for topic, _ in topics:
        yield topic_key(topic.topic_id), encode(topic_record(topic))
    for topic, partitions in topics:
        prefix = partition_key_prefix(topic.topic_id)
        topic_field = _topic_id_field(topic)
        yield from [
            (prefix + b"%010d" % pid, _partition_value(topic_field, pid, partitions[pid]))
            for pid in sorted(partitions)
        ]
    config_records = [
        (config_key(rtype, rname, key), config_record(rtype, rname, key, value))
        for (rtype, rname), entries in configs
        for key, value in entries.items()
    ]
    for key, record in sorted(config_records, key=lambda entry: entry[0]):
        yield key, encode(record)
    for acl in sorted(acls, key=lambda a: acl_key(a.acl_id)):
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
    """The encoded snapshot record of partition `pid` of `t` in state `p`."""
    return _partition_value(_topic_id_field(t), pid, p)


def _partition_value(topic_field: bytes, pid: int, p: PartitionState) -> bytes:
    tail = p.tail
    if tail is None:  # a race between threads only encodes the same bytes twice
        tail = p.tail = _state_fields(p)
    inner = (_PARTITION_ID_TAG + _varint(pid) if pid else b"") + topic_field + tail
    return _ENVELOPE + _varint(len(inner)) + inner


class PartitionValues:
    """Reads a snapshot's partition records without decoding them, when a record is
    exactly what `partition_value` writes for its key's partition: the topic id and
    partition id come from the key, and the state's fields are the bytes after
    them (`split`), which a loader decodes once per distinct state."""

    def __init__(self) -> None:
        self._topics: dict[bytes, tuple[str, bytes]] = {}  # raw id -> (id, its field)

    def split(self, key: bytes, value: bytes) -> tuple[str, int, bytes] | None:
        """(topic id, partition id, the state's fields), or None: decode it instead."""
        digits = key[-10:]
        if not (key.startswith(b"21/") and key[-11:-10] == b"/" and digits.isdigit()):
            return None
        if not value.startswith(_ENVELOPE):
            return None
        raw = key[3:-11]
        known = self._topics.get(raw)
        if known is None:
            known = self._topics[raw] = (raw.decode(), _topic_field(raw))
        topic_id, topic_field = known
        at = len(_ENVELOPE)
        if at >= len(value):
            return None
        length, at = (value[at], at + 1) if value[at] < 0x80 else _two_byte_varint(value, at)
        pid = int(digits)
        head = (_PARTITION_ID_TAG + _varint(pid) if pid else b"") + topic_field
        if at + length != len(value) or not value.startswith(head, at):
            return None
        return topic_id, pid, value[at + len(head) :]


class PartitionRecords:
    """Reads a committed PartitionRecord of this version without decoding it (a
    follower's or a restarted controller's apply of a million partitions: the
    decode was most of its 38 ms per 10,000): the envelope, the partition id and
    the topic id are read here, and the state from the bytes after them, built
    once per distinct state (`PartitionStates.of_fields`) and kept while the
    same bytes come again. Anything else is left to the decoder (None)."""

    def __init__(self, states: PartitionStates) -> None:
        self._states = states
        self._topics: dict[bytes, str] = {}
        self._by_fields: dict[bytes, PartitionState | None] = {}

    def split(self, value: bytes) -> tuple[str, int, PartitionState] | None:
        """(topic id, partition id, state) of an encoded partition record."""
        if not value.startswith(_ENVELOPE):
            return None
        at = len(_ENVELOPE)
        if at >= len(value):
            return None
        length, at = (value[at], at + 1) if value[at] < 0x80 else _two_byte_varint(value, at)
        if at + length != len(value):
            return None
        pid = 0
        if value.startswith(_PARTITION_ID_TAG, at):
            pid, at = _read_varint(value, at + 1)
        if not value.startswith(_TOPIC_ID_TAG, at) or at + 1 >= len(value):
            return None
        size = value[at + 1]
        if size >= 0x80 or pid < 0 or pid > MAX_PARTITION_ID:
            return None
        raw = value[at + 2 : at + 2 + size]
        if len(raw) != size:
            return None
        topic_id = self._topics.get(raw)
        if topic_id is None:
            try:
                topic_id = raw.decode()
            except UnicodeDecodeError:
                return None
            if len(self._topics) >= TOPICS_KEPT:
                self._topics.clear()
            self._topics[raw] = topic_id
        fields = value[at + 2 + size :]
        state = self._by_fields.get(fields, _UNSEEN)
        if state is _UNSEEN:
            if len(self._by_fields) >= TOPICS_KEPT:
                self._by_fields.clear()
            state = self._by_fields[fields] = self._states.of_fields(fields)
        if state is None:
            return None
        return topic_id, pid, state


def _read_varint(data: bytes, at: int) -> tuple[int, int]:
    """An unsigned varint at `at` and the position after it; -1 if it runs off
    the end or past 64 bits (the caller then decodes instead)."""
    result, shift = 0, 0
    while at < len(data) and shift < 64:
        byte = data[at]
        result |= (byte & 0x7F) << shift
        at += 1
        if byte < 0x80:
            return result, at
        shift += 7
    return -1, at


def _two_byte_varint(data: bytes, at: int) -> tuple[int, int]:
    """A varint of exactly two bytes at `at` (a partition record's length), or a
    length no record has (-1), which makes the caller decode instead."""
    if at + 1 >= len(data) or data[at + 1] >= 0x80:
        return -1, at
    return (data[at] & 0x7F) | (data[at + 1] << 7), at + 2


def _topic_id_field(t: TopicImage) -> bytes:
    return _topic_field(t.topic_id.encode())


def _topic_field(topic_id: bytes) -> bytes:
    return _TOPIC_ID_TAG + _varint(len(topic_id)) + topic_id if topic_id else b""


def _state_fields(p: PartitionState) -> bytes:
    """Fields 3-9 of its PartitionRecord (those are all a PartitionState holds)."""
    return _partition_fields(p).SerializeToString()


def _partition_fields(p: PartitionState, pid: int = 0, topic_id: str = "") -> md.PartitionRecord:
    return md.PartitionRecord(
        partition_id=pid,
        topic_id=topic_id,
        replicas=p.replicas,
        isr=p.isr,
        removing_replicas=p.removing_replicas,
        adding_replicas=p.adding_replicas,
        leader=p.leader,
        leader_epoch=p.leader_epoch,
        partition_epoch=p.partition_epoch,
    )


def _varint(value: int) -> bytes:
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def partition_record(t: TopicImage, pid: int, p: PartitionState) -> md.MetadataRecord:
    return wrap(partition=_partition_fields(p, pid, t.topic_id))


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
