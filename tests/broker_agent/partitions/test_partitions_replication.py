"""Replication across ReplicaManagers with real logs (in-memory fetch client):
acks=all and the HW, ISR by lag, leader change with divergence, restart."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from kio.schema.errors import ErrorCode
from partitions_cluster import Cluster, eventually, make_batch, run

from broker_agent.partitions.assignments import PartitionAssignment
from broker_agent.partitions.compare import compare_replicas
from broker_agent.replication.follower import TruncationMode

T = "orders"


def replica_dirs(cluster: Cluster, broker_ids: tuple[int, ...] = (0, 1, 2)) -> list[Path]:
    return [cluster.root / f"broker-{b}" / f"{T}-0" for b in broker_ids]


def all_at(cluster: Cluster, offset: int, broker_ids: tuple[int, ...] = (0, 1, 2)) -> bool:
    return all(
        cluster.brokers[b].log_end_offset(T, 0) == offset
        and cluster.brokers[b].high_watermark(T, 0) == offset
        for b in broker_ids
    )


def test_acks_all_reaches_the_hw_on_every_replica(tmp_path: Path) -> None:
    async def scenario(cluster: Cluster) -> None:
        cluster.create_topic(T, min_insync_replicas="2")
        leader = cluster.leader(T)
        for i in range(5):
            result = await leader.append(T, 0, make_batch(b"a%d" % i, b"b%d" % i), -1, 10_000)
            assert result.error is ErrorCode.none and result.base_offset == 2 * i
            # Answered only once the HW passed the batch.
            assert leader.high_watermark(T, 0) >= 2 * i + 2
        await eventually(lambda: all_at(cluster, 10), "HW 10 on all three")
        assert compare_replicas(replica_dirs(cluster), 10) == []
        records = await cluster.consume(0, T)
        assert b"a4" in records and b"b4" in records

    run(scenario, tmp_path)


def test_consumers_read_only_below_the_hw(tmp_path: Path) -> None:
    async def scenario(cluster: Cluster) -> None:
        cluster.create_topic(T)
        await eventually(lambda: all_at(cluster, 0), "followers fetching")
        cluster.client.down.update({1, 2})  # followers cannot fetch: HW stays
        leader = cluster.leader(T)
        result = await leader.append(T, 0, make_batch(b"x"), 1, 1_000)
        assert result.error is ErrorCode.none
        assert leader.log_end_offset(T, 0) == 1 and leader.high_watermark(T, 0) == 0
        assert await cluster.consume(0, T) == b""
        cluster.client.down.clear()
        await eventually(lambda: all_at(cluster, 1), "HW 1")
        assert b"x" in await cluster.consume(0, T)

    run(scenario, tmp_path)


def test_isr_shrinks_after_the_lag_time_and_expands_on_catching_up(tmp_path: Path) -> None:
    async def scenario(cluster: Cluster) -> None:
        cluster.create_topic(T, min_insync_replicas="2")
        leader = cluster.leader(T)
        assert (await leader.append(T, 0, make_batch(b"1"), -1, 10_000)).error is ErrorCode.none
        await eventually(lambda: all_at(cluster, 1), "HW 1")
        cluster.client.down.add(2)  # broker 2 stops fetching (paused)
        leader.tick()
        assert cluster.controller.partitions[(T, 0)].isr == (0, 1, 2)
        cluster.clock.now_ms += 30_001  # past replica.lag.time.max.ms
        await leader.append(T, 0, make_batch(b"2"), 1, 1_000)
        await eventually(lambda: cluster.brokers[1].log_end_offset(T, 0) == 2, "1 fetched")
        leader.tick()
        await eventually(lambda: cluster.controller.partitions[(T, 0)].isr == (0, 1), "shrink")
        assert leader.isr_shrinks == 1
        # acks=all now needs only the rest of the ISR.
        result = await leader.append(T, 0, make_batch(b"3"), -1, 10_000)
        assert result.error is ErrorCode.none
        # Broker 2 comes back, catches up to the HW and rejoins.
        cluster.client.down.discard(2)
        await eventually(lambda: cluster.controller.partitions[(T, 0)].isr == (0, 1, 2), "expand")
        await eventually(lambda: all_at(cluster, 3), "all caught up")
        assert compare_replicas(replica_dirs(cluster), 3) == []

    run(scenario, tmp_path)


def test_the_leader_takes_the_isr_from_the_alter_partition_answer(tmp_path: Path) -> None:
    """Kafka's leader applies the committed ISR the controller answers with, not
    only the metadata record that follows (an accepted change that changed
    nothing commits no record): with the metadata held back, a shrink still
    lets acks=all complete on the smaller ISR, and the record, when it comes,
    changes nothing and asks nothing again."""

    async def scenario(cluster: Cluster) -> None:
        cluster.create_topic(T)
        leader = cluster.leader(T)
        await eventually(lambda: all_at(cluster, 0), "followers fetching")
        cluster.client.down.add(2)
        cluster.controller.cluster = None  # records commit, metadata does not reach brokers
        cluster.clock.now_ms += 30_001
        await leader.append(T, 0, make_batch(b"1"), 1, 1_000)
        await eventually(lambda: cluster.brokers[1].log_end_offset(T, 0) == 1, "1 fetched")
        leader.tick()
        await eventually(lambda: leader.partition_state(T, 0).isr == (0, 1), "ISR from the answer")  # type: ignore[union-attr]
        result = await leader.append(T, 0, make_batch(b"2"), -1, 5_000)
        assert result.error is ErrorCode.none  # acks=all on (0, 1): broker 2 not waited for
        requests = list(cluster.controller.requests)
        cluster.controller.cluster = cluster
        cluster.publish()  # the delayed record: the same ISR and partition epoch
        leader.tick()
        assert cluster.controller.requests == requests  # nothing asked again
        assert leader.partition_state(T, 0).isr == (0, 1)  # type: ignore[union-attr]

    run(scenario, tmp_path)


def test_a_stale_alter_partition_is_refused_and_retried_on_fresh_metadata(
    tmp_path: Path,
) -> None:
    async def scenario(cluster: Cluster) -> None:
        cluster.create_topic(T)
        leader = cluster.leader(T)
        await eventually(lambda: all_at(cluster, 0), "followers fetching")
        cluster.client.down.add(2)
        # The controller's partition epoch moves on without the leader seeing it.
        part = cluster.controller.partitions[(T, 0)]
        cluster.controller.partitions[(T, 0)] = type(part)(
            *[getattr(part, f) for f in part.__dataclass_fields__][:-1],
            part.partition_epoch + 5,
        )
        cluster.clock.now_ms += 30_001
        await leader.append(T, 0, make_batch(b"1"), 1, 1_000)
        await eventually(lambda: cluster.brokers[1].log_end_offset(T, 0) == 1, "1 fetched")
        leader.tick()
        await eventually(lambda: cluster.controller.refused == 1, "refusal")
        assert cluster.controller.partitions[(T, 0)].isr == (0, 1, 2)
        cluster.publish()  # fresh metadata reaches the leader
        leader.tick()
        await eventually(lambda: cluster.controller.partitions[(T, 0)].isr == (0, 1), "shrink")

    run(scenario, tmp_path)


def test_seed_003_not_enough_replicas_and_after_append(tmp_path: Path) -> None:
    async def scenario(cluster: Cluster) -> None:
        cluster.create_topic(T, replicas=(0, 1), min_insync_replicas="2")
        leader = cluster.leader(T)
        assert (await leader.append(T, 0, make_batch(b"1"), -1, 10_000)).error is ErrorCode.none
        # The ISR shrinks to (0,) while an acks=all write waits.
        cluster.client.down.add(1)
        waiting = leader.append(T, 0, make_batch(b"2"), -1, 10_000)
        import asyncio

        task = asyncio.ensure_future(waiting)
        await asyncio.sleep(0.05)
        cluster.controller.change(T, 0, isr=(0,))
        result = await task
        assert result.error is ErrorCode.not_enough_replicas_after_append
        # Now the ISR is below min.insync.replicas: refused before appending.
        end = leader.log_end_offset(T, 0)
        result = await leader.append(T, 0, make_batch(b"3"), -1, 10_000)
        assert result.error is ErrorCode.not_enough_replicas
        assert leader.log_end_offset(T, 0) == end
        # acks=1 still writes; reads go on.
        assert (await leader.append(T, 0, make_batch(b"4"), 1, 10_000)).error is ErrorCode.none
        assert b"1" in await cluster.consume(0, T)
        # min.insync.replicas=1 restores acks=all writes.
        cluster.controller.configs[T]["min.insync.replicas"] = "1"
        cluster.publish()
        assert (await leader.append(T, 0, make_batch(b"5"), -1, 10_000)).error is ErrorCode.none

    run(scenario, tmp_path)


def _diverge_and_restart(mode: TruncationMode, tmp_path: Path) -> tuple[bytes, bytes, list[str]]:
    """Seed 001's second failure scenario on real logs: A (broker 0) leads and
    alone in the ISR commits m2, which B (broker 1) never got; A crashes; B is
    elected (unclean: it left the ISR) and takes m3 at offset 1; A comes back
    as B's follower."""
    outcome: list[object] = []

    async def scenario(cluster: Cluster) -> None:
        cluster.create_topic(T, replicas=(0, 1))
        a = cluster.leader(T)
        assert (await a.append(T, 0, make_batch(b"m1"), -1, 10_000)).error is ErrorCode.none
        await eventually(lambda: all_at(cluster, 1, (0, 1)), "m1 everywhere")
        cluster.client.down.add(1)
        cluster.controller.change(T, 0, isr=(0,))  # B lagged out of the ISR
        assert (await a.append(T, 0, make_batch(b"m2"), -1, 10_000)).error is ErrorCode.none
        assert a.high_watermark(T, 0) == 2
        await cluster.stop_broker(0)
        cluster.client.down.discard(1)
        cluster.controller.change(T, 0, leader=1, isr=(1,))
        b = cluster.brokers[1]
        assert (await b.append(T, 0, make_batch(b"m3"), 1, 10_000)).error is ErrorCode.none
        assert b.high_watermark(T, 0) == 2
        await cluster.start_broker(0)
        restarted = cluster.brokers[0].partition_state(T, 0)
        assert restarted is not None
        await eventually(
            lambda: (
                restarted.fetch_answers >= 2
                and restarted.log.log_end_offset == 2
                and restarted.high_watermark == 2
            ),
            "broker 0 following at offset 2",
        )
        outcome.append(await cluster.consume(1, T))
        part = cluster.brokers[0].partition_state(T, 0)
        assert part is not None
        outcome.append(part.log.read(0, 1 << 20, 10))
        outcome.append(compare_replicas(replica_dirs(cluster, (0, 1)), 2))

    run(scenario, tmp_path, mode=mode)
    return outcome[0], outcome[1], outcome[2]  # type: ignore[return-value]


