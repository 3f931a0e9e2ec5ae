"""Real group consumers against real brokers: librdkafka (confluent-kafka) with the
range, round-robin and cooperative-sticky assignors, aiokafka with round-robin, and
`kcat -G`. Members join, leave, go silent (SIGKILLed: removed after the session
timeout), the leader leaves; after each rebalance every partition is owned by
exactly one member, read from the members' own assignments. Offsets survive a
kill -9 of the coordinator's broker: the group finds the new coordinator and
resumes from the committed offsets."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.controller_cluster import Cluster, ctl, ctl_json
from tests.integration.groups_cluster import (
    BROKERS,
    bootstrap,
    find_coordinator,
    groups_cluster,
    live_brokers,
    wait_all_online,
)
from tests.integration.kafka_wire import wait_for_topic_everywhere

pytestmark = pytest.mark.slow
PARTITIONS = 6


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with groups_cluster(tmp_path_factory.mktemp("groups-clients")) as c:
        yield c


def new_topic(cluster: Cluster, name: str, partitions: int = PARTITIONS) -> str:
    ctl_json(
        cluster,
        "topics",
        "create",
        name,
        "--partitions",
        str(partitions),
        "--replication-factor",
        "3",
    )
    wait_for_topic_everywhere(cluster, name)
    return name


def produce(cluster: Cluster, topic: str, count: int) -> list[bytes]:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap(cluster), "acks": "all"})
    values = [b"%s-%05d" % (topic.encode(), i) for i in range(count)]
    for i, value in enumerate(values):
        producer.produce(topic, value, b"k%d" % (i % 17))
    assert producer.flush(30) == 0
    return values


def wait_for(check: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def owned_once(assignments: list[set[int]], partitions: int = PARTITIONS) -> bool:
    """Every partition owned by exactly one member, every member holding one."""
    flat = [p for a in assignments for p in a]
    return sorted(flat) == list(range(partitions)) and all(assignments)


# --------------------------------------------------------------- librdkafka


class RdMember:
    """One librdkafka group consumer polling in its own thread; `assignment` is
    what the member itself holds."""

    def __init__(
        self, cluster: Cluster, group: str, topic: str, strategy: str, **extra: Any
    ) -> None:
        from confluent_kafka import Consumer

        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap(cluster),
                "group.id": group,
                "partition.assignment.strategy": strategy,
                "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 300,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "topic.metadata.refresh.interval.ms": 1000,
                **extra,
            }
        )
        self.consumer.subscribe([topic])
        self.assignment: set[int] = set()
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            msg = self.consumer.poll(0.1)
            if msg is not None and msg.error() is not None and not msg.error().retriable():
                self.errors.append(str(msg.error()))
            self.assignment = {tp.partition for tp in self.consumer.assignment()}

    def leave(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.consumer.close()  # LeaveGroup


@pytest.mark.parametrize("strategy", ["range", "roundrobin", "cooperative-sticky"])
def test_librdkafka_members_join_and_leave(cluster: Cluster, strategy: str) -> None:
    topic = new_topic(cluster, f"rd-{strategy}")
    group = f"rd-group-{strategy}"
    members = [RdMember(cluster, group, topic, strategy)]
    try:
        wait_for(lambda: owned_once([m.assignment for m in members]), 60, "one member owns all")
        members.append(RdMember(cluster, group, topic, strategy))
        members.append(RdMember(cluster, group, topic, strategy))
        wait_for(lambda: owned_once([m.assignment for m in members]), 60, "three members")
        assert sorted(len(m.assignment) for m in members) == [2, 2, 2]
        leader = members.pop(0)  # the first joiner led the group
        leader.leave()
        wait_for(lambda: owned_once([m.assignment for m in members]), 60, "after the leader left")
        assert sorted(len(m.assignment) for m in members) == [3, 3]
        members.pop().leave()
        wait_for(lambda: owned_once([m.assignment for m in members]), 60, "one member left")
        assert not any(m.errors for m in members), [m.errors for m in members]
    finally:
        for m in members:
            m.leave()


def test_librdkafka_static_member_restarts_without_a_rebalance(cluster: Cluster) -> None:
    """KIP-345: a member with group.instance.id that closes (no LeaveGroup for static
    members) and comes back within its session gets its partitions back, and the
    coordinator counts no rebalance."""
    topic = new_topic(cluster, "rd-static")
    group = "rd-static-group"
    coordinator = find_coordinator(cluster, group)
    members = [
        RdMember(cluster, group, topic, "range", **{"group.instance.id": f"static-{i}"})
        for i in range(2)
    ]
    try:
        wait_for(lambda: owned_once([m.assignment for m in members]), 60, "two static members")
        before = {i: set(m.assignment) for i, m in enumerate(members)}
        rebalances = cluster.brokers[coordinator].metrics()["quorum_broker_group_rebalances_total"]
        members.pop().leave()
        members.append(
            RdMember(cluster, group, topic, "range", **{"group.instance.id": "static-1"})
        )
        wait_for(lambda: members[1].assignment == before[1], 30, "static-1 back on its share")
        assert members[0].assignment == before[0]
        after = cluster.brokers[coordinator].metrics()["quorum_broker_group_rebalances_total"]
        assert after == rebalances
    finally:
        for m in members:
            m.leave()


SILENT_MEMBER = """
import sys, time
from confluent_kafka import Consumer
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
              "session.timeout.ms": 6000, "heartbeat.interval.ms": 300,
              "partition.assignment.strategy": "range", "enable.auto.commit": False})
