"""The coordinator's driver over a real replica manager (real partition logs in a
temporary directory, RF 1, no other broker): `__consumer_offsets` created through
the TopicCreator seam on the first FindCoordinator, COORDINATOR_LOAD_IN_PROGRESS
until a partition it now leads is loaded, groups and offsets written with
acks=all and replayed from the log by a fresh coordinator, parked joins answered
NOT_COORDINATOR when leadership goes, and concurrent commits coalesced."""

from __future__ import annotations

import asyncio
from pathlib import Path

from kio.records.readers import read_batch
from kio.schema.errors import ErrorCode

from broker_agent.groups.coordinator import GroupCoordinator, OffsetsTopicConfig, encode_batch
from broker_agent.groups.group import GroupConfig
from broker_agent.groups.placement import OFFSETS_TOPIC, partition_for
from broker_agent.groups.state import GroupState
from broker_agent.partitions.record_batch import split_batches
from broker_agent.partitions.replica_config import ReplicaConfig
from broker_agent.partitions.replica_manager import ReplicaManager
from quorum.controller.metadata_image import MetadataImage
from quorum.gen import metadata_pb2 as md

BROKER = 1
PARTITIONS = 3
TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAw"
DATA_ID = "AAAAAAAAAAAAAAAAAAAABA"


class Metadata:
    """A metadata image this test writes records into, as the controller would."""

    def __init__(self) -> None:
        self.image = MetadataImage()
        self.offset = 0
        self.created: list[tuple[str, int, int, dict[str, str]]] = []
        self.apply(
            md.MetadataRecord(
                register_broker=md.RegisterBrokerRecord(
                    broker_id=BROKER,
                    broker_epoch=1,
                    incarnation_id="i",
                    endpoints=[
                        md.BrokerEndpoint(
                            name="PLAINTEXT", host="h", port=9092, security_protocol="PLAINTEXT"
                        )
                    ],
                )
            )
        )
        self.apply(
            md.MetadataRecord(
                unfence_broker=md.UnfenceBrokerRecord(broker_id=BROKER, broker_epoch=1)
            )
        )
        self.apply(md.MetadataRecord(topic=md.TopicRecord(name="orders", topic_id=DATA_ID)))
        self.apply(
            md.MetadataRecord(
                partition=md.PartitionRecord(
                    partition_id=0,
                    topic_id=DATA_ID,
                    replicas=[BROKER],
                    isr=[BROKER],
                    leader=BROKER,
                    leader_epoch=0,
                    partition_epoch=0,
                )
            )
        )

    def apply(self, record: md.MetadataRecord) -> None:
        self.image.apply_record(record, self.offset)
        self.offset += 1

    async def create_topic(
        self, name: str, partitions: int, rf: int, configs: dict[str, str]
    ) -> None:
        self.created.append((name, partitions, rf, configs))
        self.apply(md.MetadataRecord(topic=md.TopicRecord(name=name, topic_id=TOPIC_ID)))
        for p in range(partitions):
            self.set_leader(p, BROKER, 0)

    def set_leader(self, partition: int, leader: int, epoch: int) -> None:
        self.apply(
            md.MetadataRecord(
                partition=md.PartitionRecord(
                    partition_id=partition,
                    topic_id=TOPIC_ID,
                    replicas=[BROKER],
                    isr=[BROKER],
                    leader=leader,
                    leader_epoch=epoch,
                    partition_epoch=epoch,
                )
            )
        )


def coordinator(meta: Metadata, replicas: ReplicaManager) -> GroupCoordinator:
    return GroupCoordinator(
        BROKER,
        replicas,
        lambda: meta.image,
        meta.create_topic,
        OffsetsTopicConfig(num_partitions=PARTITIONS, replication_factor=3),
        GroupConfig(initial_rebalance_delay_ms=0),
    )


async def until(check: object, what: str) -> None:
    for _ in range(200):
        if callable(check) and check():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"timed out: {what}")