def test_leader_change_truncates_the_old_leaders_divergent_tail_by_epoch(
    tmp_path: Path,
) -> None:
    leader_log, old_leader_log, problems = _diverge_and_restart(
        TruncationMode.LEADER_EPOCH, tmp_path
    )
    assert b"m3" in leader_log and b"m2" not in leader_log
    assert b"m2" not in old_leader_log and b"m3" in old_leader_log
    assert problems == []


def test_hw_truncation_leaves_the_old_leader_diverged(tmp_path: Path) -> None:
    leader_log, old_leader_log, problems = _diverge_and_restart(
        TruncationMode.HIGH_WATERMARK, tmp_path
    )
    # Same offsets and HW on both, different records at offset 1.
    assert b"m2" in old_leader_log and b"m3" not in old_leader_log
    assert b"m3" in leader_log
    assert problems and "offset 1" in problems[0]


def test_restart_recovers_the_log_and_producer_state(tmp_path: Path) -> None:
    async def scenario(cluster: Cluster) -> None:
        cluster.create_topic(T, replicas=(0,))
        leader = cluster.leader(T)
        first = make_batch(b"a", b"b", producer_id=7, producer_epoch=0, base_sequence=0)
        second = make_batch(b"c", producer_id=7, producer_epoch=0, base_sequence=2)
        assert (await leader.append(T, 0, first, -1, 1_000)).base_offset == 0
        assert (await leader.append(T, 0, second, -1, 1_000)).base_offset == 2
        await cluster.stop_broker(0)
        # A torn write at the tail, as a crash mid-append leaves it.
        segment = sorted((tmp_path / "broker-0" / f"{T}-0").glob("*.log"))[-1]
        with segment.open("ab") as f:
            f.write(b"\x00\x00\x00\x00\x00\x00\x00\x03partial")
        restarted = await cluster.start_broker(0)
        assert restarted.log_end_offset(T, 0) == 3
        # The retried second batch is answered with its original offset, stored once.
        retry = await restarted.append(T, 0, second, -1, 1_000)
        assert (retry.error, retry.base_offset) == (ErrorCode.none, 2)
        assert restarted.log_end_offset(T, 0) == 3
        gap = make_batch(b"e", producer_id=7, producer_epoch=0, base_sequence=9)
        result = await restarted.append(T, 0, gap, -1, 1_000)
        assert result.error is ErrorCode.out_of_order_sequence_number
        stale = make_batch(b"f", producer_id=7, producer_epoch=-1 + 0, base_sequence=3)
        fenced = make_batch(b"g", producer_id=7, producer_epoch=1, base_sequence=0)
        assert (await restarted.append(T, 0, fenced, -1, 1_000)).error is ErrorCode.none
        result = await restarted.append(T, 0, stale, -1, 1_000)
        assert result.error is ErrorCode.invalid_producer_epoch
        assert restarted.log_end_offset(T, 0) == 4

    run(scenario, tmp_path, broker_ids=(0,))