c.subscribe([sys.argv[3]])
while True:
    c.poll(0.1)
    if c.assignment():
        print("assigned", flush=True)
"""


def test_librdkafka_silent_member_is_removed_after_the_session_timeout(
    cluster: Cluster, tmp_path: Path
) -> None:
    topic = new_topic(cluster, "rd-silent")
    group = "rd-silent-group"
    member = RdMember(cluster, group, topic, "range")
    silent = subprocess.Popen(
        [sys.executable, "-c", SILENT_MEMBER, bootstrap(cluster), group, topic],
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        wait_for(lambda: len(member.assignment) == PARTITIONS // 2, 60, "two members share")
        os.killpg(silent.pid, signal.SIGKILL)  # no LeaveGroup: it just goes silent
        silent.wait(10)
        killed_at = time.monotonic()
        wait_for(lambda: member.assignment == set(range(PARTITIONS)), 60, "the survivor owns all")
        # removed only once its session (6 s) ran out, not at once
        assert time.monotonic() - killed_at > 3
    finally:
        if silent.poll() is None:
            os.killpg(silent.pid, signal.SIGKILL)
            silent.wait(10)
        member.leave()


# ------------------------------------------------------------------ aiokafka


def test_aiokafka_round_robin_members(cluster: Cluster) -> None:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

    topic = new_topic(cluster, "aio-rr")

    async def go() -> None:
        def member() -> AIOKafkaConsumer:
            return AIOKafkaConsumer(
                topic,
                bootstrap_servers=bootstrap(cluster),
                group_id="aio-group",
                partition_assignment_strategy=(RoundRobinPartitionAssignor,),
                session_timeout_ms=6000,
                heartbeat_interval_ms=300,
                enable_auto_commit=False,
                metadata_max_age_ms=1000,
            )

        async def settle(consumers: list[AIOKafkaConsumer], sizes: list[int]) -> None:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                await asyncio.gather(*(c.getmany(timeout_ms=100) for c in consumers))
                held = [{tp.partition for tp in c.assignment()} for c in consumers]
                if owned_once(held) and sorted(len(h) for h in held) == sizes:
                    return
            raise AssertionError(f"no settled assignment: {held}")

        consumers = [member(), member()]
        for c in consumers:
            await c.start()
        try:
            await settle(consumers, [3, 3])
            third = member()
            await third.start()
            consumers.append(third)
            await settle(consumers, [2, 2, 2])
            gone = consumers.pop(0)
            await gone.stop()  # LeaveGroup
            await settle(consumers, [3, 3])
        finally:
            for c in consumers:
                await c.stop()

    asyncio.run(go())


# ---------------------------------------------------------------------- kcat


def test_kcat_consumes_as_a_group(cluster: Cluster) -> None:
    topic = new_topic(cluster, "kcat-group", partitions=3)
    values = produce(cluster, topic, 60)
    done = subprocess.run(
        [
            "kcat",
            "-b",
            bootstrap(cluster),
            "-G",
            "kcat-group",
            "-X",
            "auto.offset.reset=earliest",
            "-e",
            "-q",
            "-f",
            "%s\\n",
            topic,
        ],
        capture_output=True,
        timeout=90,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert sorted(done.stdout.split()) == sorted(values)


# ------------------------------------------------ offsets across a coordinator kill


def consume_committing(
    cluster: Cluster, group: str, topic: str, limit: int, timeout_s: float = 90
) -> list[bytes]:
    """One librdkafka member reads up to `limit` records, committing each batch
    synchronously, then leaves."""
    from confluent_kafka import Consumer

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap(cluster, tuple(live_brokers(cluster))),
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 300,
        }
    )
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(got) < limit and time.monotonic() < deadline:
            batch = consumer.consume(min(50, limit - len(got)), timeout=0.5)
            batch = [m for m in batch if m.error() is None]
            if batch:
                got += [m.value() for m in batch]
                consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return got


@pytest.mark.parametrize("how", ["SIGKILL", "SIGTERM"])
def test_offsets_survive_the_coordinators_broker_going(cluster: Cluster, how: str) -> None:
    """kill -9 (leadership moves once the controller fences the broker) and a
    controlled shutdown (SIGTERM: the controller moves leadership first)."""
    topic = new_topic(cluster, f"failover-{how}", partitions=3)
    group = f"failover-group-{how}"
    values = produce(cluster, topic, 300)
    first = consume_committing(cluster, group, topic, 150)
    assert len(first) == 150
    coordinator = find_coordinator(cluster, group)
    proc = cluster.brokers[coordinator]
    assert proc.popen is not None
    proc.popen.send_signal(getattr(signal, how))
    proc.popen.wait(30)
    try:
        survivor = next(b for b in BROKERS if b != coordinator)
        wait_for(
            lambda: find_coordinator(cluster, group, via=survivor) != coordinator,
            60,
            "a new coordinator",
        )
        rest = consume_committing(cluster, group, topic, 150)
        assert sorted(first + rest) == sorted(values)  # resumed where it committed
        assert not set(first) & set(rest)
    finally:
        cluster.start_brokers(coordinator)
        wait_all_online(cluster)


# ------------------------------------------------------------- quorumctl groups


def test_kcat_and_quorumctl_groups_agree_on_members_and_lag(cluster: Cluster) -> None:
    topic = new_topic(cluster, "kcat-lag", partitions=3)
    values = produce(cluster, topic, 90)
    kcat = subprocess.Popen(
        [
            "kcat",
            "-b",
            bootstrap(cluster),
            "-G",
            "lag-group",
            "-X",
            "auto.offset.reset=earliest",
            "-X",
            "auto.commit.interval.ms=100",
            "-X",
            "client.id=kcat-member",
            "-q",
            "-f",
            "%s\\n",
            topic,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:

        def rows() -> list[dict[str, Any]]:
            return ctl_json(cluster, "groups", "describe", "--group", "lag-group")  # type: ignore[no-any-return]

        def settled() -> bool:
            got = rows()
            return len(got) == 3 and all(r["LAG"] == 0 for r in got)

        wait_for(settled, 60, "kcat to consume and commit everything")
        got = rows()
        assert {(r["TOPIC"], r["PARTITION"]) for r in got} == {(topic, p) for p in range(3)}
        assert sum(r["LOG-END-OFFSET"] for r in got) == len(values)
        assert len({r["CONSUMER-ID"] for r in got}) == 1 and got[0]["CONSUMER-ID"] != "-"
        [member] = ctl_json(cluster, "groups", "describe", "--group", "lag-group", "--members")
        assert member["CLIENT-ID"] == "kcat-member" and member["#PARTITIONS"] == 3
        assert member["CONSUMER-ID"].startswith("kcat-member-")
        [state] = ctl_json(cluster, "groups", "describe", "--group", "lag-group", "--state")
        assert (state["STATE"], state["#MEMBERS"], state["ASSIGNMENT-STRATEGY"]) == (
            "Stable",
            1,
            "range",
        )
        assert "lag-group" in ctl_json(cluster, "groups", "list")
        refused = ctl(
            cluster,
            "groups",
            "reset-offsets",
            "--group",
            "lag-group",
            "--topic",
            topic,
            "--to-earliest",
            "--execute",
        )
        assert refused.returncode != 0 and "inactive" in refused.stderr
    finally:
        kcat.send_signal(signal.SIGTERM)  # a clean close: LeaveGroup
        kcat.wait(30)
    assert sorted(kcat.stdout.read().split()) == sorted(values)  # type: ignore[union-attr]
    wait_for(
        lambda: (
            ctl_json(cluster, "groups", "describe", "--group", "lag-group", "--state")[0]["STATE"]
            == "Empty"
        ),
        30,
        "the group empty",
    )
    dry = ctl_json(
        cluster,
        "groups",
        "reset-offsets",
        "--group",
        "lag-group",
        "--topic",
        topic,
        "--to-earliest",
        "--dry-run",
    )
    assert [r["NEW-OFFSET"] for r in dry] == [0, 0, 0]
    assert all(
        r["LAG"] == 0 for r in ctl_json(cluster, "groups", "describe", "--group", "lag-group")
    )
    ctl_json(
        cluster,
        "groups",
        "reset-offsets",
        "--group",
        "lag-group",
        "--topic",
        topic,
        "--to-offset",
        "5",
        "--execute",
    )
    after = ctl_json(cluster, "groups", "describe", "--group", "lag-group")
    assert [r["CURRENT-OFFSET"] for r in after] == [5, 5, 5]
    assert sum(r["LAG"] for r in after) == len(values) - 15
    deleted = ctl_json(cluster, "groups", "delete", "--group", "lag-group")
    assert deleted == [{"GROUP": "lag-group", "ERROR": "-"}]
    assert "lag-group" not in ctl_json(cluster, "groups", "list")


# ------------------------------------------------- no record twice across rebalances


class CommittingMember:
    """A librdkafka member that reads a few records at a time and commits them
    synchronously before reading on (so a rebalance finds them committed)."""

    def __init__(self, cluster: Cluster, group: str, topic: str, name: str) -> None:
        from confluent_kafka import Consumer

        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap(cluster),
                "group.id": group,
                "client.id": name,
                "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 300,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "partition.assignment.strategy": "roundrobin",
            }
        )
        self.consumer.subscribe([topic])
        self.got: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            batch = [m for m in self.consumer.consume(5, timeout=0.1) if m.error() is None]
            if batch:
                self.consumer.commit(asynchronous=False)
                self.got += [m.value() for m in batch]
                time.sleep(0.02)  # slow readers: rebalances land mid-stream

    def leave(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.consumer.close()


def test_no_record_is_read_twice_across_rebalances_by_committing_members(
    cluster: Cluster,
) -> None:
    topic = new_topic(cluster, "rd-exactly")
    # Enough that the third member's join lands mid-stream even on a loaded machine:
    # with 1,200 the first two (about 400 records/s together) once read everything
    # while it joined, and it never read its 50 (a clean-clone CI run, 2026-11-26).
    values = produce(cluster, topic, 3000)
    group = "rd-exactly-group"
    members = [CommittingMember(cluster, group, topic, "m0")]
    done: list[CommittingMember] = []
    try:
        wait_for(lambda: len(members[0].got) >= 100, 60, "the first member reading")
        members.append(CommittingMember(cluster, group, topic, "m1"))
        wait_for(lambda: len(members[1].got) >= 50, 60, "the second member reading")
        members.append(CommittingMember(cluster, group, topic, "m2"))
        try:
            wait_for(lambda: len(members[2].got) >= 50, 60, "the third member reading")
        except AssertionError as err:  # say how far each got: a stuck rebalance or a race
            counts = [len(m.got) for m in members]
            raise AssertionError(f"{err}; read so far {counts} of {len(values)}") from None
        first = members.pop(0)
        first.leave()
        done.append(first)
        wait_for(lambda: sum(len(m.got) for m in members + done) >= len(values), 120, "all read")
    finally:
        for m in members:
            m.leave()
    read = [v for m in members + done for v in m.got]
    assert sorted(read) == sorted(values)  # each record once, across three rebalances


# ------------------------------------------------------------------ kafka-python


def test_kafka_python_group_consumer_commits_and_resumes(cluster: Cluster) -> None:
    from kafka import KafkaConsumer

    topic = new_topic(cluster, "kp-group", partitions=3)
    values = produce(cluster, topic, 60)

    def read(limit: int) -> list[bytes]:
        consumer = KafkaConsumer(
            topic,
            bootstrap_servers=bootstrap(cluster),
            group_id="kp-group",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=6000,
            heartbeat_interval_ms=300,
        )
        got: list[bytes] = []
        try:
            deadline = time.monotonic() + 60
            while len(got) < limit and time.monotonic() < deadline:
                for records in consumer.poll(timeout_ms=500, max_records=10).values():
                    got += [r.value for r in records]
                consumer.commit()
        finally:
            consumer.close()
        return got

    first = read(30)
    rest = read(len(values) - len(first))
    assert sorted(first + rest) == sorted(values)
    assert not set(first) & set(rest)
