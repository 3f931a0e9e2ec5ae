"""The replica manager's edge: every bad request gets Kafka's error and changes
nothing; long-polled fetches; list offsets; retention moving the log start."""

from __future__ import annotations

import asyncio
from pathlib import Path

from kio.schema.errors import ErrorCode
from partitions_cluster import Cluster, eventually, make_batch, run, with_codec

from broker_agent.partitions.api import FetchPartition
from broker_agent.partitions.compression import GZIP, LZ4, ZSTD
from broker_agent.partitions.partition_log import LogConfig

T = "events"


def test_bad_requests_get_kafkas_errors_and_append_nothing(tmp_path: Path) -> None:
    async def scenario(cluster: Cluster) -> None:
        cluster.create_topic(T, max_message_bytes="200")
        leader, follower = cluster.brokers[0], cluster.brokers[1]
        good = make_batch(b"ok")
        assert (await leader.append(T, 0, good, 1, 1_000)).error is ErrorCode.none
        cases = {
            ErrorCode.unknown_topic_or_partition: leader.append("nope", 0, good, 1, 1_000),
            ErrorCode.not_leader_or_follower: follower.append(T, 0, good, 1, 1_000),
            ErrorCode.message_too_large: leader.append(T, 0, make_batch(b"x" * 300), 1, 1_000),
            ErrorCode.corrupt_message: leader.append(T, 0, good[:-1] + b"\x00", 1, 1_000),
            ErrorCode.invalid_required_acks: leader.append(T, 0, good, 2, 1_000),
        }
        for code, call in cases.items():
            result = await call
            assert result.error is code, (code, result)
        truncated = await leader.append(T, 0, good[:30], 1, 1_000)
        assert truncated.error is ErrorCode.corrupt_message
        for codec in (5, 6, 7):  # no codec: refused before anything reads the records
            unknown = await leader.append(T, 0, with_codec(good, codec, corrupt=True), 1, 1_000)
            assert unknown.error is ErrorCode.corrupt_message, unknown
            assert f"compression codec {codec}" in (unknown.error_message or "")
        assert leader.log_end_offset(T, 0) == 1

    run(scenario, tmp_path, broker_ids=(0, 1, 2))


def test_leader_epochs_and_replica_membership_are_checked(tmp_path: Path) -> None:
    async def scenario(cluster: Cluster) -> None:
        cluster.create_topic(T, replicas=(0, 1))
        cluster.controller.change(T, 0, leader=1)
        cluster.controller.change(T, 0, leader=0)  # leader epoch 2 on broker 0
        leader = cluster.brokers[0]

        async def fetch(replica_id: int, epoch: int) -> ErrorCode:
            results = await leader.fetch(
                replica_id, 0, 1, 1 << 20, [FetchPartition(T, 0, 0, epoch)]
            )
            return results[0].error

        assert await fetch(-1, 1) is ErrorCode.fenced_leader_epoch
        assert await fetch(-1, 3) is ErrorCode.unknown_leader_epoch
        assert await fetch(-1, 2) is ErrorCode.none
        assert await fetch(2, 2) is ErrorCode.not_leader_or_follower  # not a replica
        assert leader.list_offsets(T, 0, -1, 1).error is ErrorCode.fenced_leader_epoch
        answer = leader.offsets_for_leader_epoch(T, 0, 3, 0)
        assert answer.error is ErrorCode.unknown_leader_epoch

    run(scenario, tmp_path, broker_ids=(0, 1, 2))


def test_a_long_polled_consumer_fetch_is_woken_by_the_hw(tmp_path: Path) -> None:
    async def scenario(cluster: Cluster) -> None:
        cluster.create_topic(T, replicas=(0,))
        leader = cluster.brokers[0]
        waiting = asyncio.ensure_future(
            leader.fetch(-1, 30_000, 1, 1 << 20, [FetchPartition(T, 0, 0)])
        )
        await asyncio.sleep(0.05)
        assert not waiting.done()
        await leader.append(T, 0, make_batch(b"wake"), 1, 1_000)
        results = await asyncio.wait_for(waiting, 5)
        assert b"wake" in results[0].records and results[0].high_watermark == 1

    run(scenario, tmp_path, broker_ids=(0,))


def test_a_long_polled_fetch_waits_on_the_partitions_it_asked_for(tmp_path: Path) -> None:
    """A parked fetch is woken by an append to any partition it asked for (it waits
    on those only, not on every partition the broker hosts), and one that asks for
    nothing hosted here waits out its max wait instead of failing."""

    async def scenario(cluster: Cluster) -> None:
        cluster.create_topic(T, replicas=(0,))
        cluster.create_topic("other", replicas=(0,))
        leader = cluster.brokers[0]
        wanted = [FetchPartition(T, 0, 0), FetchPartition("other", 0, 0)]
        waiting = asyncio.ensure_future(leader.fetch(-1, 30_000, 1, 1 << 20, wanted))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        await leader.append("other", 0, make_batch(b"second"), 1, 1_000)
        results = await asyncio.wait_for(waiting, 5)
        assert [bool(r.records) for r in results] == [False, True]
        started = asyncio.get_running_loop().time()
        assert await leader.fetch(-1, 100, 1, 1 << 20, []) == []
        assert asyncio.get_running_loop().time() - started >= 0.09

    run(scenario, tmp_path, broker_ids=(0,))