def test_producer_state_survives_a_leader_change(tmp_path: Path) -> None:
    async def scenario(cluster: Cluster) -> None:
        cluster.create_topic(T, replicas=(0, 1))
        old = cluster.leader(T)
        batches = [
            make_batch(b"r%d" % i, producer_id=42, producer_epoch=0, base_sequence=i)
            for i in range(3)
        ]
        for i, batch in enumerate(batches):
            assert (await old.append(T, 0, batch, -1, 10_000)).base_offset == i
        await eventually(lambda: all_at(cluster, 3, (0, 1)), "replicated")
        await cluster.stop_broker(0)
        cluster.controller.change(T, 0, leader=1, isr=(1,))
        new = cluster.brokers[1]
        # The answer to the last batch was lost: the producer resends it to the new leader.
        retry = await new.append(T, 0, batches[-1], -1, 10_000)
        assert (retry.error, retry.base_offset) == (ErrorCode.none, 2)
        assert new.log_end_offset(T, 0) == 3
        nxt = make_batch(b"r3", producer_id=42, producer_epoch=0, base_sequence=3)
        assert (await new.append(T, 0, nxt, -1, 10_000)).base_offset == 3

    run(scenario, tmp_path, broker_ids=(0, 1))


def test_the_compare_tool_reports_identical_and_diverged_replicas(tmp_path: Path) -> None:
    from broker_agent.partitions.compare import main

    async def scenario(cluster: Cluster) -> None:
        cluster.create_topic(T, replicas=(0, 1))
        await cluster.leader(T).append(T, 0, make_batch(b"same"), -1, 10_000)
        await eventually(lambda: all_at(cluster, 1, (0, 1)), "replicated")

    run(scenario, tmp_path, broker_ids=(0, 1))
    dirs = [str(d) for d in replica_dirs_at(tmp_path, (0, 1))]
    assert main([*dirs, "--below", "1"]) == 0
    segment = sorted(Path(dirs[1]).glob("*.log"))[0]
    data = bytearray(segment.read_bytes())
    data[-1] ^= 0xFF  # damage the follower's copy: the batch no longer validates
    segment.write_bytes(bytes(data))
    assert main([*dirs, "--below", "1"]) == 1


