"""The metadata image: what the committed metadata records add up to.

Every controller applies the same committed records in the same order, so every
controller holds the same image at the same offset (`digest()` proves it across
processes). Applying is deterministic and validates before it mutates: a record
that contradicts the image raises `InconsistentRecordError` and changes nothing,
because the active controller never writes one; seeing it means the logs
diverged, and the replica must stop rather than guess.

The image is also its own snapshot format: `snapshot_records()` writes each
entity as one full-state record under a key whose byte order replays correctly
(features, brokers, topics, partitions, configs, ACLs, producer ids), and
`changes_since(offset)` gives the same kind of records for only what changed, so
a lagging reader can catch up without replaying every record.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace

from quorum.controller.image_entities import (
    AclEntry,
    BrokerRegistration,
    PartitionState,
    TopicImage,
)
from quorum.controller.image_records import (
    PRODUCER_KEY,
    PartitionRecords,
    PartitionValues,
    acl_key,
    acl_record,
    broker_key,
    broker_record,
    config_key,
    config_record,
    encode_view,
    feature_key,
    feature_record,
    partition_key,
    partition_record,
    split_config_key,
    topic_key,
    topic_record,
)
from quorum.controller.partition_states import PartitionStates
from quorum.controller.record_codec import MetadataRecordError, decode, encode, record_type, wrap
from quorum.controller.topic_changes import TopicChanges, topic_changes
from quorum.gen import metadata_pb2 as md
from snapshots.records import Record


class InconsistentRecordError(MetadataRecordError):
    pass


Prepared = tuple[str, int, bytes, PartitionState]
_UNSEEN = PartitionState((), (), -1, -1, -1)  # a marker: no state looked up yet


class MetadataImage:
    def __init__(self) -> None:
        self._reset(0)
        self._apply: dict[str, Callable[[md.MetadataRecord, int], None]] = {
            "register_broker": self._register_broker,
            "unregister_broker": self._unregister_broker,
            "fence_broker": self._fence_broker,
            "unfence_broker": self._unfence_broker,
            "broker_registration_change": self._broker_change,
            "topic": self._topic,
            "partition": self._partition,
            "partition_change": self._partition_change,
            "remove_topic": self._remove_topic,
            "config": self._config,
            "access_control_entry": self._acl,
            "remove_access_control_entry": self._remove_acl,
            "producer_ids": self._producer_ids,
            "feature_level": self._feature_level,
            "no_op": lambda record, offset: None,
            "leader_change": lambda record, offset: None,
        }

    def _reset(self, offset: int) -> None:
        """Empty, standing at `offset`, tracking changes from there."""
        self._applied_offset = offset
        self.brokers: dict[int, BrokerRegistration] = {}
        self.topics_by_name: dict[str, TopicImage] = {}
        self.topics_by_id: dict[str, TopicImage] = {}
        self.configs: dict[tuple[int, str], dict[str, str]] = {}
        self.acls: dict[str, AclEntry] = {}
        self.features: dict[str, int] = {}
        self.next_producer_id = 0
        self.producer_id_owner = (-1, -1)
        self.partition_count = 0
        self._states = PartitionStates()  # shared: one object per distinct state
        self._partition_records = PartitionRecords(self._states)  # committed ones, undecoded
        # encoded record -> (the record, for a PartitionRecord its topic id,
        # partition id, change key and state)
        self._prepared: dict[bytes, tuple[md.MetadataRecord, Prepared | None]] = {}
        self._digest: str | None = None
        self._changed: dict[bytes, int] = {}  # key -> offset, oldest change first
        # removed key -> (its removal record, the offset it was created at; -1: earlier)
        self._removed: dict[bytes, tuple[md.MetadataRecord, int]] = {}
        self._born: dict[bytes, int] = {}
        self._tracked_from = offset

    # ---------------------------- applying committed records (QuorumController)

    @property
    def applied_offset(self) -> int:
        return self._applied_offset

    def apply(self, offset: int, record: bytes) -> str | None:
        """A committed record; its type (None: applied already)."""
        if offset < self._applied_offset:
            return None
        prepared = self._prepared.pop(record, None) if self._prepared else None
        if prepared is None:
            split = self._partition_records.split(record)
            if split is None:
                decoded = decode(record, offset)
                self.apply_record(decoded, offset)
                return record_type(decoded)
            topic_id, partition_id, state = split
            key = partition_key(topic_id, partition_id)
        else:
            decoded, placed = prepared
            if placed is None:
                self.apply_record(decoded, offset)
                return record_type(decoded)
            topic_id, partition_id, key, state = placed
        partitions = self._known_topic(topic_id, offset).partitions
        if partition_id not in partitions:
            self.partition_count += 1
        partitions[partition_id] = state
        self._touch(key, offset)
        self._applied(offset)
        return "partition"

    def prepare(self, records: Sequence[md.MetadataRecord], data: Sequence[bytes]) -> None:
        """The active controller, while its write replicates: keep the records it
        built (no decoding them back at commit) and build the states of their
        partitions, so that applying them is little more than dict stores. Keyed
        by the encoded record; `apply` takes an entry only for those exact bytes.
        A partition state depends on nothing but its record, so building it
        early cannot differ from building it at commit. The records are this
        version's own, so their encoding is also their snapshot record."""
        split = self._partition_records.split
        for record, raw in zip(records, data, strict=True):
            placed = split(raw)
            if placed is not None:
                # Everything the apply needs, read now: at commit it is dict stores
                # only (no field reads, no key formatting).
                topic_id, partition_id, state = placed
                key = partition_key(topic_id, partition_id)
                self._prepared[raw] = (record, (topic_id, partition_id, key, state))
            else:
                self._prepared[raw] = (record, None)

    def forget_prepared(self) -> None:
        """After the write committed (all taken) or failed (none will be)."""
        self._prepared.clear()

    def apply_record(self, record: md.MetadataRecord, offset: int) -> None:
        kind = record.WhichOneof("record")
        handler = self._apply.get(kind or "")
        if handler is None:
            raise MetadataRecordError(f"record at offset {offset}: no handler for {kind}")
        handler(record, offset)
        self._applied(offset)

    def _applied(self, offset: int) -> None:
        self._applied_offset = offset + 1
        self._digest = None

    def advance_to(self, offset: int) -> None:
        self._applied_offset = max(self._applied_offset, offset)

    def load_snapshot(self, records: Iterable[Record], end_offset: int) -> None:
        """A partition record in the form this version writes is not decoded: its
        ids come from its key and its state from its last bytes, decoded once per
        distinct state (`PartitionValues`); any other record is decoded."""
        self._reset(0)
        at = end_offset - 1
        values = PartitionValues()
        by_fields: dict[bytes, PartitionState | None] = {}
        topics = self.topics_by_id
        for key, value in records:
            if key.startswith(b"\x00"):
                continue  # the Raft layer's (the KIP-853 voter set), not the image's
            split = values.split(key, value)
            if split is not None:
                topic_id, pid, fields = split
                state = by_fields.get(fields, _UNSEEN)
                if state is _UNSEEN:
                    state = by_fields[fields] = self._states.of_fields(fields)
                topic = topics.get(topic_id)
                if state is not None and topic is not None:
                    if pid not in topic.partitions:
                        self.partition_count += 1
                    topic.partitions[pid] = state
                    continue
            record = decode(value, at)
            if record.WhichOneof("record") == "partition":
                self._put_partition(record.partition, at)
            else:
                self.apply_record(record, at)
        self._changed.clear()
        self._removed.clear()
        self._born.clear()
        self._tracked_from = end_offset
        self._applied_offset = end_offset
        self._digest = None

    def snapshot_records(self) -> Iterator[Record]:
        """The image as it is now, encoded lazily: the containers are copied here
        (their entries are immutable), so later applies cannot leak in while a
        worker thread encodes and writes."""
        features = sorted(self.features.items())
        brokers = list(self.brokers.values())
        topics = [(TopicImage(t.name, t.topic_id), dict(t.partitions))
                  for t in self.topics_by_id.values()]  # fmt: skip
        configs = [(key, dict(entries)) for key, entries in self.configs.items()]
        acls = list(self.acls.values())
        producer = None
        if self.producer_id_owner != (-1, -1) or self.next_producer_id:
            producer = self._producer_record()
        return encode_view(features, brokers, topics, configs, acls, producer)

    def digest(self) -> str:
        """SHA-256 over the sorted snapshot records; cached until the next change."""
        if self._digest is None:
            sha = hashlib.sha256()
            for key, value in sorted(self.snapshot_records()):
                sha.update(len(key).to_bytes(4, "big"))
                sha.update(key)
                sha.update(len(value).to_bytes(4, "big"))
                sha.update(value)
            self._digest = sha.hexdigest()[:16]
        return self._digest

    # ------------------------------------------------------------------ reads

    def topic(self, name: str) -> TopicImage | None:
        return self.topics_by_name.get(name)

    def topic_by_id(self, topic_id: str) -> TopicImage | None:
        return self.topics_by_id.get(topic_id)

    def partition(self, topic_id: str, partition_id: int) -> PartitionState | None:
        topic = self.topics_by_id.get(topic_id)
        return None if topic is None else topic.partitions.get(partition_id)

    def config(self, resource_type: int, name: str) -> dict[str, str]:
        return self.configs.get((resource_type, name), {})

    @property
    def topic_count(self) -> int:
        return len(self.topics_by_id)

    def unfenced_broker_ids(self) -> list[int]:
        return sorted(b.broker_id for b in self.brokers.values() if not b.fenced)

    def changes_since(self, offset: int) -> list[md.MetadataRecord] | None:
        """Full-state records for what changed at `offset` or later, removals first;
        replayed on an image that stood at `offset` they give this image. None when
        `offset` is older than this image's change tracking (it began at its
        snapshot): the reader must load a snapshot instead."""
        keys = self._changed_keys_since(offset)
        if keys is None:
            return None
        removals = [
            self._removed[k][0] for k in keys if k in self._removed and self._removed[k][1] < offset
        ]
        current = dict(self.snapshot_records_for(k for k in keys if k not in self._removed))
        return removals + [decode(current[k], -1) for k in sorted(current)]

    def topic_changes_since(self, offset: int) -> TopicChanges | None:
        """What changed at `offset` or later for the topics, from the change log
        (costs what changed, not the image): a broker's replica manager applies
        only that instead of every partition it hosts. None when `offset` is
        older than this image's change tracking (a snapshot was loaded since):
        the reader must look at the whole image."""
        keys = self._changed_keys_since(offset)
        if keys is None:
            return None
        return topic_changes(keys)

    def _changed_keys_since(self, offset: int) -> list[bytes] | None:
        """The keys changed at `offset` or later, newest first; None when `offset`
        is older than the change tracking."""
        if offset < self._tracked_from:
            return None
        keys: list[bytes] = []
        for key, at in reversed(self._changed.items()):
            if at < offset:
                break
            keys.append(key)
        return keys

    def forget_changes_before(self, offset: int) -> None:
        """A snapshot now covers everything before `offset`, and a reader older
        than it loads that snapshot, so `changes_since` answers from `offset` on
        only. Without this the change log of a leader that never loaded a
        snapshot holds a key and an offset for every entity it ever changed (at
        a million partitions, a sixth of its memory). Costs what changed since
        `offset`, not the image: the log is ordered oldest change first."""
        if offset <= self._tracked_from:
            return
        kept: list[tuple[bytes, int]] = []
        for key, at in reversed(self._changed.items()):
            if at < offset:
                break
            kept.append((key, at))
        kept.reverse()
        removed = self._removed
        self._changed = dict(kept)
        self._removed = {k: removed[k] for k, _ in kept if k in removed}
        self._born = {k: at for k, at in self._born.items() if at >= offset}
        self._tracked_from = offset

    def snapshot_records_for(self, keys: Iterable[bytes]) -> Iterator[Record]:
        for key in keys:
            value = self._entity_record(key)
            if value is not None:
                yield key, encode(value)

    # ------------------------------------------------------------- tracking

    def _touch(
        self,
        key: bytes,
        offset: int,
        removal: md.MetadataRecord | None = None,
        created: bool = False,
    ) -> None:
        """Note a change. For removable entities also when they were created, so a
        delta never asks an older image to remove what it never had."""
        self._changed.pop(key, None)
        self._changed[key] = offset
        if created:
            self._born[key] = offset
        if removal is None:
            self._removed.pop(key, None)
        else:
            self._removed[key] = (removal, self._born.pop(key, -1))

    def _entity_record(self, key: bytes) -> md.MetadataRecord | None:
        kind, _, rest = key.partition(b"/")
        if kind == b"00":
            name = rest.decode()
            return feature_record(name, self.features[name]) if name in self.features else None
        if kind == b"10":
            broker = self.brokers.get(int(rest))
            return broker_record(broker) if broker else None
        if kind == b"20":
            topic = self.topics_by_id.get(rest.decode())
            return topic_record(topic) if topic else None
        if kind == b"21":
            topic_id, _, pid = rest.decode().rpartition("/")
            topic = self.topics_by_id.get(topic_id)
            part = topic.partitions.get(int(pid)) if topic else None
            return partition_record(topic, int(pid), part) if topic and part else None
        if kind == b"30":
            rtype, rname, name = split_config_key(rest)
            value = self.configs.get((rtype, rname), {}).get(name)
            return None if value is None else config_record(rtype, rname, name, value)
        if kind == b"40":
            acl = self.acls.get(rest.decode())
            return acl_record(acl) if acl else None
        if key == PRODUCER_KEY:
            return self._producer_record()
        return None

    # -------------------------------------------------------------- brokers

    def _broker(self, broker_id: int, broker_epoch: int, offset: int) -> BrokerRegistration:
        broker = self.brokers.get(broker_id)
        if broker is None or broker.broker_epoch != broker_epoch:
            raise InconsistentRecordError(
                f"record at offset {offset}: broker {broker_id} epoch {broker_epoch} "
                "is not registered"
            )
        return broker

    def _register_broker(self, record: md.MetadataRecord, offset: int) -> None:
        r = record.register_broker
        created = r.broker_id not in self.brokers
        self.brokers[r.broker_id] = BrokerRegistration(
            r.broker_id,
            r.incarnation_id,
            r.broker_epoch,
            tuple((e.name, e.host, e.port, e.security_protocol) for e in r.endpoints),
            r.rack if r.HasField("rack") else None,
            r.fenced,
            r.in_controlled_shutdown,
            tuple((f.name, f.min_supported_version, f.max_supported_version) for f in r.features),
            tuple(r.log_dirs),
        )
        self._touch(broker_key(r.broker_id), offset, created=created)

    def _unregister_broker(self, record: md.MetadataRecord, offset: int) -> None:
        r = record.unregister_broker
        self._broker(r.broker_id, r.broker_epoch, offset)
        del self.brokers[r.broker_id]
        self._touch(broker_key(r.broker_id), offset, record)

    def _fence_broker(self, record: md.MetadataRecord, offset: int) -> None:
        r = record.fence_broker
        broker = self._broker(r.broker_id, r.broker_epoch, offset)
        self.brokers[r.broker_id] = replace(broker, fenced=True)
        self._touch(broker_key(r.broker_id), offset)

    def _unfence_broker(self, record: md.MetadataRecord, offset: int) -> None:
        r = record.unfence_broker
        broker = self._broker(r.broker_id, r.broker_epoch, offset)
        self.brokers[r.broker_id] = replace(broker, fenced=False)
        self._touch(broker_key(r.broker_id), offset)

    def _broker_change(self, record: md.MetadataRecord, offset: int) -> None:
        r = record.broker_registration_change
        broker = self._broker(r.broker_id, r.broker_epoch, offset)
        if r.fenced == md.FENCE_CHANGE_FENCE:
            broker = replace(broker, fenced=True)
        elif r.fenced == md.FENCE_CHANGE_UNFENCE:
            broker = replace(broker, fenced=False)
        if r.HasField("in_controlled_shutdown"):
            broker = replace(broker, in_controlled_shutdown=r.in_controlled_shutdown)
        self.brokers[r.broker_id] = broker
        self._touch(broker_key(r.broker_id), offset)

    # --------------------------------------------------------------- topics

    def _topic(self, record: md.MetadataRecord, offset: int) -> None:
        r = record.topic
        if r.name in self.topics_by_name or r.topic_id in self.topics_by_id:
            raise InconsistentRecordError(
                f"record at offset {offset}: topic {r.name} ({r.topic_id}) already exists"
            )
        topic = TopicImage(r.name, r.topic_id)
        self.topics_by_name[r.name] = topic
        self.topics_by_id[r.topic_id] = topic
        self._touch(topic_key(r.topic_id), offset, created=True)

    def _known_topic(self, topic_id: str, offset: int) -> TopicImage:
        topic = self.topics_by_id.get(topic_id)
        if topic is None:
            raise InconsistentRecordError(f"record at offset {offset}: unknown topic {topic_id}")
        return topic

    def _partition(self, record: md.MetadataRecord, offset: int) -> None:
        self._install_partition(record.partition, offset)

    def _install_partition(
        self, r: md.PartitionRecord, offset: int, state: PartitionState | None = None
    ) -> None:
        self._put_partition(r, offset, state)
        self._touch(partition_key(r.topic_id, r.partition_id), offset)

    def _put_partition(
        self, r: md.PartitionRecord, offset: int, state: PartitionState | None = None
    ) -> None:
        """A PartitionRecord's state, without change tracking: a snapshot's
        records (the bulk of a large image) are loaded with this directly, since
        a loaded image tracks changes from its end offset only."""
        partitions = self._known_topic(r.topic_id, offset).partitions
        if r.partition_id not in partitions:
            self.partition_count += 1
        partitions[r.partition_id] = state or self._states.of_record(r)

    def _partition_change(self, record: md.MetadataRecord, offset: int) -> None:
        r = record.partition_change
        part = self._known_topic(r.topic_id, offset).partitions.get(r.partition_id)
        if part is None:
            raise InconsistentRecordError(
                f"record at offset {offset}: unknown partition {r.topic_id}-{r.partition_id}"
            )
        leader, leader_epoch = part.leader, part.leader_epoch
        if r.HasField("leader") and r.leader != part.leader:
            leader, leader_epoch = r.leader, leader_epoch + 1
        ids = self._states.ids
        self._known_topic(r.topic_id, offset).partitions[r.partition_id] = self._states.of(
            (
                ids(r.replicas.ids) if r.HasField("replicas") else part.replicas,
                ids(r.isr.ids) if r.HasField("isr") else part.isr,
                leader,
                leader_epoch,
                part.partition_epoch + 1,
                tuple(r.removing_replicas.ids)
                if r.HasField("removing_replicas")
                else part.removing_replicas,
                tuple(r.adding_replicas.ids)
                if r.HasField("adding_replicas")
                else part.adding_replicas,
            )
        )
        self._touch(partition_key(r.topic_id, r.partition_id), offset)

    def _remove_topic(self, record: md.MetadataRecord, offset: int) -> None:
        topic = self._known_topic(record.remove_topic.topic_id, offset)
        del self.topics_by_id[topic.topic_id]
        del self.topics_by_name[topic.name]
        self.partition_count -= len(topic.partitions)
        self.configs.pop((md.CONFIG_RESOURCE_TOPIC, topic.name), None)
        for pid in topic.partitions:  # the RemoveTopic removal covers them
            key = partition_key(topic.topic_id, pid)
            self._changed.pop(key, None)
            self._removed.pop(key, None)
        self._touch(topic_key(topic.topic_id), offset, record)

    # ------------------------------------------------- configs, ACLs, the rest

    def _config(self, record: md.MetadataRecord, offset: int) -> None:
        r = record.config
        resource = (int(r.resource_type), r.resource_name)
        key = config_key(resource[0], r.resource_name, r.name)
        if r.HasField("value"):
            entries = self.configs.setdefault(resource, {})
            created = r.name not in entries
            entries[r.name] = r.value
            self._touch(key, offset, created=created)
            return
        entries = self.configs.get(resource, {})
        entries.pop(r.name, None)
        if not entries:
            self.configs.pop(resource, None)
        self._touch(key, offset, record)

    def _acl(self, record: md.MetadataRecord, offset: int) -> None:
        r = record.access_control_entry
        created = r.id not in self.acls
        self.acls[r.id] = AclEntry(
            r.id,
            r.resource_type,
            r.resource_name,
            r.pattern_type,
            r.principal,
            r.host,
            r.operation,
            r.permission_type,
        )
        self._touch(acl_key(r.id), offset, created=created)

    def _remove_acl(self, record: md.MetadataRecord, offset: int) -> None:
        acl_id = record.remove_access_control_entry.id
        if acl_id not in self.acls:
            raise InconsistentRecordError(f"record at offset {offset}: unknown ACL {acl_id}")
        del self.acls[acl_id]
        self._touch(acl_key(acl_id), offset, record)

    def _producer_ids(self, record: md.MetadataRecord, offset: int) -> None:
        r = record.producer_ids
        if r.next_producer_id < self.next_producer_id:
            raise InconsistentRecordError(
                f"record at offset {offset}: producer ids go back from "
                f"{self.next_producer_id} to {r.next_producer_id}"
            )
        self.next_producer_id = r.next_producer_id
        self.producer_id_owner = (r.broker_id, r.broker_epoch)
        self._touch(PRODUCER_KEY, offset)

    def _producer_record(self) -> md.MetadataRecord:
        broker_id, broker_epoch = self.producer_id_owner
        return wrap(
            producer_ids=md.ProducerIdsRecord(
                broker_id=broker_id,
                broker_epoch=broker_epoch,
                next_producer_id=self.next_producer_id,
            )
        )

    def _feature_level(self, record: md.MetadataRecord, offset: int) -> None:
        r = record.feature_level
        if r.feature_level == 0:
            self.features.pop(r.name, None)
            self._touch(feature_key(r.name), offset, record)
        else:
            created = r.name not in self.features
            self.features[r.name] = r.feature_level
            self._touch(feature_key(r.name), offset, created=created)


# ------------------------------------------------------------- snapshot keys


# ------------------------------------------------------- full-state records