def test_list_offsets_earliest_latest_and_by_time(tmp_path: Path) -> None:
    async def scenario(cluster: Cluster) -> None:
        cluster.create_topic(T, replicas=(0,))
        leader = cluster.brokers[0]
        for i in range(3):
            batch = make_batch(b"a", b"b", timestamp_ms=1_700_000_000_000 + i * 1000)
            await leader.append(T, 0, batch, 1, 1_000)
        assert leader.list_offsets(T, 0, -2, -1)[:2] == (ErrorCode.none, 0)
        assert leader.list_offsets(T, 0, -1, -1)[:2] == (ErrorCode.none, 6)
        assert leader.list_offsets(T, 0, 1_700_000_000_500, -1)[:2] == (ErrorCode.none, 2)
        assert leader.list_offsets(T, 0, 1_800_000_000_000, -1).offset == -1

    run(scenario, tmp_path, broker_ids=(0,))


def test_list_offsets_by_time_and_max_timestamp_answer_the_record(tmp_path: Path) -> None:
    """Kafka answers the record, not its batch: the first one at or after the time
    asked, and for -3 (MAX_TIMESTAMP) the first one carrying the largest timestamp,
    each with its own timestamp, inside compressed batches too; a batch the broker
    cannot read is answered with its base offset. Only offsets below the HW are
    told to consumers; a tool (DEBUGGING_REPLICA_ID) is told up to the LEO."""
    t = 1_700_000_000_000

    async def scenario(cluster: Cluster) -> None:
        cluster.create_topic(T, replicas=(0,))
        leader = cluster.brokers[0]
        assert leader.list_offsets(T, 0, -3, -1) == (ErrorCode.none, -1, -1, -1)  # empty
        stored = [
            make_batch(b"a", b"b", b"c", timestamps_ms=[t, t + 30, t + 10]),  # 0-2
            with_codec(make_batch(b"d", b"e", timestamps_ms=[t + 20, t + 50]), GZIP),  # 3-4
            with_codec(make_batch(b"f", b"g", timestamps_ms=[t + 40, t + 60]), LZ4),  # 5-6
            make_batch(b"h", b"i", timestamps_ms=[t + 60, t + 5]),  # 7-8
        ]
        for batch in stored:
            assert (await leader.append(T, 0, batch, 1, 1_000)).error == ErrorCode.none
        at = leader.list_offsets
        assert at(T, 0, t + 5, -1) == (ErrorCode.none, 1, t + 30, 0)  # not 0: batch max t+30
        assert at(T, 0, t + 30, -1)[1:3] == (1, t + 30)
        assert at(T, 0, t + 31, -1)[1:3] == (4, t + 50)  # inside the gzip batch
        assert at(T, 0, t + 55, -1)[1:3] == (6, t + 60)  # inside the lz4 batch
        assert at(T, 0, t + 61, -1) == (ErrorCode.none, -1, -1, -1)
        # t+60 twice (offset 6, in the lz4 batch, and 7): the first.
        assert at(T, 0, -3, -1) == (ErrorCode.none, 6, t + 60, 0)
        unreadable = with_codec(make_batch(b"j", b"k", timestamps_ms=[t + 70, t + 80]), ZSTD, True)
        assert (await leader.append(T, 0, unreadable, 1, 1_000)).error == ErrorCode.none  # 9-10
        assert at(T, 0, t + 75, -1)[1:3] == (9, t + 80)  # its base offset, its max time
        assert at(T, 0, -3, -1) == (ErrorCode.none, 9, t + 80, 0)

    run(scenario, tmp_path, broker_ids=(0,))

    async def above_the_hw(cluster: Cluster) -> None:
        cluster.create_topic(T, replicas=(0, 1))  # broker 1 never fetches: the HW stays 0
        leader = cluster.brokers[0]
        batches = [make_batch(b"x", b"y", timestamps_ms=[t + 70, t + 80]),
                   make_batch(b"z", timestamps_ms=[t + 90])]  # fmt: skip
        for batch in batches:
            assert (await leader.append(T, 0, batch, 1, 1_000)).error == ErrorCode.none
        for timestamp in (-3, t + 75):
            assert leader.list_offsets(T, 0, timestamp, -1) == (ErrorCode.none, -1, -1, -1)
        assert leader.replica_offsets(T, 0, -3, -1) == (ErrorCode.none, 2, t + 90, 0)
        assert leader.replica_offsets(T, 0, t + 75, -1) == (ErrorCode.none, 1, t + 80, 0)

    run(above_the_hw, tmp_path / "hw", broker_ids=(0,))


