"""Compaction on replica managers with real logs: the leader and its followers
clean independently, consumers read across the gaps, and a follower that joins
after the leader cleaned copies the compacted log without truncating anything."""

from __future__ import annotations

import asyncio
from pathlib import Path

from cleaner_helpers import KEYS, Stored, T, latest_per_key, make_batch, produce_updates, records_in
from kio.schema.errors import ErrorCode
from partitions_cluster import Cluster, eventually, run

from broker_agent.metrics import cleaner_metrics
from broker_agent.partitions.api import FetchPartition
from broker_agent.partitions.assignments import MetadataView, PartitionAssignment
from broker_agent.partitions.compare import compare_compacted, compare_replicas, main
from broker_agent.partitions.log_cleaner import CleanerConfig
from broker_agent.partitions.offset_map import ENTRY_BYTES
from broker_agent.partitions.partition import Role
from broker_agent.partitions.partition_log import LogConfig
from broker_agent.partitions.replica_config import ReplicaConfig
from broker_agent.partitions.replica_manager import ReplicaManager


def stored(manager: ReplicaManager) -> list[Stored]:
    """A replica's own log (followers serve no consumers)."""
    plog = manager.partition_state(T, 0).log
    return records_in(plog.read(0, 1 << 30, plog.log_end_offset))


async def everything(manager: ReplicaManager, offset: int = 0) -> bytes:
    out = b""
    while offset < manager.high_watermark(T, 0):
        results = await manager.fetch(-1, 0, 1, 1 << 20, [FetchPartition(T, 0, offset)])
        records = results[0].records
        if not records:
            break
        out += records
        offset = records_in(records)[-1].offset + 1 if records_in(records) else offset + 1
    return out


def test_replicas_compact_independently_and_consumers_see_the_gaps(tmp_path: Path) -> None:
    async def scenario(cluster: Cluster) -> None:
        cluster.create_topic(
            T, replicas=(0, 1), cleanup_policy="compact", segment_bytes="2048",
            min_cleanable_dirty_ratio="0.1",
        )  # fmt: skip
        leader, follower = cluster.brokers[0], cluster.brokers[1]
        await produce_updates(leader, rounds=20)
        end = leader.log_end_offset(T, 0)
        await eventually(lambda: follower.log_end_offset(T, 0) == end, "follower caught up")
        await eventually(lambda: leader.high_watermark(T, 0) == end, "HW at the log end")
        before = records_in(await everything(leader))
        assert len(before) == 20 * KEYS

        assert await leader.cleaner.clean_once()
        after = records_in(await everything(leader))
        active_base = leader.partition_state(T, 0).log.store.segments[-1].base_offset
        assert len([r for r in after if r.offset < active_base]) <= KEYS
        assert latest_per_key(after) == latest_per_key(before)
        offsets = [r.offset for r in after]
        assert offsets == sorted(set(offsets)) and offsets[-1] == end - 1
        assert offsets[0] > 0  # a gap where superseded records were
        # A consumer fetching from inside a gap gets the next surviving record.
        first = records_in(await everything(leader, 1))
        assert first[0].offset >= 1 and first == [r for r in after if r.offset >= first[0].offset]
        # The follower has not cleaned: replicas may differ in superseded records...
        assert len(stored(follower)) == 20 * KEYS
        # ...and agree on every key's latest (offset, value) once it has.
        dirs = [m.log_dir / f"{T}-0" for m in (leader, follower)]
        assert compare_replicas(dirs, end)  # not byte-identical any more...
        assert compare_compacted(dirs, end) == []  # ...but the same latest values
        await eventually(lambda: follower.high_watermark(T, 0) == end, "the follower's HW")
        assert await follower.cleaner.clean_once()
        assert latest_per_key(stored(follower)) == latest_per_key(after)
        assert compare_compacted(dirs, end) == []
        assert leader.cleaner.stats.runs == 1 and leader.cleaner.stats.records_removed > 0

        assert main([*map(str, dirs), "--below", str(end), "--compacted"]) == 0
        # Broker 2 joins after the cleaning: it copies the compacted log, gaps and all.
        cluster.controller.change(T, 0, replicas=(0, 1, 2))
        joined = cluster.brokers[2]
        await eventually(lambda: joined.log_end_offset(T, 0) == end, "new follower caught up")
        assert stored(joined) == after
        # Production goes on, and every replica keeps appending after the gaps.
        await produce_updates(leader, rounds=1, first_round=20)
        end = leader.log_end_offset(T, 0)
        for manager in cluster.brokers.values():
            await eventually(lambda m=manager: m.log_end_offset(T, 0) == end, "replicated")

    run(scenario, tmp_path)


