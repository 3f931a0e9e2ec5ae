"""Consumer-group rebalances and offset commits on three real brokers.

A cluster (three controllers, three brokers; `__consumer_offsets` with RF 3,
`group.initial.rebalance.delay.ms=0`) is started in a temporary directory, as
the integration tests start one. Then:

* `join_rebalance_s{members=N}`: N aiokafka members (all in this process, one
  event loop) of one group on a topic of N partitions have settled; one more
  member starts; the time from its start until every member holds its new
  assignment (all N+1 assignments disjoint and covering the topic, each member
  with at least one partition when partitions allow); beside it, the same
  rebalance as the coordinator's metric times it.
* `leave_rebalance_s{members=N}`: one member stops (LeaveGroup); the time until
  the others hold the new assignment.
* `coordinator_failover_s{members=N}`: the coordinator's broker is SIGKILLed; the
  time until every member talks to the new coordinator (the leader of the
  group's offsets partition, elected once the controller has fenced the killed
  broker: `broker.session.timeout.ms`, 9 s) and holds a full assignment; split
  into the election, the new coordinator's readiness and the members' moves.
* `offset_commits_per_s`: OffsetCommit requests (one partition each, acks=all
  to RF 3) from `--connections` connections at once, to groups of one
  coordinator, with each broker's CPU per commit.
* `brokers_cpu_s` (with `--no-failover`): each broker's CPU over a group size's
  rebalances.

    .venv/bin/python bench/groups.py [--members 10,100,500] [--commit-seconds 5]
        [--connections 16,64] [--commit-groups 1,8] [--no-failover] [--member-processes N]

With `--member-processes N` (N > 1) only the failover is measured, the members
spread over N child processes (bench/group_members.py).

One JSON object per measurement on stdout; progress on stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # process_logs

from kio.schema.errors import ErrorCode
from kio.schema.request_header.v2.header import RequestHeader
from kio.static.primitive import i16, i32
from report import emit, process_cpu_s, say

from broker_agent.groups.placement import OFFSETS_TOPIC, partition_for
from broker_agent.kafka import codec
from broker_agent.kafka.versions import ApiKey
from tests.integration.controller_cluster import Cluster, Proc, ctl_json
from tests.integration.groups_cluster import (
    OFFSETS_PARTITIONS,
    bootstrap,
    find_coordinator,
    groups_cluster,
    offsets_leader,
)
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


def rebalance_seconds(broker: Proc) -> tuple[float, float]:
    """The coordinator's rebalance histogram: (sum of seconds, count)."""
    values = broker.metrics()
    name = "quorum_broker_group_rebalance_seconds"
    return values.get(f"{name}_sum", 0.0), values.get(f"{name}_count", 0.0)


def coordinator_part(broker: Proc, before: tuple[float, float]) -> float | None:
    """The rebalances since `before` as the coordinator's metric times them: from
    the join or leave that started one to the leader's assignment, the others'
    rejoins (after their next heartbeat) included, but not the new member's own
    start-up nor the members' handling of their answers, so a figure that the
    members' one process makes slow can be told apart."""
    total, count = rebalance_seconds(broker)
    done = count - before[1]
    return round((total - before[0]) / done, 3) if done else None


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
            # Nothing is produced: with 500 members in one process, idle fetches
            # long-poll 5 s (not aiokafka's 0.5 s) so that they do not crowd out
            # heartbeats and joins. Smaller groups keep the default: a broker
            # answers a connection's requests in order (as Kafka does), so a
            # FindCoordinator sent behind a parked fetch waits for it, up to
            # fetch_max_wait_ms, at a coordinator failover.
            fetch_max_wait_ms=5000 if members > 100 else 500,
            request_timeout_ms=40_000,
        )

    consumers = [member() for _ in range(members)]
    await asyncio.gather(*(c.start() for c in consumers))
    try:
        await wait_settled(consumers, members + 1)
        coordinator = cluster.brokers[find_coordinator(cluster, group)]
        late = member()
        before = rebalance_seconds(coordinator)
        started = time.monotonic()
        await late.start()
        consumers.append(late)
        await wait_settled(consumers, members + 1)
        emit(
            measurement="join_rebalance_s",
            members=members + 1,
            seconds=round(time.monotonic() - started, 3),
            coordinator_rebalance_s=coordinator_part(coordinator, before),
            load_average=round(os.getloadavg()[0], 1),
        )
        gone = consumers.pop(0)
        before = rebalance_seconds(coordinator)
        started = time.monotonic()
        await gone.stop()
        await wait_settled(consumers, members + 1)
        emit(
            measurement="leave_rebalance_s",
            members=members,
            seconds=round(time.monotonic() - started, 3),
            coordinator_rebalance_s=coordinator_part(coordinator, before),
            load_average=round(os.getloadavg()[0], 1),
        )
        if kill:
            await failover(cluster, group, consumers, members)
            cluster.start_brokers(find_killed(cluster))
            cluster.wait_until(
                lambda: all(r["State"] == "ONLINE" for r in ctl_json(cluster, "brokers", "list")),
                60,
                "the killed broker back ONLINE",
            )
    finally:
        await asyncio.gather(*(c.stop() for c in consumers), return_exceptions=True)