def test_retention_moves_the_log_start_on_leader_and_followers(tmp_path: Path) -> None:
    async def scenario(cluster: Cluster) -> None:
        cluster.create_topic(T, replicas=(0, 1), retention_bytes="1000", segment_bytes="9000")
        leader = cluster.brokers[0]
        for store in (b.partition_state(T, 0) for b in cluster.brokers.values()):
            assert store is not None
            store.log.store.segment_bytes = 400  # below the key's minimum: small segments
        for i in range(20):
            await leader.append(T, 0, make_batch(b"v" * 50, b"%d" % i), -1, 5_000)
        await eventually(lambda: cluster.brokers[1].high_watermark(T, 0) == 40, "replicated")
        leader.tick()
        plog = leader.partition_state(T, 0).log  # type: ignore[union-attr]
        start = plog.log_start_offset
        assert start > 0
        # Kafka's rule: at least retention.bytes stay; one segment fewer would be less.
        sizes = [s.size_bytes for s in plog.store.segments]
        assert sum(sizes) >= 1000 > sum(sizes) - sizes[0]
        results = await leader.fetch(-1, 0, 1, 1 << 20, [FetchPartition(T, 0, 0)])
        assert results[0].error is ErrorCode.offset_out_of_range
        assert results[0].log_start_offset == start
        await leader.append(T, 0, make_batch(b"more"), -1, 5_000)
        follower = cluster.brokers[1].partition_state(T, 0)
        assert follower is not None
        await eventually(lambda: follower.log.log_start_offset == start, "follower's log start")

    run(scenario, tmp_path, broker_ids=(0, 1), log_config=LogConfig())


def test_acks_all_past_its_timeout_is_request_timed_out_and_the_batch_stays(
    tmp_path: Path,
) -> None:
    """Produce's timeout_ms bounds the acks=all wait (Kafka's REQUEST_TIMED_OUT); the
    batch was appended and stays: once the follower fetches it is committed, and a
    consumer reads it, as in Kafka (the producer, retrying, may then store it twice
    unless it is idempotent)."""

    async def scenario(cluster: Cluster) -> None:
        cluster.create_topic(T, replicas=(0, 1))  # broker 1 not started: the HW stays
        leader = cluster.brokers[0]
        loop = asyncio.get_running_loop()
        started = loop.time()
        result = await leader.append(T, 0, make_batch(b"late"), -1, 300)
        assert (result.error, result.base_offset) == (ErrorCode.request_timed_out, 0)
        assert loop.time() - started >= 0.3
        assert leader.high_watermark(T, 0) == 0 and await cluster.consume(0, T) == b""
        await cluster.start_broker(1)
        await eventually(lambda: leader.high_watermark(T, 0) == 1, "the follower's fetch")
        assert await cluster.consume(0, T) != b""

    run(scenario, tmp_path, broker_ids=(0,))


def test_retention_ms_drops_segments_whose_records_are_older_on_leader_and_followers(
    tmp_path: Path,
) -> None:
    """Kafka's retention.ms by the records' own (max) timestamps: whole segments
    below the HW whose newest record is older than retention.ms go, never the
    active one; the followers take the leader's new log start from its answers."""

    async def scenario(cluster: Cluster) -> None:
        cluster.create_topic(T, replicas=(0, 1), retention_ms="60000", segment_bytes="9000")
        leader = cluster.brokers[0]
        for store in (b.partition_state(T, 0) for b in cluster.brokers.values()):
            assert store is not None
            store.log.store.segment_bytes = 400  # below the key's minimum: small segments
        now = cluster.clock.now_ms
        old = [make_batch(b"v" * 150, timestamp_ms=now - 120_000 + i) for i in range(6)]
        new = [make_batch(b"v" * 150, timestamp_ms=now - 1_000 + i) for i in range(6)]
        for batch in old + new:
            assert (await leader.append(T, 0, batch, -1, 5_000)).error == ErrorCode.none
        leader.tick()
        plog = leader.partition_state(T, 0).log  # type: ignore[union-attr]
        start = plog.log_start_offset
        assert 0 < start <= 6  # old segments gone; none holding a newer record
        assert plog.store.segments[0].base_offset == start
        assert leader.list_offsets(T, 0, -2, -1).offset == start
        assert leader.list_offsets(T, 0, now - 1_000, -1).offset == 6  # the new ones stay
        await leader.append(T, 0, make_batch(b"more"), -1, 5_000)
        follower = cluster.brokers[1].partition_state(T, 0)
        assert follower is not None
        await eventually(lambda: follower.log.log_start_offset == start, "follower's log start")

    run(scenario, tmp_path, broker_ids=(0, 1), log_config=LogConfig())
