"""A partition's snapshot record built from its shared state's encoded fields
(`image_records.partition_value`) is byte for byte what encoding its
PartitionRecord gives, and a snapshot loader that reads such records without
decoding them (`PartitionValues`) ends with the image that decoding gives, also
when a record is in any other form."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quorum.controller.image_entities import PartitionState, TopicImage
from quorum.controller.image_records import (
    PartitionRecords,
    PartitionValues,
    partition_key,
    partition_record,
    partition_value,
    topic_key,
    topic_record,
)
from quorum.controller.metadata_image import MetadataImage
from quorum.controller.partition_states import PartitionStates
from quorum.controller.record_codec import MetadataRecordError, decode, encode, wrap
from quorum.gen import metadata_pb2 as md

ids = st.lists(st.integers(0, 2**31 - 1), max_size=5).map(tuple)
states = st.builds(
    PartitionState,
    ids,
    ids,
    st.integers(-1, 2**31 - 1),
    st.integers(0, 2**31 - 1),
    st.integers(0, 2**31 - 1),
    ids,
    ids,
)
topic_ids = st.text(min_size=1, max_size=40).filter(lambda t: "/" not in t)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(states, st.integers(0, 2**31 - 1), topic_ids)
def test_a_value_is_the_records_encoding_and_splits_back(
    state: PartitionState, pid: int, topic_id: str
) -> None:
    topic = TopicImage("t", topic_id)
    value = partition_value(topic, pid, state)
    assert value == encode(partition_record(topic, pid, state))
    split = PartitionValues().split(partition_key(topic_id, pid), value)
    assert split is not None
    assert split[:2] == (topic_id, pid)
    assert PartitionStates().of_fields(split[2]) == state


def test_records_in_another_form_are_decoded_with_the_same_outcome() -> None:
    topic = TopicImage("t", "T")
    plain = partition_record(topic, 0, PartitionState((1, 2), (1, 2), 1, 0, 0))
    extra = encode(plain) + b"\xf8\x07\x01"  # an unknown field after the record
    moved = partition_record(topic, 1, PartitionState((2,), (2,), 2, 3, 4))
    # The same fields, but a second topic id in the tail (protobuf's last one wins).
    inner = md.PartitionRecord(partition_id=2, topic_id="T", leader=1).SerializeToString()
    inner += md.PartitionRecord(topic_id="U").SerializeToString()
    twice = encode(wrap()) + b"\xaa\x01" + bytes((len(inner),)) + inner
    # Fields out of number order (another writer): the topic id before the partition's.
    swapped = md.PartitionRecord(topic_id="T", leader=2).SerializeToString()
    swapped += md.PartitionRecord(partition_id=3).SerializeToString()
    older = encode(wrap()) + b"\xaa\x01" + bytes((len(swapped),)) + swapped
    other = TopicImage("u", "U")
    records = [
        (topic_key("T"), encode(topic_record(topic))),
        (topic_key("U"), encode(topic_record(other))),
        (partition_key("T", 0), extra),
        (partition_key("T", 1), encode(moved)),
        (partition_key("T", 2), twice),
        (partition_key("T", 3), older),
    ]
    values = PartitionValues()
    assert values.split(partition_key("T", 0), extra) is None
    assert values.split(partition_key("T", 1), encode(moved)) is not None
    fields = values.split(partition_key("T", 2), twice)
    assert fields is not None and PartitionStates().of_fields(fields[2]) is None
    assert values.split(partition_key("T", 3), older) is None

    loaded = MetadataImage()
    loaded.load_snapshot(records, 10)
    decoded, applied = MetadataImage(), MetadataImage()
    for offset, (_, value) in enumerate(records):
        decoded.apply_record(decode(value, offset), offset)
        applied.apply(offset, value)  # as a committed record: `PartitionRecords`
    assert partitions_of(loaded) == partitions_of(decoded) == partitions_of(applied)
    assert 2 in loaded.topics_by_id["U"].partitions  # the later topic id won
    assert loaded.partition_count == decoded.partition_count == applied.partition_count == 4
    assert applied.digest() == decoded.digest()


def partitions_of(image: MetadataImage) -> dict[str, dict[int, PartitionState]]:
    return {t: dict(i.partitions) for t, i in image.topics_by_id.items()}


@settings(max_examples=300, deadline=None, derandomize=True)
@given(states, st.integers(0, 2**31 - 1), topic_ids, st.data())
def test_a_committed_partition_record_read_undecoded_is_what_decoding_reads(
    state: PartitionState, pid: int, topic_id: str, data: st.DataObject
) -> None:
    """`PartitionRecords.split` (a follower's apply) agrees with the decoder on
    every record this version writes, and on any damage to one: it reads what
    decoding reads, or leaves the record to the decoder (None)."""
    value = encode(partition_record(TopicImage("t", topic_id), pid, state))
    split = PartitionRecords(PartitionStates()).split(value)
    if len(topic_id.encode()) < 0x80:
        assert split == (topic_id, pid, state)
    at = data.draw(st.integers(0, len(value) - 1))
    damaged = data.draw(
        st.sampled_from(
            [
                value[:at],
                value[:at] + bytes((value[at] ^ data.draw(st.integers(1, 255)),)) + value[at + 1 :],
                value + data.draw(st.binary(min_size=1, max_size=4)),
            ]
        )
    )
    split = PartitionRecords(PartitionStates()).split(damaged)
    if split is not None:  # else the decoder reads it, or refuses it
        r = decode(damaged, 0).partition
        assert split == (r.topic_id, r.partition_id, PartitionStates().of_record(r))


def test_a_topic_id_longer_than_its_record_is_left_to_the_decoder() -> None:
    inner = md.PartitionRecord(partition_id=1, topic_id="T").SerializeToString()
    overrun = inner[:-2] + bytes((9,)) + inner[-1:]  # the topic id's length: 9, one byte left
    value = encode(wrap()) + b"\xaa\x01" + bytes((len(overrun),)) + overrun
    assert PartitionRecords(PartitionStates()).split(value) is None
    with pytest.raises(MetadataRecordError):
        decode(value, 0)


def test_a_follower_applies_partition_records_as_the_decoder_does() -> None:
    """Applied as committed records (undecoded where they are this version's
    own) the image is the one decoding every record gives: same digest."""
    rng = __import__("random").Random(3)
    records = [wrap(topic=md.TopicRecord(name="a", topic_id="A")),
               wrap(topic=md.TopicRecord(name="b", topic_id="B"))]  # fmt: skip
    for pid in range(300):
        replicas = rng.sample(range(1, 6), 3)
        records.append(wrap(partition=md.PartitionRecord(
            partition_id=pid, topic_id=rng.choice("AB"), replicas=replicas,
            isr=replicas[: rng.randint(1, 3)], leader=replicas[0],
            leader_epoch=rng.randint(0, 3))))  # fmt: skip
    fast, slow = MetadataImage(), MetadataImage()
    for offset, record in enumerate(records):
        fast.apply(offset, encode(record))
        slow.apply_record(decode(encode(record), offset), offset)
    assert fast.digest() == slow.digest()
    assert fast.changes_since(0) == slow.changes_since(0)


def test_an_images_snapshot_records_come_in_key_order() -> None:
    """What the snapshot writer checksums as it streams, with no sort."""
    import base64
    import random

    rng = random.Random(7)
    image = MetadataImage()
    records = [wrap(register_broker=md.RegisterBrokerRecord(broker_id=b, incarnation_id="i"))
               for b in (3, 1, 2)]  # fmt: skip
    for t in range(30):
        topic_id = base64.urlsafe_b64encode(rng.randbytes(16)).rstrip(b"=").decode()
        records.append(wrap(topic=md.TopicRecord(name=f"t{t}", topic_id=topic_id)))
        records += [wrap(partition=md.PartitionRecord(partition_id=p, topic_id=topic_id,
                                                      replicas=[1], isr=[1], leader=1))
                    for p in (5, 0, 11)]  # fmt: skip
        records.append(wrap(config=md.ConfigRecord(resource_type=md.CONFIG_RESOURCE_TOPIC,
                                                   resource_name=f"t{30 - t}", name="retention.ms",
                                                   value="1")))  # fmt: skip
    for offset, record in enumerate(records):
        image.apply(offset, encode(record))
    keys = [key for key, _ in image.snapshot_records()]
    assert keys == sorted(set(keys))