def replica_dirs_at(root: Path, broker_ids: tuple[int, ...]) -> list[Path]:
    return [root / f"broker-{b}" / f"{T}-0" for b in broker_ids]


def test_one_alter_partition_carries_many_partitions_each_answered_alone(
    tmp_path: Path,
) -> None:
    """A tick's ISR shrinks go in one request; a stale item in it is refused on
    its own (the rest applied) and asked again once fresh metadata arrived."""
    count = 20

    async def scenario(cluster: Cluster) -> None:
        for p in range(count):
            cluster.controller.partitions[(T, p)] = PartitionAssignment(
                T, f"id-{T}", p, (0, 1, 2), (0, 1, 2), 0, 0, 0
            )
        cluster.controller.configs[T] = {}
        cluster.publish()
        leader = cluster.brokers[0]
        follower = cluster.brokers[1]
        await eventually(
            lambda: all(follower.partition_state(T, p).fetch_answers > 0 for p in range(count)),
            "followers fetching",
        )
        cluster.client.down.add(2)
        stale = cluster.controller.partitions[(T, 7)]
        cluster.controller.partitions[(T, 7)] = replace(
            stale, partition_epoch=stale.partition_epoch + 5
        )
        cluster.clock.now_ms += 30_001  # broker 2 lags past replica.lag.time.max.ms
        for p in range(count):
            assert (await leader.append(T, p, make_batch(b"1"), 1, 1_000)).error is ErrorCode.none
        await eventually(
            lambda: all(follower.log_end_offset(T, p) == 1 for p in range(count)), "1 fetched"
        )
        leader.tick()
        others = [p for p in range(count) if p != 7]

        def shrunk() -> list[int]:
            parts = cluster.controller.partitions
            return [p for p in range(count) if parts[(T, p)].isr == (0, 1)]

        await eventually(lambda: shrunk() == others, "the request answered")
        assert cluster.controller.refused == 1  # the stale item alone
        assert cluster.controller.requests == [count]
        cluster.publish()  # fresh metadata reaches the leader
        leader.tick()
        await eventually(lambda: cluster.controller.partitions[(T, 7)].isr == (0, 1), "retried")
        assert cluster.controller.requests == [count, 1]
        # Broker 2 comes back: its partitions rejoin in a few batched requests.
        cluster.client.down.discard(2)
        await eventually(
            lambda: all(
                cluster.controller.partitions[(T, p)].isr == (0, 1, 2) for p in range(count)
            ),
            "expand",
        )
        # Batched: fewer requests than partitions. (A change still pending is asked
        # again when other metadata is applied, so items may repeat: a change the
        # controller accepted without a record must not stay pending for ever.)
        assert sum(cluster.controller.requests[2:]) >= count
        assert len(cluster.controller.requests) - 2 < count

    run(scenario, tmp_path)