def find_killed(cluster: Cluster) -> int:
    return next(b for b, p in cluster.brokers.items() if not p.alive())


async def failover(cluster: Cluster, group: str, consumers: list[Any], members: int) -> None:
    """SIGKILL the coordinator's broker; measure, from the kill: when the group's
    offsets partition has a new leader in a survivor's metadata (the controller
    fences the silent broker after `broker.session.timeout.ms`, then elects), when
    each member talks to the new coordinator, and when all do with a whole
    assignment. The new leader loads the group (Stable, its members and assignments
    from the log): members that find it through FindCoordinator heartbeat on
    without a rebalance. The new coordinator's own load time is read from its log."""
    coordinator = find_coordinator(cluster, group)
    proc = cluster.brokers[coordinator]
    assert proc.popen is not None
    partition = partition_for(group, OFFSETS_PARTITIONS)
    started = time.monotonic()
    proc.popen.send_signal(signal.SIGKILL)
    proc.popen.wait(10)
    elected: dict[str, float] = {}

    def watch_leader() -> None:
        while time.monotonic() - started < 180:
            try:
                leader = offsets_leader(cluster, partition)
            except OSError:
                leader = -1
            if leader >= 0 and leader != coordinator:
                elected["at"], elected["leader"] = time.monotonic(), float(leader)
                break
            time.sleep(0.02)
        # The new coordinator answers FindCoordinator itself once it has loaded.
        while time.monotonic() - started < 180:
            with KafkaSocket("127.0.0.1", cluster.brokers[int(elected["leader"])].port) as s:
                answer = s.request(ApiKey.FIND_COORDINATOR, 1, {"key": group, "key_type": 0})
            if answer.error_code == ErrorCode.none:
                elected["ready"] = time.monotonic()
                return
            time.sleep(0.01)

    watcher = asyncio.create_task(asyncio.to_thread(watch_leader))
    moved_at: dict[int, float] = {}
    deadline = started + 180
    while time.monotonic() < deadline:
        now = time.monotonic()
        for i, c in enumerate(consumers):
            node = c._coordinator.coordinator_id
            if i not in moved_at and node is not None and node != coordinator:
                moved_at[i] = now
        if len(moved_at) == len(consumers) and settled(consumers, members + 1):
            break
        await asyncio.sleep(0.01)
    else:
        raise TimeoutError("members never moved to the new coordinator")
    done = time.monotonic()
    await watcher
    new = int(elected["leader"])
    loads = re.findall(
        rf"loaded {OFFSETS_TOPIC}-{partition} .* in (\d+) ms", cluster.brokers[new].log_text()
    )
    moved = sorted(t - elected["at"] for t in moved_at.values())
    emit(
        measurement="coordinator_failover_s",
        members=members,
        seconds=round(done - started, 3),
        leader_elected_s=round(elected["at"] - started, 3),
        coordinator_ready_after_election_s=round(elected["ready"] - elected["at"], 3),
        after_election_s=round(done - elected["at"], 3),
        new_coordinator_load_ms=int(loads[-1]) if loads else None,
        members_moved_after_election_s={
            "first": round(moved[0], 3),
            "median": round(moved[len(moved) // 2], 3),
            "last": round(moved[-1], 3),
        },
        load_average=round(os.getloadavg()[0], 1),
    )


class MemberProcess:
    """One bench/group_members.py child: some of the group's members."""

    def __init__(
        self,
        cluster: Cluster,
        topic: str,
        group: str,
        count: int,
        wait_ms: int,
        debug_log: Path | None = None,
    ) -> None:
        log = ["--debug-log", str(debug_log)] if debug_log is not None else []
        self.popen = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve().parent / "group_members.py"),
             "--bootstrap", bootstrap(cluster), "--topic", topic, "--group", group,
             "--count", str(count), "--fetch-wait-ms", str(wait_ms), *log],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )  # fmt: skip

    def ask(self, command: str) -> dict[str, Any]:
        assert self.popen.stdin is not None and self.popen.stdout is not None
        self.popen.stdin.write(command + "\n")
        self.popen.stdin.flush()
        line = self.popen.stdout.readline()
        if not line:
            raise RuntimeError(f"a member process ended (exit {self.popen.poll()})")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def stop(self) -> None:
        try:
            self.ask("stop")
            self.popen.wait(30)
        except (OSError, RuntimeError, subprocess.TimeoutExpired):
            self.popen.kill()
            self.popen.wait()