def test_a_compacted_topic_refuses_records_without_a_key(tmp_path: Path) -> None:
    async def scenario(cluster: Cluster) -> None:
        cluster.create_topic(T, cleanup_policy="compact")
        cluster.create_topic("plain")
        leader = cluster.brokers[0]
        keyless = make_batch([(b"k", b"v"), (None, b"no key")])
        result = await leader.append(T, 0, keyless, 1, 1_000)
        assert result.error is ErrorCode.invalid_record
        assert "without key" in (result.error_message or "")
        assert leader.log_end_offset(T, 0) == 0
        assert (await leader.append("plain", 0, keyless, 1, 1_000)).error is ErrorCode.none

    run(scenario, tmp_path)


def test_the_cleaner_task_cleans_on_its_own_and_reports(tmp_path: Path) -> None:
    async def main() -> None:
        config = ReplicaConfig(
            log=LogConfig(segment_bytes=2048),
            tick_interval_ms=20,
            cleaner=CleanerConfig(backoff_ms=10, dedupe_buffer_size=1 << 16),
        )
        manager = ReplicaManager(0, tmp_path / "broker-0", config)
        await manager.start()
        try:
            assignment = PartitionAssignment(T, "id", 0, (0,), (0,), 0, 0, 0)
            manager.apply_metadata(
                MetadataView(
                    (assignment,),
                    {T: {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"}},
                )
            )
            await produce_updates(manager, rounds=20)
            plog = manager.partition_state(T, 0).log

            def compacted() -> bool:
                active = plog.store.segments[-1].base_offset
                below = [r for r in stored(manager) if r.offset < active]
                return manager.cleaner.stats.runs >= 1 and len(below) <= KEYS

            await eventually(compacted, "the log compacted by the task")
            values = {
                m.name: m.samples[0].value
                for m in cleaner_metrics(manager.cleaner.stats, manager.clock())
            }
            assert values["quorum_broker_log_cleaner_runs"] >= 1
            # Counted per step, so it covers the map pass the rewrite count leaves out.
            assert (
                values["quorum_broker_log_cleaner_io_bytes"]
                > values["quorum_broker_log_cleaner_read_bytes"]
            )
            assert values["quorum_broker_log_cleaner_removed_records"] > 0
            assert 0 < values["quorum_broker_log_cleaner_recopy_percent"] < 100
            assert values["quorum_broker_log_cleaner_uncleanable_partitions"] == 0
            assert values["quorum_broker_log_cleaner_time_since_last_run_seconds"] < 60
            labelled = {
                m.name: {tuple(s.labels.values()): s.value for s in m.samples}
                for m in cleaner_metrics(manager.cleaner.stats, manager.clock())
            }
            assert labelled["quorum_broker_log_cleaner_partition_reclaimed_bytes"][(T, "0")] > 0
            last_run = labelled["quorum_broker_log_cleaner_partition_last_run_timestamp_seconds"]
            assert last_run[(T, "0")] > 0
        finally:
            await manager.close()

    asyncio.run(main())


def test_a_failing_round_marks_the_partition_uncleanable_and_it_stays_served(
    tmp_path: Path,
) -> None:
    async def scenario(cluster: Cluster) -> None:
        cluster.create_topic(
            T, replicas=(0,), cleanup_policy="compact", segment_bytes="2048",
            min_cleanable_dirty_ratio="0",
        )  # fmt: skip
        leader = cluster.brokers[0]
        await produce_updates(leader, rounds=10)
        part = leader.partition_state(T, 0)
        # A map too small for one batch: the round cannot proceed.
        leader.cleaner.cleaner.config = CleanerConfig(dedupe_buffer_size=ENTRY_BYTES)
        leader.cleaner.cleaner._map = None
        big = make_batch([(b"key-%d" % k, b"v") for k in range(5)])
        assert (await leader.append(T, 0, big, 1, 1_000)).error is ErrorCode.none
        part.log.store.roll()
        part.log.write_cleaner_checkpoint(part.log.log_end_offset - 5)  # only that batch dirty
        assert not await leader.cleaner.clean_once()
        assert leader.cleaner.stats.uncleanable == {f"{T}-0"}
        assert leader.cleaner.filthiest(cluster.clock()) is None
        assert (
            await leader.append(T, 0, make_batch([(b"k", b"v")]), 1, 1_000)
        ).error is ErrorCode.none
        assert len(await everything(leader)) > 0

        # Deleted, the partition is forgotten (Kafka's cleaner manager drops
        # deleted logs from its uncleanable set); recreated, it is cleaned again.
        del cluster.controller.partitions[(T, 0)]
        cluster.publish()
        await eventually(lambda: (T, 0) not in leader.partitions, "the partition deleted")
        assert leader.cleaner.filthiest(cluster.clock()) is None
        assert leader.cleaner.stats.uncleanable == set()
        leader.cleaner.cleaner.config = CleanerConfig()
        leader.cleaner.cleaner._map = None
        cluster.create_topic(
            T, replicas=(0,), cleanup_policy="compact", segment_bytes="2048",
            min_cleanable_dirty_ratio="0",
        )  # fmt: skip
        await eventually(lambda: (T, 0) in leader.partitions, "the partition recreated")
        await produce_updates(leader, rounds=5)
        assert await leader.cleaner.clean_once()
        assert leader.cleaner.stats.uncleanable == set()

    run(scenario, tmp_path)


def test_a_follower_behind_a_cleaned_leader_epoch_truncates_nothing_committed(
    tmp_path: Path,
) -> None:
    """Broker 2 stops holding epoch 0's committed records; the leadership moves
    (epoch 1), the new leader supersedes every key, cleans epoch 0's batches away
    entirely and restarts (its epoch cache read back from disk). Broker 2 returns:
    its OffsetsForLeaderEpoch(0) must still be answered with epoch 0's real end,
    so it keeps every committed record it held and fetches on from inside the
    leader's gap."""

    async def scenario(cluster: Cluster) -> None:
        cluster.create_topic(
            T, replicas=(0, 1, 2), cleanup_policy="compact", segment_bytes="2048",
            min_cleanable_dirty_ratio="0.01",
        )  # fmt: skip
        await produce_updates(cluster.brokers[0], rounds=5)
        old_end = cluster.brokers[0].log_end_offset(T, 0)
        for manager in cluster.brokers.values():
            await eventually(lambda m=manager: m.high_watermark(T, 0) == old_end, "HW everywhere")
        held = stored(cluster.brokers[2])
        assert len(held) == 5 * KEYS and held[-1].offset == old_end - 1

        await cluster.stop_broker(2)
        cluster.controller.change(T, 0, leader=1, isr=(0, 1))
        leader = cluster.brokers[1]
        await eventually(lambda: leader.partition_state(T, 0).role is Role.LEADER, "broker 1 leads")
        await produce_updates(leader, rounds=5, first_round=5)
        end = leader.log_end_offset(T, 0)
        await eventually(lambda: leader.high_watermark(T, 0) == end, "HW at the new log end")
        while await leader.cleaner.clean_once():
            pass
        assert [r for r in stored(leader) if r.offset < old_end] == []  # epoch 0 cleaned away
        assert leader.partition_state(T, 0).log.end_offset_for_epoch(0).end_offset == old_end

        await cluster.stop_broker(1)  # the epoch cache is read back from disk
        leader = await cluster.start_broker(1)
        await eventually(
            lambda: leader.partition_state(T, 0).role is Role.LEADER, "broker 1 leads again"
        )
        assert leader.partition_state(T, 0).log.end_offset_for_epoch(0).end_offset == old_end
        returning = await cluster.start_broker(2)
        await eventually(lambda: returning.log_end_offset(T, 0) == end, "broker 2 caught up")
        after = stored(returning)
        assert [r for r in after if r.offset < old_end] == held  # nothing committed lost
        offsets = [r.offset for r in after]
        assert offsets == sorted(set(offsets))
        assert latest_per_key(after) == latest_per_key(stored(leader))
        dirs = [m.log_dir / f"{T}-0" for m in (leader, returning)]
        assert compare_compacted(dirs, end) == []

    run(scenario, tmp_path)


def test_a_follower_returns_to_a_leader_that_never_held_its_epoch(tmp_path: Path) -> None:
    """Broker 3 joins after the leader cleaned epoch 0 away, so its log and epoch
    cache start in epoch 1; it then leads. Broker 2, back with only epoch 0's
    committed records, asks where epoch 0 ends: as Kafka answers an epoch older
    than every one it knows, with the start of the first epoch it knows (not
    UNDEFINED, which sends a follower back to its HW and, on a Fetch, to a
    diverging epoch it can never get past). Broker 2 keeps every record and
    catches up."""

    async def scenario(cluster: Cluster) -> None:
        cluster.create_topic(
            T, replicas=(0, 1, 2), cleanup_policy="compact", segment_bytes="2048",
            min_cleanable_dirty_ratio="0.01",
        )  # fmt: skip
        await produce_updates(cluster.brokers[0], rounds=5)
        old_end = cluster.brokers[0].log_end_offset(T, 0)
        for b in (0, 1, 2):
            manager = cluster.brokers[b]
            await eventually(lambda m=manager: m.high_watermark(T, 0) == old_end, "HW everywhere")
        held = stored(cluster.brokers[2])
        await cluster.stop_broker(2)

        cluster.controller.change(T, 0, leader=1, isr=(0, 1))
        leader = cluster.brokers[1]
        await eventually(lambda: leader.partition_state(T, 0).role is Role.LEADER, "1 leads")
        await produce_updates(leader, rounds=5, first_round=5)
        end = leader.log_end_offset(T, 0)
        await eventually(lambda: leader.high_watermark(T, 0) == end, "HW at the new log end")
        while await leader.cleaner.clean_once():
            pass
        assert [r for r in stored(leader) if r.offset < old_end] == []

        cluster.controller.change(T, 0, replicas=(0, 1, 2, 3))
        joined = cluster.brokers[3]
        await eventually(lambda: joined.log_end_offset(T, 0) == end, "broker 3 copied the log")
        assert [e.epoch for e in joined.partition_state(T, 0).log.epoch_entries] == [1]
        cluster.controller.change(T, 0, leader=3, isr=(1, 3))
        await eventually(lambda: joined.partition_state(T, 0).role is Role.LEADER, "3 leads")
        answer = joined.offsets_for_leader_epoch(T, 0, joined.partition_state(T, 0).leader_epoch, 0)
        assert (answer.error, answer.leader_epoch) == (ErrorCode.none, 0)
        assert answer.end_offset >= old_end

        returning = await cluster.start_broker(2)
        await eventually(lambda: returning.log_end_offset(T, 0) == end, "broker 2 caught up")
        after = stored(returning)
        assert [r for r in after if r.offset < old_end] == held  # nothing committed lost
        assert latest_per_key(after) == latest_per_key(stored(joined))
        dirs = [m.log_dir / f"{T}-0" for m in (joined, returning)]
        assert compare_compacted(dirs, end) == []

    run(scenario, tmp_path, broker_ids=(0, 1, 2, 3))