def test_create_load_write_replay_and_unload(tmp_path: Path) -> None:
    async def go() -> None:
        meta = Metadata()
        replicas = ReplicaManager(BROKER, tmp_path, ReplicaConfig(tick_interval_ms=None))
        coord = coordinator(meta, replicas)
        group = "orders-group"
        partition = partition_for(group, PARTITIONS)

        # The first FindCoordinator creates the topic (RF capped at the one live broker).
        assert coord.find(group) == (ErrorCode.coordinator_not_available, -1)
        await until(lambda: meta.created, "the topic created")
        assert meta.created == [
            (
                OFFSETS_TOPIC,
                PARTITIONS,
                1,
                {
                    "cleanup.policy": "compact",
                    "compression.type": "producer",
                    "segment.bytes": str(100 * 1024 * 1024),
                },
            )
        ]
        replicas.on_metadata(meta.image)
        assert coord.check(group) is ErrorCode.not_coordinator  # not polled yet
        coord.poll_leadership()
        assert coord.check(group) is ErrorCode.coordinator_load_in_progress
        assert coord.find(group) == (ErrorCode.coordinator_not_available, -1)
        await until(lambda: coord.check(group) is ErrorCode.none, "loaded")
        assert coord.find(group) == (ErrorCode.none, BROKER)

        # A member joins (MEMBER_ID_REQUIRED, then for real), syncs, commits.
        args = ("client", "/h", 10_000, 30_000, "consumer", [("range", b"m")], True)
        first = await coord.join(group, "", None, *args)
        assert first.error is ErrorCode.member_id_required
        joined = await coord.join(group, first.member_id, None, *args)
        assert joined.error is ErrorCode.none and joined.leader == first.member_id
        synced = await coord.sync(
            group, first.member_id, None, joined.generation, None, None, {first.member_id: b"share"}
        )
        assert (synced.error, synced.assignment) == (ErrorCode.none, b"share")
        commits = [
            coord.commit(
                group,
                first.member_id,
                None,
                joined.generation,
                [("orders", 0, offset, 0, f"m{offset}")],
            )
            for offset in range(1, 21)
        ]
        results = await asyncio.gather(*commits)
        assert all(r == {("orders", 0): ErrorCode.none} for r in results)
        part = replicas.partition_state(OFFSETS_TOPIC, partition)
        assert part is not None
        # 20 concurrent commits (+ the group record) took fewer batches than records.
        batches = list(part.log.batch_headers())
        assert sum(h.offset_count for h in batches) == 21 and len(batches) < 21
        error, offsets = coord.fetch_offsets(group, [("orders", 0)])
        entry = offsets[("orders", 0)]
        assert error is ErrorCode.none and entry is not None and entry.offset == 20

        # A fresh coordinator (a restarted broker) replays the log: same group, offsets.
        again = coordinator(meta, replicas)
        again.poll_leadership()
        await until(lambda: again.check(group) is ErrorCode.none, "reloaded")
        error, loaded = again.group(group)
        assert loaded is not None and loaded.state is GroupState.STABLE
        assert loaded.generation == joined.generation and loaded.leader == first.member_id
        assert loaded.members[first.member_id].assignment == b"share"
        _, offsets = again.fetch_offsets(group, None)
        assert offsets[("orders", 0)] is not None and offsets[("orders", 0)].metadata == "m20"  # type: ignore[union-attr]

        # Leadership moves away while a join is parked: it is answered NOT_COORDINATOR.
        second = await again.join(group, "", None, *args)
        parked = asyncio.ensure_future(again.join(group, second.member_id, None, *args))
        await asyncio.sleep(0.05)
        assert not parked.done()
        meta.set_leader(partition, 2, 1)
        replicas.on_metadata(meta.image)
        again.poll_leadership()
        answer = await asyncio.wait_for(parked, 5)
        assert answer.error is ErrorCode.not_coordinator
        assert again.check(group) is ErrorCode.not_coordinator
        assert group not in again.machine.groups
        await coord.stop()
        await again.stop()
        await replicas.close()

    asyncio.run(go())


def test_encoded_batch_is_a_valid_magic_2_batch() -> None:
    """The coordinator writes its records directly (not through kio's writer): the
    batch passes the data plane's checks (framing, CRC-32C) and reads back, record by
    record, as kio reads any batch, tombstones included."""
    records = (
        (b"k1", b"v" * 300),
        (b"", b""),
        (b"gone", None),
        *((b"key%d" % i, b"x" * i) for i in range(200)),
    )
    data = encode_batch(records, 1_764_100_000_123)
    [(header, batch)] = split_batches(data)
    assert (header.records_count, header.last_offset_delta) == (len(records), len(records) - 1)
    assert header.max_timestamp == 1_764_100_000_123 and header.producer_id == -1
    parsed, _ = read_batch(batch, 0)
    assert [(r.key, r.value) for r in parsed.records] == list(records)
    assert [r.offset for r in parsed.records] == list(range(len(records)))