def settled_lists(assigned: list[list[int]], partitions: int) -> bool:
    flat = [p for member in assigned for p in member]
    enough = all(assigned) if partitions >= len(assigned) else True
    return sorted(flat) == list(range(partitions)) and enough


def failover_in_processes(
    cluster: Cluster, members: int, processes: int, profile_dir: Path | None = None
) -> None:
    """The coordinator failover with the members spread over `processes` child
    processes (bench/group_members.py), aiokafka's default fetch wait: the same
    measurement as `failover`, read from the children's wall clocks."""
    topic, group = f"bench-groups-{members}-p{processes}", f"bench-{members}-p{processes}"
    ctl_json(cluster, "topics", "create", topic, "--partitions", str(members),
             "--replication-factor", "3")  # fmt: skip
    wait_for_topic_everywhere(cluster, topic)
    counts = [members // processes + (i < members % processes) for i in range(processes)]
    # With a profile directory, the first child's aiokafka log is kept there too.
    if profile_dir is not None:
        profile_dir.mkdir(parents=True, exist_ok=True)
    logs = [
        profile_dir / "members-0.log" if profile_dir and i == 0 else None for i in range(processes)
    ]
    children = [MemberProcess(cluster, topic, group, n, 500, logs[i]) for i, n in enumerate(counts)]
    try:
        for child in children:
            child.ask("ready")

        def poll() -> list[dict[str, Any]]:
            return [child.ask("poll") for child in children]

        def whole(answers: list[dict[str, Any]]) -> bool:
            return settled_lists([m for a in answers for m in a["assigned"]], members)

        deadline = time.time() + 180
        while not whole(poll()):
            if time.time() > deadline:
                raise TimeoutError("no settled assignment")
            time.sleep(0.05)
        coordinator = find_coordinator(cluster, group)
        for child in children:
            child.ask(f"watch {coordinator}")
        proc = cluster.brokers[coordinator]
        assert proc.popen is not None
        partition = partition_for(group, OFFSETS_PARTITIONS)
        survivors = {b: p for b, p in cluster.brokers.items() if b != coordinator and p.popen}
        window = FailoverWindow(survivors, [c.popen.pid for c in children], profile_dir)
        started = window.marks["killed"] = time.time()
        proc.popen.send_signal(signal.SIGKILL)
        proc.popen.wait(10)
        elected = -1.0
        while time.time() < deadline:
            leader = -1
            with contextlib.suppress(OSError):
                leader = offsets_leader(cluster, partition)
            if leader >= 0 and leader != coordinator:
                elected = window.marks["elected"] = time.time()
                break
            time.sleep(0.02)
        while time.time() < started + 180:
            answers = poll()
            moved = [t for a in answers for t in a["moved"]]
            if all(t is not None for t in moved) and whole(answers):
                break
            time.sleep(0.05)
        else:
            raise TimeoutError("members never moved to the new coordinator")
        done = window.marks["done"] = time.time()
        after = sorted(t - elected for t in moved)
        emit(
            measurement="coordinator_failover_s",
            members=members,
            member_processes=processes,
            killed=coordinator,
            killed_at=time.strftime("%H:%M:%S", time.localtime(started)) + f"{started % 1:.3f}"[1:],
            seconds=round(done - started, 3),
            leader_elected_s=round(elected - started, 3),
            after_election_s=round(done - elected, 3),
            members_moved_after_election_s={
                "first": round(after[0], 3),
                "median": round(after[len(after) // 2], 3),
                "last": round(after[-1], 3),
            },
            load_average=round(os.getloadavg()[0], 1),
        )
        window.report(members, done - started)
        cluster.start_brokers(coordinator)
        cluster.wait_until(
            lambda: all(r["State"] == "ONLINE" for r in ctl_json(cluster, "brokers", "list")),
            60,
            "the killed broker back ONLINE",
        )
    finally:
        for child in children:
            child.stop()


def machine_busy_s() -> float:
    """CPU seconds the whole machine has been busy (all cores), from /proc/stat."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


REQUESTS = "quorum_broker_kafka_requests_total"
REQUEST_SECONDS = "quorum_broker_kafka_request_seconds_sum"


def per_api(values: dict[str, float], name: str) -> dict[str, float]:
    """{api: value} of a metric labelled by api (summed over its other labels)."""
    out: dict[str, float] = {}
    for key, value in values.items():
        if key.startswith(name + "{"):
            api = re.search(r'api="([^"]+)"', key)
            if api:
                out[api.group(1)] = out.get(api.group(1), 0.0) + value
    return out


class FailoverWindow:
    """What the surviving brokers did from the kill to the end of a failover: their
    requests by API (count, and handling seconds from the request metrics), their CPU
    and the member processes' CPU, and (with a profile directory) a py-spy profile of
    each survivor, so the window's time can be told apart by where it went."""

    def __init__(self, survivors: dict[int, Proc], member_pids: list[int], out: Path | None):
        self.survivors = survivors
        self.member_pids = member_pids
        self.metrics = {b: p.metrics() for b, p in survivors.items()}
        self.cpu = {b: process_cpu_s(p.popen.pid) for b, p in survivors.items() if p.popen}
        self.members_cpu = sum(process_cpu_s(pid) for pid in member_pids)
        self.samples: list[tuple[float, float, float, float]] = []
        self.marks: dict[str, float] = {}
        self._sampling = threading.Event()
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()
        self.profilers: list[subprocess.Popen[bytes]] = []
        py_spy = Path(sys.executable).parent / "py-spy"
        if out is not None and py_spy.exists():
            out.mkdir(parents=True, exist_ok=True)
            for b, p in survivors.items():
                assert p.popen is not None
                command = [str(py_spy), "record", "--pid", str(p.popen.pid), "--format", "raw",
                           "--output", str(out / f"broker-{b}-failover.txt"), "--duration", "20",
                           "--rate", "100", "--nonblocking"]  # fmt: skip
                self.profilers.append(
                    subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                )
            # And one member process (the second: the first may keep a DEBUG log).
            member = member_pids[min(1, len(member_pids) - 1)]
            command = [str(py_spy), "record", "--pid", str(member), "--format", "raw",
                       "--output", str(out / "members-1-failover.txt"), "--duration", "20",
                       "--rate", "100", "--nonblocking"]  # fmt: skip
            self.profilers.append(
                subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            )

    def _sample(self) -> None:
        """Every 0.2 s: (wall time, survivors' CPU, members' CPU, the machine's busy
        CPU), all in seconds, for the cores each used in each phase of the failover."""
        pids = [p.popen.pid for p in self.survivors.values() if p.popen]
        while not self._sampling.is_set():
            with contextlib.suppress(OSError):
                self.samples.append(
                    (
                        time.time(),
                        sum(process_cpu_s(pid) for pid in pids),
                        sum(process_cpu_s(pid) for pid in self.member_pids),
                        machine_busy_s(),
                    )
                )
            self._sampling.wait(0.2)

    def cores(self, start: float, end: float) -> dict[str, float]:
        """Cores used between two wall times by the survivors, the members, and
        everything else on the machine (controllers, the bench, other work)."""
        inside = [s for s in self.samples if start <= s[0] <= end]
        if len(inside) < 2:
            return {}
        (t0, b0, m0, all0), (t1, b1, m1, all1) = inside[0], inside[-1]
        span = max(t1 - t0, 1e-9)
        brokers, members = (b1 - b0) / span, (m1 - m0) / span
        return {
            "survivors": round(brokers, 2),
            "members": round(members, 2),
            "rest": round((all1 - all0) / span - brokers - members, 2),
        }

    def report(self, members: int, seconds: float) -> None:
        self._sampling.set()
        self._sampler.join()
        killed, elected, done = (self.marks.get(k, 0.0) for k in ("killed", "elected", "done"))
        emit(
            measurement="failover_window_cores",
            members=members,
            kill_to_election=self.cores(killed, elected),
            election_to_done=self.cores(elected, done),
            machine_cores=os.cpu_count(),
            load_average=[round(x, 1) for x in os.getloadavg()],
        )
        for b, p in self.survivors.items():
            assert p.popen is not None
            now = p.metrics()
            counts, before = per_api(now, REQUESTS), per_api(self.metrics[b], REQUESTS)
            spent, spent_before = (
                per_api(now, REQUEST_SECONDS),
                per_api(self.metrics[b], REQUEST_SECONDS),
            )
            requests = {
                api: {
                    "count": int(n - before.get(api, 0)),
                    "handler_s": round(spent.get(api, 0) - spent_before.get(api, 0), 2),
                }
                for api, n in sorted(counts.items(), key=lambda kv: before.get(kv[0], 0) - kv[1])
                if n > before.get(api, 0)
            }
            emit(
                measurement="failover_window_broker",
                members=members,
                broker=b,
                seconds=round(seconds, 3),
                cpu_s=round(process_cpu_s(p.popen.pid) - self.cpu[b], 2),
                requests=requests,
            )
        emit(
            measurement="failover_window_members",
            members=members,
            processes=len(self.member_pids),
            cpu_s=round(sum(process_cpu_s(pid) for pid in self.member_pids) - self.members_cpu, 2),
            seconds=round(seconds, 3),
            load_average=[round(x, 1) for x in os.getloadavg()],
        )
        for profiler in self.profilers:
            with contextlib.suppress(subprocess.TimeoutExpired):
                profiler.wait(30)


SENTINEL_OFFSET = 0x0123456789ABCDEF
IDLE_S = 3.0


class CommitFrames:
    """OffsetCommit v8 frames (one partition, generation -1) made from one template
    encoded by kio: each request only patches its correlation id and offset in, so
    the load generator spends microseconds per commit, not the coordinator's share."""

    def __init__(self, group: str, topic: str, partition: int) -> None:
        cls = codec.request_class(ApiKey.OFFSET_COMMIT, 8)
        body = codec.build(
            cls,
            {
                "group_id": group,
                "generation_id_or_member_epoch": -1,
                "member_id": "",
                "group_instance_id": None,
                "topics": [
                    {
                        "name": topic,
                        "partitions": [
                            {
                                "partition_index": partition,
                                "committed_offset": SENTINEL_OFFSET,
                                "committed_leader_epoch": -1,
                                "committed_metadata": None,
                            }
                        ],
                    }
                ],
            },
        )
        header = RequestHeader(
            request_api_key=i16(ApiKey.OFFSET_COMMIT),
            request_api_version=i16(8),
            correlation_id=i32(0),
            client_id="bench",
        )
        self.template = codec.encode_request(header, body)
        self.offset_at = self.template.index(struct.pack(">q", SENTINEL_OFFSET))

    def frame(self, correlation_id: int, offset: int) -> bytes:
        out = bytearray(self.template)
        struct.pack_into(">i", out, 8, correlation_id)  # size, api key, version, then it
        struct.pack_into(">q", out, self.offset_at, offset)
        return bytes(out)


def commit_error(frame: bytes) -> int:
    _, body = codec.decode_response(frame, ApiKey.OFFSET_COMMIT, 8)
    return int(body.topics[0].partitions[0].error_code)


async def commit_loop(
    port: int, frames: CommitFrames, stop_at: float, counts: list[int], i: int, errors: list[int]
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    ok_tail: bytes | None = None  # an answer without error, past its correlation id
    try:
        correlation = 0
        while time.monotonic() < stop_at:
            correlation += 1
            writer.write(frames.frame(correlation, correlation))
            size = struct.unpack(">i", await reader.readexactly(4))[0]
            answer = await reader.readexactly(size)
            if struct.unpack_from(">i", answer)[0] != correlation:
                raise AssertionError("answers out of order")
            if answer[4:] != ok_tail:
                code = commit_error(answer)
                if code != ErrorCode.none:
                    errors.append(code)
                    continue
                ok_tail = answer[4:]
            counts[i] += 1
    finally:
        writer.close()


def coordinator_groups(cluster: Cluster, count: int) -> tuple[int, list[str]]:
    """`count` group ids whose coordinator is one broker (spread over the offsets
    partitions it leads, as many groups of one coordinator would be)."""
    coordinator = find_coordinator(cluster, "bench-commit-group-0")
    groups = []
    for n in range(10 * count + 100):
        group = f"bench-commit-group-{n}"
        if find_coordinator(cluster, group) == coordinator:
            groups.append(group)
        if len(groups) == count:
            return coordinator, groups
    raise AssertionError(f"fewer than {count} groups on broker {coordinator}")


def commits_per_second(cluster: Cluster, seconds: float, connections: int, groups: int) -> None:
    """OffsetCommit requests of one partition each, `connections` at once (each one
    request in flight at a time, as a consumer commits), over `groups` groups of one
    coordinator; with the coordinator's CPU per commit, so a figure from a shared
    machine can be read as the capacity of one core."""
    topic = "bench-commits"
    if not any(t["Topic"] == topic for t in ctl_json(cluster, "topics", "list")):
        ctl_json(cluster, "topics", "create", topic, "--partitions", "1",
                 "--replication-factor", "3")  # fmt: skip
        wait_for_topic_everywhere(cluster, topic)
    coordinator, names = coordinator_groups(cluster, groups)
    frames = [CommitFrames(names[i % groups], topic, 0) for i in range(connections)]
    port = cluster.brokers[coordinator].port
    counts = [0] * connections
    errors: list[int] = []

    async def run() -> float:
        started = time.monotonic()
        stop_at = started + seconds
        await asyncio.gather(
            *(commit_loop(port, frames[i], stop_at, counts, i, errors) for i in range(connections))
        )
        return time.monotonic() - started

    pids = {b: p.popen.pid for b, p in cluster.brokers.items() if p.popen is not None}
    # What the brokers burn with no commits (heartbeats, metadata, replica fetches
    # of idle partitions), subtracted so the per-commit cost is the commits' own.
    idle_before = {b: process_cpu_s(pid) for b, pid in pids.items()}
    time.sleep(IDLE_S)
    cpu_before = {b: process_cpu_s(pid) for b, pid in pids.items()}
    idle_rate = {b: (cpu_before[b] - idle_before[b]) / IDLE_S for b in pids}
    own_before = time.process_time()
    elapsed = asyncio.run(run())
    total = max(sum(counts), 1)
    used = {
        b: max(process_cpu_s(pid) - cpu_before[b] - idle_rate[b] * elapsed, 0.0)
        for b, pid in pids.items()
    }
    coordinator_cpu = used[coordinator]
    followers_cpu = sum(cpu for b, cpu in used.items() if b != coordinator)
    emit(
        measurement="offset_commits_per_s",
        connections=connections,
        groups=groups,
        commits_per_s=round(sum(counts) / elapsed),
        errors=len(errors),
        coordinator_cpu_us_per_commit=round(coordinator_cpu / total * 1e6),
        followers_cpu_us_per_commit=round(followers_cpu / total * 1e6),
        client_cpu_us_per_commit=round((time.process_time() - own_before) / total * 1e6),
        commits_per_coordinator_cpu_s=round(total / max(coordinator_cpu, 1e-9)),
        load_average=round(os.getloadavg()[0], 1),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--members", default="10,100", help="group sizes, comma-separated")
    parser.add_argument("--commit-seconds", type=float, default=5.0, help="0: no commits")
    parser.add_argument(
        "--connections", default="16,64", help="commit connections, comma-separated"
    )
    parser.add_argument("--commit-groups", default="1,8", help="groups of one coordinator")
    parser.add_argument("--no-failover", action="store_true")
    parser.add_argument(
        "--member-processes",
        type=int,
        default=1,
        help="over 1: only the failover, members spread over this many processes",
    )
    parser.add_argument(
        "--profile-dir",
        type=Path,
        help="with --member-processes: py-spy profiles of the surviving brokers over the "
        "failover (collapsed stacks), when py-spy is installed",
    )
    args = parser.parse_args()
    profile_dir = args.profile_dir
    with tempfile.TemporaryDirectory(prefix="bench-groups-") as root:
        say("starting three controllers and three brokers")
        with groups_cluster(Path(root)) as cluster:
            find_coordinator(cluster, "warm-up")  # creates __consumer_offsets
            for groups in (int(g) for g in args.commit_groups.split(",")):
                for connections in (int(c) for c in args.connections.split(",")):
                    if args.commit_seconds > 0:
                        commits_per_second(cluster, args.commit_seconds, connections, groups)
            for size in (int(s) for s in args.members.split(",") if s):
                say(f"{size} members")
                if args.member_processes > 1:
                    failover_in_processes(cluster, size, args.member_processes, profile_dir)
                    continue
                pids = {b: p.popen.pid for b, p in cluster.brokers.items() if p.popen}
                before = {b: process_cpu_s(pid) for b, pid in pids.items()}
                asyncio.run(rebalances(cluster, size, kill=not args.no_failover))
                if args.no_failover:  # the same processes throughout
                    emit(
                        measurement="brokers_cpu_s",
                        members=size,
                        seconds={
                            b: round(process_cpu_s(pid) - before[b], 1) for b, pid in pids.items()
                        },
                    )


if __name__ == "__main__":
    main()
