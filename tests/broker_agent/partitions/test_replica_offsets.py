"""ListOffsets as Kafka's tools ask it (DEBUGGING_REPLICA_ID, -2): any replica,
leader or follower, answers from its own log, latest being its LEO; a consumer's
latest is the leader's HW, and a follower refuses consumers."""

from __future__ import annotations

from pathlib import Path

from kio.schema.errors import ErrorCode
from partitions_cluster import Cluster, eventually, make_batch, run

from broker_agent.partitions.api import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP

T = "orders"


def test_every_replica_reports_its_own_leo_and_consumers_get_the_leaders_hw(
    tmp_path: Path,
) -> None:
    async def scenario(cluster: Cluster) -> None:
        cluster.create_topic(T)
        leader = cluster.leader(T)
        await leader.append(T, 0, make_batch(b"a", b"b"), -1, 10_000)
        await eventually(
            lambda: all(m.high_watermark(T, 0) == 2 for m in cluster.brokers.values()), "HW 2"
        )
        cluster.client.down.update({1, 2})  # the followers stop fetching: the HW stays
        await leader.append(T, 0, make_batch(b"c"), 1, 10_000)
        # The leader: its LEO for tools, its HW for consumers.
        assert leader.replica_offsets(T, 0, LATEST_TIMESTAMP, -1).offset == 3
        assert leader.list_offsets(T, 0, LATEST_TIMESTAMP, -1).offset == 2
        # A follower: its own LEO and log start for tools, NOT_LEADER_OR_FOLLOWER for consumers.
        follower = cluster.brokers[1]
        latest = follower.replica_offsets(T, 0, LATEST_TIMESTAMP, -1)
        assert (latest.error, latest.offset) == (ErrorCode.none, 2)
        assert follower.replica_offsets(T, 0, EARLIEST_TIMESTAMP, -1).offset == 0
        refused = follower.list_offsets(T, 0, LATEST_TIMESTAMP, -1)
        assert refused.error is ErrorCode.not_leader_or_follower
        # Leader epochs are still checked; an unknown partition is still unknown.
        fenced = follower.replica_offsets(T, 0, LATEST_TIMESTAMP, 7)
        assert fenced.error is ErrorCode.unknown_leader_epoch
        missing = follower.replica_offsets("nope", 0, LATEST_TIMESTAMP, -1)
        assert missing.error is ErrorCode.unknown_topic_or_partition

    run(scenario, tmp_path)
