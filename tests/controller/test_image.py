"""The metadata image: record effects, refusals, and snapshot/delta equivalence."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quorum.controller.metadata_image import InconsistentRecordError, MetadataImage
from quorum.controller.record_codec import (
    MetadataRecordError,
    UnknownRecordType,
    UnsupportedRecordVersion,
    decode,
    encode,
    new_uuid,
    wrap,
)
from quorum.gen import metadata_pb2 as md

TOPIC = md.CONFIG_RESOURCE_TOPIC


def apply_all(image: MetadataImage, records: list[md.MetadataRecord], start: int = 0) -> None:
    for offset, record in enumerate(records, start=start):
        image.apply(offset, encode(record))


def register(broker: int, epoch: int = 1, fenced: bool = False) -> md.MetadataRecord:
    return wrap(
        register_broker=md.RegisterBrokerRecord(
            broker_id=broker, incarnation_id=f"i{broker}", broker_epoch=epoch, fenced=fenced
        )
    )


def topic(name: str, tid: str) -> md.MetadataRecord:
    return wrap(topic=md.TopicRecord(name=name, topic_id=tid))


def partition(tid: str, pid: int, replicas: list[int]) -> md.MetadataRecord:
    return wrap(
        partition=md.PartitionRecord(
            topic_id=tid, partition_id=pid, replicas=replicas, isr=replicas, leader=replicas[0]
        )
    )


def change(
    tid: str, pid: int, leader: int | None = None, isr: list[int] | None = None
) -> md.MetadataRecord:
    record = md.PartitionChangeRecord(topic_id=tid, partition_id=pid)
    if leader is not None:
        record.leader = leader
    if isr is not None:
        record.isr.ids.extend(isr)
    return wrap(partition_change=record)  # fmt: skip


BASE = [register(1), register(2), register(3), topic("orders", "T1"),
        partition("T1", 0, [1, 2, 3]), partition("T1", 1, [2, 3, 1])]  # fmt: skip


def test_partition_changes_bump_epochs_as_kafka_does() -> None:
    image = MetadataImage()
    apply_all(image, [*BASE, change("T1", 0, isr=[1, 2])])
    part = image.partition("T1", 0)
    assert part is not None and (part.isr, part.leader_epoch, part.partition_epoch) == (
        (1, 2),
        0,
        1,
    )
    image.apply(7, encode(change("T1", 0, leader=2)))
    part = image.partition("T1", 0)
    assert part is not None and (part.leader, part.leader_epoch, part.partition_epoch) == (2, 1, 2)
    image.apply(8, encode(change("T1", 0, leader=2)))  # same leader: no new leader epoch
    part = image.partition("T1", 0)
    assert part is not None and (part.leader_epoch, part.partition_epoch) == (1, 3)


def test_remove_topic_drops_partitions_and_configs() -> None:
    image = MetadataImage()
    config = wrap(config=md.ConfigRecord(resource_type=TOPIC, resource_name="orders",
                                         name="retention.ms", value="1"))  # fmt: skip
    apply_all(image, [*BASE, config, wrap(remove_topic=md.RemoveTopicRecord(topic_id="T1"))])
    assert image.topic("orders") is None and image.partition_count == 0
    assert image.config(TOPIC, "orders") == {}


@pytest.mark.parametrize(
    "bad",
    [
        topic("orders", "T2"),  # name already used
        partition("T9", 0, [1]),  # unknown topic
        change("T1", 5, leader=1),  # unknown partition
        wrap(fence_broker=md.FenceBrokerRecord(broker_id=1, broker_epoch=99)),  # stale epoch
        wrap(remove_access_control_entry=md.RemoveAccessControlEntryRecord(id="nope")),
    ],
)
def test_a_record_that_contradicts_the_image_is_refused_and_changes_nothing(
    bad: md.MetadataRecord,
) -> None:
    image = MetadataImage()
    apply_all(image, BASE)
    before = (image.digest(), image.applied_offset)
    with pytest.raises(InconsistentRecordError, match="offset 6"):
        image.apply(6, encode(bad))
    assert (image.digest(), image.applied_offset) == before


def test_records_a_replica_cannot_understand_stop_it_with_the_offset_named() -> None:
    newer = md.MetadataRecord(version=2, no_op=md.NoOpRecord())
    with pytest.raises(UnsupportedRecordVersion, match=r"offset 41.*version 2"):
        MetadataImage().apply(41, encode(newer))
    with pytest.raises(UnknownRecordType, match="offset 3"):
        decode(md.MetadataRecord(version=1).SerializeToString(), 3)
    with pytest.raises(MetadataRecordError, match="offset 4"):
        decode(b"\xff\xff\xff", 4)


def test_topic_ids_print_like_kafkas() -> None:
    tid = new_uuid(random.Random(1))
    assert len(tid) == 22 and "=" not in tid and tid == new_uuid(random.Random(1))


# --------------------------------------------------------- property tests


@st.composite
def histories(draw: st.DrawFn) -> list[md.MetadataRecord]:
    """Valid record sequences, built from a small model of what exists."""
    records = [register(b) for b in (1, 2, 3)]
    topics: dict[str, int] = {}
    acls: list[str] = []
    for step in range(draw(st.integers(5, 40))):
        kind = draw(st.sampled_from(["topic", "change", "remove", "config", "acl", "unacl",
                                     "fence", "feature", "pid"]))  # fmt: skip
        if kind == "topic" or not topics:
            tid = f"T{step:03d}"
            count = draw(st.integers(1, 4))
            records.append(topic(f"t{step}", tid))
            records += [partition(tid, p, [1 + (p % 3), 1 + ((p + 1) % 3)]) for p in range(count)]
            topics[tid] = count
        elif kind == "change":
            tid = draw(st.sampled_from(sorted(topics)))
            pid = draw(st.integers(0, topics[tid] - 1))
            leader = draw(st.one_of(st.none(), st.sampled_from([-1, 1, 2, 3])))
            isr = draw(st.one_of(st.none(), st.lists(st.sampled_from([1, 2, 3]), min_size=1,
                                                     max_size=3, unique=True)))  # fmt: skip
            records.append(change(tid, pid, leader, isr))
        elif kind == "remove":
            tid = draw(st.sampled_from(sorted(topics)))
            del topics[tid]
            records.append(wrap(remove_topic=md.RemoveTopicRecord(topic_id=tid)))
        elif kind == "config":
            value = draw(st.one_of(st.none(), st.sampled_from(["1", "2"])))
            record = md.ConfigRecord(resource_type=md.CONFIG_RESOURCE_BROKER, resource_name="1",
                                     name=draw(st.sampled_from(["a", "b"])))  # fmt: skip
            if value is not None:
                record.value = value
            records.append(wrap(config=record))
        elif kind == "acl":
            acl_id = f"A{step}"
            acls.append(acl_id)
            records.append(wrap(access_control_entry=md.AccessControlEntryRecord(
                id=acl_id, resource_type=2, resource_name="x", pattern_type=3,
                principal="User:a", host="*", operation=3, permission_type=3)))  # fmt: skip
        elif kind == "unacl" and acls:
            records.append(wrap(remove_access_control_entry=md.RemoveAccessControlEntryRecord(
                id=acls.pop())))  # fmt: skip
        elif kind == "fence":
            broker = draw(st.sampled_from([1, 2, 3]))
            records.append(wrap(fence_broker=md.FenceBrokerRecord(broker_id=broker,
                                                                  broker_epoch=1)))  # fmt: skip
        elif kind == "feature":
            level = draw(st.integers(0, 2))
            records.append(wrap(feature_level=md.FeatureLevelRecord(name="f", feature_level=level)))
        elif kind == "pid":
            records.append(wrap(producer_ids=md.ProducerIdsRecord(
                broker_id=1, broker_epoch=1, next_producer_id=1000 * (step + 1))))  # fmt: skip
    return records


@settings(max_examples=60, deadline=None, derandomize=True)
@given(histories(), st.data())
def test_a_snapshot_plus_the_tail_equals_the_whole_log(
    records: list[md.MetadataRecord], data: st.DataObject
) -> None:
    whole = MetadataImage()
    apply_all(whole, records)
    cut = data.draw(st.integers(0, len(records)))
    prefix = MetadataImage()
    apply_all(prefix, records[:cut])
    restored = MetadataImage()
    restored.load_snapshot(sorted(prefix.snapshot_records()), cut)
    apply_all(restored, records[cut:], start=cut)
    assert restored.digest() == whole.digest()
    assert sorted(restored.snapshot_records()) == sorted(whole.snapshot_records())


@settings(max_examples=60, deadline=None, derandomize=True)
@given(histories(), st.data())
def test_snapshots_taken_along_the_way_do_not_change_later_snapshots(
    records: list[md.MetadataRecord], data: st.DataObject
) -> None:
    """Snapshot records of partitions are memoised on their immutable states: a
    state replaced after a snapshot must be encoded afresh, never reused."""
    cuts = sorted(data.draw(st.lists(st.integers(0, len(records)), max_size=4)))
    busy, fresh = MetadataImage(), MetadataImage()
    done = 0
    for cut in [*cuts, len(records)]:
        apply_all(busy, records[done:cut], start=done)
        done = cut
        taken = list(busy.snapshot_records())
        partition_keys = [k for k, _ in taken if k.startswith(b"21/")]
        assert partition_keys == sorted(partition_keys)  # sorting them is one pass
    apply_all(fresh, records)
    assert sorted(busy.snapshot_records()) == sorted(fresh.snapshot_records())
    assert busy.digest() == fresh.digest()
    # Each partition's snapshot record says what the image holds now.
    for key, value in busy.snapshot_records():
        if key.startswith(b"21/"):
            r = decode(value, 0).partition
            state = busy.partition(r.topic_id, r.partition_id)
            assert state is not None
            assert (tuple(r.replicas), tuple(r.isr), r.leader, r.leader_epoch) == (
                state.replicas,
                state.isr,
                state.leader,
                state.leader_epoch,
            )
            assert r.partition_epoch == state.partition_epoch


@settings(max_examples=60, deadline=None, derandomize=True)
@given(histories(), st.data())
def test_changes_since_an_offset_bring_an_old_image_up_to_date(
    records: list[md.MetadataRecord], data: st.DataObject
) -> None:
    whole = MetadataImage()
    apply_all(whole, records)
    since = data.draw(st.integers(0, len(records)))
    old = MetadataImage()
    apply_all(old, records[:since])
    delta = whole.changes_since(since)
    assert delta is not None
    for record in delta:
        old.apply_record(record, old.applied_offset)
    assert old.digest() == whole.digest()


@settings(max_examples=60, deadline=None, derandomize=True)
@given(histories(), st.data())
def test_changes_forgotten_before_a_snapshot_still_bring_a_later_image_up_to_date(
    records: list[md.MetadataRecord], data: st.DataObject
) -> None:
    """After `forget_changes_before(cut)` (a snapshot covers what precedes `cut`),
    a reader older than `cut` is sent to the snapshot, and one at `cut` or later
    is still brought up to date, removals included."""
    whole = MetadataImage()
    apply_all(whole, records)
    cut = data.draw(st.integers(0, len(records)))
    since = data.draw(st.integers(cut, len(records)))
    whole.forget_changes_before(cut)
    if cut > 0:
        assert whole.changes_since(cut - 1) is None
    old = MetadataImage()
    apply_all(old, records[:since])
    delta = whole.changes_since(since)
    assert delta is not None
    for record in delta:
        old.apply_record(record, old.applied_offset)
    assert old.digest() == whole.digest()


def test_changes_since_before_the_snapshot_needs_the_snapshot() -> None:
    image = MetadataImage()
    image.load_snapshot([], 50)
    assert image.changes_since(10) is None
    assert image.changes_since(50) == []


def test_the_digest_catches_a_planted_divergence() -> None:
    a, b = MetadataImage(), MetadataImage()
    apply_all(a, BASE)
    apply_all(b, BASE)
    assert a.digest() == b.digest()
    part = b.partition("T1", 1)
    assert part is not None
    # A replica that silently dropped one ISR member.
    b.topics_by_id["T1"].partitions[1] = replace(part, isr=(2, 3))
    b._digest = None
    assert a.digest() != b.digest()


def test_auto_rebalance_moves_leadership_back_only_past_the_threshold() -> None:
    from quorum.controller.partition_ops import build_rebalance

    image = MetadataImage()
    records = [register(b) for b in (1, 2, 3)] + [topic("t", "T")]
    records += [partition("T", p, [1 + p % 3, 1 + (p + 1) % 3]) for p in range(9)]
    records += [change("T", 0, leader=2)]  # broker 1 preferred for 0, 3, 6: 1 of 3 moved
    apply_all(image, records)
    moves = build_rebalance(image)
    assert [(r.partition_change.partition_id, r.partition_change.leader) for r in moves] == [(0, 1)]
    off = wrap(
        config=md.ConfigRecord(
            resource_type=md.CONFIG_RESOURCE_CLUSTER,
            resource_name="",
            name="auto.leader.rebalance.enable",
            value="false",
        )
    )
    image.apply(image.applied_offset, encode(off))
    assert build_rebalance(image) == []


def test_partitions_in_one_state_share_it_and_snapshot_as_their_own_encoding() -> None:
    """A million partitions over a few brokers are in a few states: the image holds
    one object per state (partition_states.py), and each partition's snapshot
    record is still exactly its PartitionRecord's encoding (unknown fields, which
    this version does not model, are not kept)."""
    from quorum.controller.image_records import partition_record as _partition_record
    from quorum.controller.topic_ops import partition_records

    image = MetadataImage()
    apply_all(image, [register(1), register(2), register(3), topic("t", "T")])
    created = partition_records(image, "T", 0, [(1, 2, 3), (2, 3, 1), (1, 2, 3)])
    odd = encode(created[1]) + b"\xf8\x07\x01"  # field 127: unknown to this version
    for offset, raw in enumerate([encode(created[0]), odd, encode(created[2])], start=4):
        image.apply(offset, raw)
    topic_image = image.topics_by_id["T"]
    parts = topic_image.partitions
    assert parts[0] is parts[2] and parts[0] is not parts[1]
    values = dict(image.snapshot_records())
    for pid in range(3):
        expected = encode(_partition_record(topic_image, pid, parts[pid]))
        assert values[b"21/T/%010d" % pid] == expected
    assert values[b"21/T/%010d" % 1] == encode(created[1])


@settings(max_examples=40, deadline=None, derandomize=True)
@given(histories(), st.data())
def test_records_prepared_while_replicating_apply_exactly_as_decoded_ones(
    records: list[md.MetadataRecord], data: st.DataObject
) -> None:
    """The active controller prepares its writes' records before they commit;
    applying them must give the image a replica builds by decoding."""
    from quorum.controller.image_records import partition_record as _partition_record
    from quorum.controller.image_records import partition_value

    plain, prepared = MetadataImage(), MetadataImage()
    apply_all(plain, records)
    cut = data.draw(st.integers(0, len(records)))
    apply_all(prepared, records[:cut])
    tail = records[cut:]
    encoded = [encode(r) for r in tail]
    prepared.prepare(tail, encoded)
    for offset, raw in enumerate(encoded, start=cut):
        prepared.apply(offset, raw)
    assert prepared.digest() == plain.digest()
    assert sorted(prepared.snapshot_records()) == sorted(plain.snapshot_records())
    for topic_image in prepared.topics_by_id.values():
        for pid, state in topic_image.partitions.items():
            expected = encode(_partition_record(topic_image, pid, state))
            assert partition_value(topic_image, pid, state) == expected
    # A write that never commits leaves nothing behind once forgotten.
    prepared.prepare([topic("never", "TX")], [encode(topic("never", "TX"))])
    prepared.forget_prepared()
    assert prepared.topic("never") is None and not prepared._prepared
