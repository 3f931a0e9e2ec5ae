"""A broker's view of its replicas kept current from the image's change log
(`BrokerView`) equals the view read from the whole image, after any history of
records, snapshot loads included; and what it reports changed covers every
replica whose assignment or topic configs changed."""

from __future__ import annotations

from collections.abc import Mapping

from hypothesis import given, settings
from hypothesis import strategies as st

from broker_agent.partitions.assignments import BrokerView, Key, PartitionAssignment
from quorum.controller.metadata_image import MetadataImage
from quorum.controller.record_codec import encode, wrap
from quorum.gen import metadata_pb2 as md

ME = 1
BROKERS = (1, 2, 3)
UPDATE = "update"  # a step of a history: the broker looks at the image
RELOAD = "reload"  # a step: another image, loaded from a snapshot of this one
RESET = "reset"  # a step: this image loads a snapshot of itself

Step = md.MetadataRecord | str
# Weighted: mostly records and looks, now and then a snapshot load.
KINDS = [
    *["topic", "config", UPDATE] * 3,
    *["move", "leader"] * 2,
    "remove",
    "noise",
    RELOAD,
    RESET,
]


def whole_view(image: MetadataImage) -> tuple[dict[Key, PartitionAssignment], dict[str, dict]]:
    """The view read from every topic of the image (what each apply did before)."""
    parts: dict[Key, PartitionAssignment] = {}
    configs: dict[str, dict[str, str]] = {}
    for topic in image.topics_by_id.values():
        for pid, s in topic.partitions.items():
            if ME in s.replicas:
                parts[(topic.name, pid)] = PartitionAssignment(
                    topic.name, topic.topic_id, pid, tuple(s.replicas), tuple(s.isr),
                    s.leader, s.leader_epoch, s.partition_epoch,
                )  # fmt: skip
                configs[topic.name] = dict(image.config(md.CONFIG_RESOURCE_TOPIC, topic.name))
    return parts, configs


def plain(configs: Mapping[str, Mapping[str, str]]) -> dict[str, dict[str, str]]:
    return {name: dict(entries) for name, entries in configs.items()}


@st.composite
def histories(draw: st.DrawFn) -> list[Step]:
    """Valid records, with the broker's looks and snapshot loads in between."""
    steps: list[Step] = [
        wrap(register_broker=md.RegisterBrokerRecord(broker_id=b, incarnation_id=f"i{b}"))
        for b in BROKERS
    ]
    topics: dict[str, tuple[str, int]] = {}  # topic id -> name, partitions
    names = ["a", "b", "c"]
    for step in range(draw(st.integers(3, 60))):
        kind = draw(st.sampled_from(KINDS))
        free = [n for n in names if n not in {t[0] for t in topics.values()}]
        if kind == "topic" and free:
            tid, name = f"T{step:03d}", draw(st.sampled_from(free))
            count = draw(st.integers(1, 3))
            steps.append(wrap(topic=md.TopicRecord(name=name, topic_id=tid)))
            for p in range(count):
                replicas = draw(st.lists(st.sampled_from(BROKERS), min_size=1, max_size=3,
                                         unique=True))  # fmt: skip
                steps.append(wrap(partition=md.PartitionRecord(
                    topic_id=tid, partition_id=p, replicas=replicas, isr=replicas,
                    leader=replicas[0])))  # fmt: skip
            topics[tid] = (name, count)
        elif kind in ("move", "leader") and topics:
            tid = draw(st.sampled_from(sorted(topics)))
            change = md.PartitionChangeRecord(
                topic_id=tid, partition_id=draw(st.integers(0, topics[tid][1] - 1))
            )
            if kind == "move":  # a reassignment: replicas on or off this broker
                replicas = draw(st.lists(st.sampled_from(BROKERS), min_size=1, max_size=3,
                                         unique=True))  # fmt: skip
                change.replicas.ids.extend(replicas)
                change.isr.ids.extend(replicas)
                change.leader = replicas[0]
            else:
                change.leader = draw(st.sampled_from([-1, *BROKERS]))
            steps.append(wrap(partition_change=change))
        elif kind == "config":
            name = draw(st.sampled_from(names))  # of a topic or not (yet)
            key = draw(st.sampled_from(["retention.ms", "segment.ms"]))
            record = md.ConfigRecord(
                resource_type=md.CONFIG_RESOURCE_TOPIC, resource_name=name, name=key
            )
            value = draw(st.one_of(st.none(), st.sampled_from(["1000", "2000"])))
            if value is not None:
                record.value = value
            steps.append(wrap(config=record))
        elif kind == "remove" and topics:
            tid = draw(st.sampled_from(sorted(topics)))
            del topics[tid]
            steps.append(wrap(remove_topic=md.RemoveTopicRecord(topic_id=tid)))
        elif kind == "noise":  # records that change no replica
            steps.append(wrap(fence_broker=md.FenceBrokerRecord(broker_id=2)))
        elif kind in (UPDATE, RELOAD, RESET):
            steps.append(kind)
    return [*steps, UPDATE]


@settings(max_examples=100, deadline=None, derandomize=True)
@given(histories())
def test_the_view_kept_from_changes_equals_the_whole_image(steps: list[Step]) -> None:
    image = MetadataImage()
    view = BrokerView(ME)
    seen_parts: dict[Key, PartitionAssignment] = {}
    seen_configs: dict[str, dict[str, str]] = {}
    for step in steps:
        if step == RELOAD:
            reloaded = MetadataImage()
            reloaded.load_snapshot(sorted(image.snapshot_records()), image.applied_offset)
            image = reloaded
        elif step == RESET:
            image.load_snapshot(sorted(image.snapshot_records()), image.applied_offset)
        elif step == UPDATE:
            changed = view.update(image)
            parts, configs = whole_view(image)
            assert view.partitions == parts
            assert plain(view.topic_configs) == configs
            if changed is not None:
                moved = {k for k in parts.keys() | seen_parts.keys()
                         if parts.get(k) != seen_parts.get(k)}  # fmt: skip
                reconfigured = {k for k in parts if configs[k[0]] != seen_configs.get(k[0])}
                assert moved | reconfigured <= changed
            seen_parts, seen_configs = parts, configs
        else:
            assert not isinstance(step, str)
            image.apply(image.applied_offset, encode(step))


def test_nothing_is_reported_changed_by_records_about_no_replica() -> None:
    image = MetadataImage()
    for offset, record in enumerate(
        [
            wrap(topic=md.TopicRecord(name="orders", topic_id="T1")),
            wrap(
                partition=md.PartitionRecord(
                    topic_id="T1", partition_id=0, replicas=[ME], isr=[ME], leader=ME
                )
            ),
        ]
    ):
        image.apply(offset, encode(record))
    view = BrokerView(ME)
    assert view.update(image) is None  # the first look reads the whole image
    image.apply(2, encode(wrap(register_broker=md.RegisterBrokerRecord(broker_id=2))))
    assert view.update(image) == set()
    image.apply(3, encode(wrap(config=md.ConfigRecord(
        resource_type=md.CONFIG_RESOURCE_TOPIC, resource_name="orders", name="retention.ms",
        value="1000"))))  # fmt: skip
    assert view.update(image) == {("orders", 0)}
    assert view.topic_configs["orders"] == {"retention.ms": "1000"}
