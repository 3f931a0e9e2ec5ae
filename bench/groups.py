"""Consumer-group rebalances and offset commits on three real brokers.

A cluster (three controllers, three brokers; `__consumer_offsets` with RF 3,
`group.initial.rebalance.delay.ms=0`) is started in a temporary directory, as
the integration tests start one. Then:

* `join_rebalance_s{members=N}`: N aiokafka members (all in this process, one
  event loop) of one group on a topic of N partitions have settled; one more
  member starts; the time from its start until every member holds its new
  assignment (all N+1 assignments disjoint and covering the topic, each member
  with at least one partition when partitions allow).
* `leave_rebalance_s{members=N}`: one member stops (LeaveGroup); the time until
  the others hold the new assignment.
* `coordinator_failover_s{members=N}`: the coordinator's broker is SIGKILLed; the
  time until every member talks to the new coordinator (the leader of the
  group's offsets partition, elected once the controller has fenced the killed
  broker: `broker.session.timeout.ms`, 9 s) and holds a full assignment.
* `offset_commits_per_s`: OffsetCommit requests (one partition each, acks=all
  to RF 3) from `--connections` connections at once, to one coordinator.

    .venv/bin/python bench/groups.py [--members 10,100] [--commit-seconds 5]

One JSON object per measurement on stdout; progress on stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kio.schema.errors import ErrorCode
from report import emit, say

from broker_agent.kafka.versions import ApiKey
from tests.integration.controller_cluster import Cluster, ctl_json
from tests.integration.groups_cluster import bootstrap, find_coordinator, groups_cluster
from tests.integration.kafka_wire import KafkaSocket, wait_for_topic_everywhere


def settled(consumers: list[object], partitions: int) -> bool:
    held = [{tp.partition for tp in c.assignment()} for c in consumers]  # type: ignore[attr-defined]
    flat = [p for h in held for p in h]
    enough = all(held) if partitions >= len(consumers) else True
    return sorted(flat) == list(range(partitions)) and enough


async def wait_settled(consumers: list[object], partitions: int, timeout_s: float = 120) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        if settled(consumers, partitions):
            return time.monotonic() - started
        await asyncio.sleep(0.01)
    raise TimeoutError("no settled assignment")


async def rebalances(cluster: Cluster, members: int, kill: bool) -> None:
    from aiokafka import AIOKafkaConsumer

    topic = f"bench-groups-{members}-{int(kill)}"
    ctl_json(
        cluster,
        "topics",
        "create",
        topic,
        "--partitions",
        str(members + 1),
        "--replication-factor",
        "3",
    )
    wait_for_topic_everywhere(cluster, topic)
    group = f"bench-{members}-{int(kill)}"

    def member() -> AIOKafkaConsumer:
        return AIOKafkaConsumer(
            topic,
            bootstrap_servers=bootstrap(cluster),
            group_id=group,
            session_timeout_ms=10_000,
            heartbeat_interval_ms=500,
            enable_auto_commit=False,
            metadata_max_age_ms=5000,
            request_timeout_ms=40_000,
        )

    consumers = [member() for _ in range(members)]
    await asyncio.gather(*(c.start() for c in consumers))
    try:
        await wait_settled(consumers, members + 1)
        late = member()
        started = time.monotonic()
        await late.start()
        consumers.append(late)
        await wait_settled(consumers, members + 1)
        emit(
            measurement="join_rebalance_s",
            members=members + 1,
            seconds=round(time.monotonic() - started, 3),
        )
        gone = consumers.pop(0)
        started = time.monotonic()
        await gone.stop()
        await wait_settled(consumers, members + 1)
        emit(
            measurement="leave_rebalance_s",
            members=members,
            seconds=round(time.monotonic() - started, 3),
        )
        if kill:
            coordinator = find_coordinator(cluster, group)
            proc = cluster.brokers[coordinator]
            assert proc.popen is not None
            started = time.monotonic()
            proc.popen.send_signal(signal.SIGKILL)
            proc.popen.wait(10)
            # The new leader of the offsets partition loads the group (Stable, its
            # members and assignments from the log): members that find it through
            # FindCoordinator heartbeat on without a rebalance. Done once every
            # member's coordinator is the new one and the assignment is whole.
            survivor = next(b for b in cluster.brokers if b != coordinator)
            new = coordinator
            while new == coordinator:  # until the controller has moved the leadership
                await asyncio.sleep(0.05)
                new = await asyncio.to_thread(find_coordinator, cluster, group, survivor)
            deadline = time.monotonic() + 180
            while time.monotonic() < deadline:
                moved = all(c._coordinator.coordinator_id == new for c in consumers)  # type: ignore[attr-defined]
                if moved and settled(consumers, members + 1):
                    break
                await asyncio.sleep(0.01)
            else:
                raise TimeoutError("members never moved to the new coordinator")
            emit(
                measurement="coordinator_failover_s",
                members=members,
                seconds=round(time.monotonic() - started, 3),
            )
            cluster.start_brokers(coordinator)
            cluster.wait_until(
                lambda: all(r["State"] == "ONLINE" for r in ctl_json(cluster, "brokers", "list")),
                60,
                "the killed broker back ONLINE",
            )
    finally:
        await asyncio.gather(*(c.stop() for c in consumers), return_exceptions=True)


def commits_per_second(cluster: Cluster, seconds: float, connections: int) -> None:
    ctl_json(
        cluster,
        "topics",
        "create",
        "bench-commits",
        "--partitions",
        "1",
        "--replication-factor",
        "3",
    )
    wait_for_topic_everywhere(cluster, "bench-commits")
    group = "bench-commit-group"
    coordinator = find_coordinator(cluster, group)
    counts = [0] * connections
    errors: list[str] = []
    stop = time.monotonic() + seconds

    def run(i: int) -> None:
        with KafkaSocket("127.0.0.1", cluster.brokers[coordinator].port, timeout_s=30) as s:
            offset = 0
            while time.monotonic() < stop:
                offset += 1
                answer = s.request(
                    ApiKey.OFFSET_COMMIT,
                    8,
                    {
                        "group_id": group,
                        "generation_id_or_member_epoch": -1,
                        "member_id": "",
                        "group_instance_id": None,
                        "topics": [
                            {
                                "name": "bench-commits",
                                "partitions": [
                                    {
                                        "partition_index": 0,
                                        "committed_offset": offset,
                                        "committed_leader_epoch": -1,
                                        "committed_metadata": None,
                                    }
                                ],
                            }
                        ],
                    },
                )
                code = answer.topics[0].partitions[0].error_code
                if code != ErrorCode.none:
                    errors.append(str(code))
                counts[i] += 1

    threads = [threading.Thread(target=run, args=(i,)) for i in range(connections)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - started
    emit(
        measurement="offset_commits_per_s",
        connections=connections,
        commits_per_s=round(sum(counts) / elapsed),
        errors=len(errors),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--members", default="10,100", help="group sizes, comma-separated")
    parser.add_argument("--commit-seconds", type=float, default=5.0)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--no-failover", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-groups-") as root:
        say("starting three controllers and three brokers")
        with groups_cluster(Path(root)) as cluster:
            find_coordinator(cluster, "warm-up")  # creates __consumer_offsets
            commits_per_second(cluster, args.commit_seconds, args.connections)
            for size in (int(s) for s in args.members.split(",")):
                say(f"{size} members")
                asyncio.run(rebalances(cluster, size, kill=not args.no_failover))


if __name__ == "__main__":
    main()
