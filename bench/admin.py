"""Topics created per second through a broker's Kafka listener (librdkafka's
AdminClient, forwarded to the active controller) beside the same straight to
the controllers over gRPC (`quorum.admin_client.AdminClient`, what quorumctl
uses, without quorumctl's process start), in the same run on the same cluster.

Three controllers and three brokers on loopback (the integration tests'
launcher), default settings. Each round creates `--topics` topics of one
partition and one replica, in CreateTopics requests of `batch` topics, one
request at a time (each answered once committed; through a broker, a Metadata
request right after would wait for that broker's image: the read fence of
`broker_agent/kafka/forwarding.py`), then deletes them. Rounds come in pairs,
one per path, each from idle brokers, in alternated order (Kafka first in odd
pairs, gRPC first in even ones), after a pair not counted (the warm-up), so the
machine's drift and whatever one round leaves behind hit both paths alike.

With `validate_only` the same requests are validated by the active controller
and answered without a write: the forwarding hop alone, without the commit and
without the brokers applying the new topics.

    .venv/bin/python bench/admin.py [--topics 300 --rounds N --batches 1,100] [--floor 500]
    .venv/bin/python bench/admin.py --batches 100 --rounds 20 --created-only   # the goal at 100

With `--visible`, a third path in the rotation: the same gRPC creates, each
request's time running on until broker 101 (the Kafka path's) answers a Metadata
request (v4, never auto-creating) with the batch: `cost_vs_visible`, the Kafka
path against what a client of the direct path waits for before that broker's
Metadata shows its topics (what the Kafka path's read fence guarantees its
client, issue 36's read-your-writes).

    .venv/bin/python bench/admin.py --batches 100 --rounds 12 --created-only --visible

With `--floor N`, then N empty round trips a round each way (DescribeCluster
through the broker's Kafka listener, answered there; DescribeCluster straight
to the controller over gRPC): the forwarding cost at batch 1 cannot go below
1 - t(gRPC CreateTopics) / (t(gRPC CreateTopics) + t(empty Kafka round trip)),
for created topics and for `validate_only`; and the same at the largest batch,
with N/10 Kafka round trips of that many topics (DescribeTopics, `floor_batch`).

One JSON object per measurement on stdout: path, batch, round, which path went
first in the pair, topics/s and its first ten requests' times; then per batch
the mean and the forwarding cost (1 - kafka / grpc), the same from the median
request time of each path (`forwarding_cost_median`), which a busy machine's
stalls move less than the means, the cost of each pair of rounds (`pair_cost`:
its median, quartiles and range, and `pairs_within_goal`: the figure one run
can be judged by, as a single round of a few requests moves by more than the
goal on a shared machine), and each path's median request time by its place in
the round (`request_ms_by_position`: the first request starts from idle
brokers, the later ones run into the logs the brokers are still opening for
the earlier ones). Beside them, the CPU the three brokers and the three
controllers spent per topic over each path's rounds, creates and deletes
(`brokers_cpu_ms_per_topic`, `controllers_cpu_ms_per_topic`, from /proc): what
a change saves, in a figure the other processes of a shared machine move less
than times, and the load average before and after. Each round
starts, and its CPU is counted until, the brokers are idle again (the new
logs opened and the deleted ones removed in their worker threads), so one
round's leftovers neither slow nor count in the next.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # process_logs

from report import emit, say

from quorum.admin_client import AdminClient
from quorum.gen import admin_pb2 as api
from tests.integration.controller_cluster import Cluster, Proc, cluster_with_online_brokers

BROKERS = (101, 102, 103)
GOAL = 0.20  # issue 36: the forwarding hop costs at most 20% of the direct throughput
MAX_PLACES = 10  # rounds of more requests print no time per request or place


def names(prefix: str, count: int, batch: int) -> list[list[str]]:
    all_names = [f"{prefix}-{i:05d}" for i in range(count)]
    return [all_names[i : i + batch] for i in range(0, count, batch)]


def warm_up_request(prefix: str, batch: int) -> api.CreateTopicsRequest:
    """What each path's new client sends before its round's clock starts: one
    CreateTopics of the round's size with `validate_only` (nothing is created, no
    log opened). A client's first CreateTopics costs it more than the next ones:
    confluent-kafka's first of 100 topics reached the broker's handler 2.5-3.0 ms
    after it was sent, against 1.3-1.5 ms once the client had sent one
    (bench/admin_hops.py --batch 100 --round-requests 3, four runs and three), a
    one-time cost of the client library that a round of three requests from a new
    client counted in a third of them. The gRPC path warms up the same way."""
    return api.CreateTopicsRequest(validate_only=True, topics=[
        api.CreatableTopic(name=f"{prefix}-warm-{i:05d}", num_partitions=1, replication_factor=1)
        for i in range(batch)
    ])  # fmt: skip


def kafka_round(
    cluster: Cluster, prefix: str, count: int, batch: int, validate_only: bool, took: list[float]
) -> float:
    from confluent_kafka.admin import AdminClient as KafkaAdmin
    from confluent_kafka.admin import NewTopic

    admin = KafkaAdmin({"bootstrap.servers": f"127.0.0.1:{cluster.brokers[101].port}"})
    admin.list_topics(timeout=10)  # connected before the clock starts
    warm = warm_up_request(prefix, batch)
    for future in admin.create_topics(
        [NewTopic(t.name, 1, 1) for t in warm.topics], validate_only=True
    ).values():
        future.result()
    started = time.perf_counter()
    for group in names(prefix, count, batch):
        sent = time.perf_counter()
        futures = admin.create_topics(
            [NewTopic(n, 1, 1) for n in group], operation_timeout=30, validate_only=validate_only
        )
        for future in futures.values():
            future.result()
        took.append(time.perf_counter() - sent)
    elapsed = time.perf_counter() - started
    for group in names(prefix, count, 100) if not validate_only else []:
        for future in admin.delete_topics(group, operation_timeout=30).values():
            future.result()
    return count / elapsed


def grpc_round(
    cluster: Cluster,
    prefix: str,
    count: int,
    batch: int,
    validate_only: bool,
    took: list[float],
    visible: bool = False,
) -> float:
    """With `visible`, each request's time also holds the wait until the broker the
    Kafka path talks to shows the batch in a Metadata answer (`wait_visible`)."""
    seen = visibility(cluster) if visible and not validate_only else None

    async def go() -> float:
        client = AdminClient(cluster.voter_addresses(), cluster.cluster_id)
        try:
            await client.admin("CreateTopics", warm_up_request(prefix, batch))
            started = time.perf_counter()
            for group in names(prefix, count, batch):
                sent = time.perf_counter()
                reply = await client.admin(
                    "CreateTopics",
                    api.CreateTopicsRequest(validate_only=validate_only, topics=[
                        api.CreatableTopic(name=n, num_partitions=1, replication_factor=1)
                        for n in group
                    ]),
                )  # fmt: skip
                assert all(t.error.error_code == 0 for t in reply.topics), reply
                if seen is not None:
                    seen(group[-1])
                took.append(time.perf_counter() - sent)
            elapsed = time.perf_counter() - started
            for group in names(prefix, count, 100) if not validate_only else []:
                await client.admin("DeleteTopics", api.DeleteTopicsRequest(names=group))
            return count / elapsed
        finally:
            await client.close()

    return asyncio.run(go())


def visibility(cluster: Cluster) -> Callable[[str], None]:
    """A function that returns once broker 101 (the Kafka path's) answers a Metadata
    request with the topic: what the Kafka path's read fence waits for before it
    answers, here after a create straight to the controller. One batch is one
    commit, which a broker applies whole, so its last topic stands for all. The
    polls are Metadata v4 requests with `allow_auto_topic_creation` false (before
    v4 a Metadata request naming an unknown topic asks the broker to create it,
    which here would forward a create and wait on the broker's read fence), back
    to back on one connection opened before any clock starts, each one Kafka
    round trip; a client library's metadata cache and refresh pacing would add
    their own waits."""
    import socket

    from kafka.protocol.metadata import MetadataRequest
    from kafka.protocol.parser import KafkaProtocol

    sock = socket.create_connection(("127.0.0.1", cluster.brokers[101].port), timeout=30)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    protocol = KafkaProtocol(client_id="bench-admin-visible")

    def known(topic: str) -> bool:
        protocol.send_request(MetadataRequest[4](topics=[topic], allow_auto_topic_creation=False))
        sock.sendall(protocol.send_bytes())
        while True:
            answers = protocol.receive_bytes(sock.recv(1 << 16))
            if answers:
                (_, response), *_ = answers
                return all(error == 0 for error, *_ in response.topics)

    def wait(topic: str) -> None:
        deadline = time.monotonic() + 30
        while not known(topic):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic} not in broker 101's metadata after 30 s")

    known("bench-admin-warm-up")
    return wait


def empty_kafka_round(cluster: Cluster, count: int) -> float:
    """DescribeCluster through librdkafka's AdminClient, answered by the broker
    itself: a Kafka admin round trip with no forwarding (the hop's Kafka half)."""
    from confluent_kafka.admin import AdminClient as KafkaAdmin

    admin = KafkaAdmin({"bootstrap.servers": f"127.0.0.1:{cluster.brokers[101].port}"})
    admin.describe_cluster(request_timeout=10).result()
    started = time.perf_counter()
    for _ in range(count):
        admin.describe_cluster(request_timeout=10).result()
    return count / (time.perf_counter() - started)


def empty_grpc_round(cluster: Cluster, count: int) -> float:
    """DescribeCluster straight to the controller over gRPC: a round trip of the
    same client the direct path uses, with next to no work behind it."""

    async def go() -> float:
        client = AdminClient(cluster.voter_addresses(), cluster.cluster_id)
        try:
            await client.admin("DescribeCluster", api.DescribeClusterRequest())
            started = time.perf_counter()
            for _ in range(count):
                await client.admin("DescribeCluster", api.DescribeClusterRequest())
            return count / (time.perf_counter() - started)
        finally:
            await client.close()

    return asyncio.run(go())


def floor(cluster: Cluster, count: int, rounds: int, grpc_b1: dict[bool, float]) -> None:
    """What the hop cannot go below at batch 1: a forwarded request makes the
    same gRPC call as the direct path, plus a Kafka round trip to the broker; an
    empty Kafka round trip (DescribeCluster) over the gRPC CreateTopics time
    bounds the forwarding cost from below, for created topics
    (`floor_cost_b1_created`) and for `validate_only` (`floor_cost_b1`)."""
    rates: dict[str, list[float]] = {"kafka_empty": [], "grpc_empty": []}
    for round_ in range(rounds):
        for path, run in (("kafka_empty", empty_kafka_round), ("grpc_empty", empty_grpc_round)):
            rate = run(cluster, count)
            rates[path].append(rate)
            emit(path=path, round=round_ + 1, round_trips_per_s=round(rate, 1))
    kafka_ms = 1000 / statistics.mean(rates["kafka_empty"])
    grpc_ms = 1000 / statistics.mean(rates["grpc_empty"])
    out: dict[str, object] = {
        "kafka_empty_ms": round(kafka_ms, 3),
        "grpc_empty_ms": round(grpc_ms, 3),
    }
    for validate_only, suffix in ((True, ""), (False, "_created")):
        if grpc_b1.get(validate_only):
            create_ms = 1000 / grpc_b1[validate_only]
            name = "grpc_validate_b1_ms" if validate_only else "grpc_created_b1_ms"
            out[name] = round(create_ms, 3)
            out[f"floor_cost_b1{suffix}"] = round(1 - create_ms / (create_ms + kafka_ms), 3)
    emit(**out, load_average=[round(x, 1) for x in os.getloadavg()])


def empty_kafka_batch_round(cluster: Cluster, count: int, names: list[str]) -> float:
    """DescribeTopics of `names` (a Metadata request for them) through librdkafka's
    AdminClient, answered by the broker from its image: a Kafka round trip of as
    many topics as a CreateTopics of the batch, with no forwarding."""
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AdminClient as KafkaAdmin

    admin = KafkaAdmin({"bootstrap.servers": f"127.0.0.1:{cluster.brokers[101].port}"})

    def describe() -> None:
        for future in admin.describe_topics(TopicCollection(names), request_timeout=10).values():
            future.result()

    describe()
    started = time.perf_counter()
    for _ in range(count):
        describe()
    return count / (time.perf_counter() - started)


def floor_batch(
    cluster: Cluster, count: int, rounds: int, batch: int, grpc_ms: dict[bool, float]
) -> None:
    """The same floor at batch `batch`: a forwarded CreateTopics of `batch` topics
    makes the direct path's gRPC call plus a Kafka round trip of `batch` topics
    (`kafka_empty_b{batch}_ms`, DescribeTopics of `batch` existing topics), so
    the forwarding cost cannot go below 1 - g / (g + that), g the direct path's
    median request (`floor_cost_b{batch}_created`, `floor_cost_b{batch}`)."""
    names = [f"floor-{i:05d}" for i in range(batch)]

    async def create() -> None:
        client = AdminClient(cluster.voter_addresses(), cluster.cluster_id)
        try:
            await client.admin("CreateTopics", api.CreateTopicsRequest(topics=[
                api.CreatableTopic(name=n, num_partitions=1, replication_factor=1) for n in names
            ]))  # fmt: skip
        finally:
            await client.close()

    asyncio.run(create())
    rates: list[float] = []
    for round_ in range(rounds):
        rate = empty_kafka_batch_round(cluster, count, names)
        rates.append(rate)
        emit(path=f"kafka_empty_b{batch}", round=round_ + 1, round_trips_per_s=round(rate, 1))
    kafka_ms = 1000 / statistics.median(rates)
    out: dict[str, object] = {f"kafka_empty_b{batch}_ms": round(kafka_ms, 3)}
    for validate_only, suffix in ((True, ""), (False, "_created")):
        if grpc_ms.get(validate_only):
            g = grpc_ms[validate_only]
            out[f"floor_cost_b{batch}{suffix}"] = round(1 - g / (g + kafka_ms), 3)
    emit(**out, load_average=[round(x, 1) for x in os.getloadavg()])


def cpu_s(pids: list[int]) -> float:
    """CPU seconds (user and system, all threads) these processes used so far."""
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / os.sysconf("SC_CLK_TCK")


def pids(procs: Iterable[Proc]) -> list[int]:
    return [p.popen.pid for p in procs if p.popen is not None]


def settle(processes: list[int], idle_share: float = 0.05, limit_s: float = 30.0) -> None:
    """Until these processes together use under `idle_share` of a core over 0.3 s."""
    give_up = time.monotonic() + limit_s
    last = cpu_s(processes)
    while time.monotonic() < give_up:
        time.sleep(0.3)
        now = cpu_s(processes)
        if now - last < 0.3 * idle_share:
            return
        last = now


def spread(values: list[float]) -> dict[str, object]:
    """The median of `values`, its quartiles and its range, rounded."""
    ordered = sorted(values)
    quartiles = statistics.quantiles(ordered, n=4) if len(ordered) > 1 else ordered * 3
    return {
        "median": round(statistics.median(ordered), 3),
        "quartiles": [round(quartiles[0], 3), round(quartiles[2], 3)],
        "range": [round(ordered[0], 3), round(ordered[-1], 3)],
    }


def by_position(took: list[list[float]]) -> list[float] | None:
    """The median request time (ms) of each request's place in its round: the
    first starts from idle brokers, the later ones run into the new logs the
    earlier ones left the brokers to open (None for rounds of over 10 requests)."""
    places = max((len(r) for r in took), default=0)
    if places > MAX_PLACES:
        return None
    return [
        round(1000 * statistics.median(r[i] for r in took if len(r) > i), 3) for i in range(places)
    ]


def visible_figures(
    rates: dict[str, list[float]], took: dict[str, list[list[float]]], costs: list[float]
) -> dict[str, object]:
    """With `--visible`: the Kafka path against gRPC creates that also wait for the
    Kafka path's broker to show them, what the read fence makes the Kafka path wait
    for. What is left of the forwarding cost against this is the hop itself."""
    if not costs:
        return {}
    visible = statistics.mean(rates["grpc_visible"])
    kafka_ms, visible_ms = (
        1000 * statistics.median(t for r in took[p] for t in r) for p in ("kafka", "grpc_visible")
    )
    return {
        "grpc_visible_topics_per_s": round(visible, 1),
        "grpc_visible_median_ms": round(visible_ms, 3),
        "cost_vs_visible": round(1 - statistics.mean(rates["kafka"]) / visible, 3),
        "cost_vs_visible_median": round(1 - visible_ms / kafka_ms, 3),
        "round_cost_vs_visible": spread(costs),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=300)
    parser.add_argument(
        "--rounds", type=int, default=0, metavar="N",
        help="paired rounds per batch (default: 3 at batch 1, 12 at larger batches)",
    )  # fmt: skip
    parser.add_argument("--batches", default="1,100")
    parser.add_argument(
        "--floor", type=int, default=0, metavar="N",
        help="then N empty Kafka and gRPC round trips a round: the hop's floor at batch 1",
    )  # fmt: skip
    parser.add_argument(
        "--created-only", action="store_true", help="skip the validate_only measurements"
    )
    parser.add_argument(
        "--visible", action="store_true",
        help="a third path: gRPC creates, each followed by a wait until the Kafka path's "
        "broker shows the batch (the read fence's floor)",
    )  # fmt: skip
    parser.add_argument(
        "--client-nice", type=int, default=None, metavar="N",
        help="the bench's clients (this process's threads, started after the cluster) "
        "at nice N: with N < 0 they get a core before the co-located servers, as a "
        "client on its own machine would (needs root)",
    )  # fmt: skip
    args = parser.parse_args()
    batches = [int(b) for b in args.batches.split(",")]
    modes = (False,) if args.created_only else (False, True)
    with (
        tempfile.TemporaryDirectory(prefix="bench-admin-") as root,
        cluster_with_online_brokers(Path(root), *BROKERS) as cluster,
    ):
        if args.client_nice is not None:
            # Linux: per thread; the clients' threads (librdkafka's, gRPC's) are
            # started from this one later and inherit it; the servers keep theirs.
            os.setpriority(os.PRIO_PROCESS, 0, args.client_nice)
        grpc_b1: dict[bool, float] = {}  # validate_only -> gRPC topics/s at batch 1
        grpc_big: dict[bool, float] = {}  # validate_only -> gRPC median ms, largest batch
        brokers = pids(cluster.brokers.values())
        controllers = pids(cluster.procs.values())
        paths: dict[str, Callable[..., float]] = {"kafka": kafka_round, "grpc": grpc_round}
        if args.visible:
            paths["grpc_visible"] = partial(grpc_round, visible=True)

        def one_round(
            path: str, prefix: str, batch: int, validate_only: bool
        ) -> tuple[float, list[float], tuple[float, float]]:
            """One path's round from idle brokers: (topics/s, request times, CPU)."""
            took: list[float] = []
            settle(brokers)
            before = cpu_s(brokers), cpu_s(controllers)
            rate = paths[path](cluster, prefix, args.topics, batch, validate_only, took)
            settle(brokers)
            return rate, took, (cpu_s(brokers) - before[0], cpu_s(controllers) - before[1])

        for validate_only, batch in [(v, b) for v in modes for b in batches]:
            rounds = args.rounds or (3 if batch == 1 else 12)
            load_before = [round(x, 1) for x in os.getloadavg()]
            # A pair first, not counted: each path's first requests of this shape
            # (connections, code paths) in neither path's figures.
            for path in paths:
                say(f"batch {batch}, validate_only {validate_only}, warm-up: {path}")
                one_round(path, f"{path}-{batch}-warm", batch, validate_only)
            rates: dict[str, list[float]] = {p: [] for p in paths}
            took: dict[str, list[list[float]]] = {p: [] for p in paths}  # s per request
            cpu = {p: {"brokers": 0.0, "controllers": 0.0} for p in paths}
            pair_costs: list[float] = []
            visible_costs: list[float] = []  # kafka against grpc_visible, per round
            for round_ in range(rounds):
                # Rotated order: no path always runs right after another.
                names_ = list(paths)
                shift = round_ % len(names_)
                order = tuple(names_[shift:] + names_[:shift])
                for path in order:
                    say(f"batch {batch}, validate_only {validate_only}, round {round_ + 1}: {path}")
                    rate, times, (b_cpu, c_cpu) = one_round(
                        path, f"{path}-{batch}-{round_}", batch, validate_only
                    )
                    cpu[path]["brokers"] += b_cpu
                    cpu[path]["controllers"] += c_cpu
                    rates[path].append(rate)
                    took[path].append(times)
                    emit(path=path, batch=batch, validate_only=validate_only, round=round_ + 1,
                         first=order[0], topics_per_s=round(rate, 1),
                         request_ms=[round(1000 * t, 2) for t in times][:MAX_PLACES])  # fmt: skip
                pair_costs.append(1 - rates["kafka"][-1] / rates["grpc"][-1])
                if args.visible and not validate_only:
                    visible_costs.append(1 - rates["kafka"][-1] / rates["grpc_visible"][-1])
            kafka, grpc = statistics.mean(rates["kafka"]), statistics.mean(rates["grpc"])
            kafka_ms, grpc_ms = (
                1000 * statistics.median(t for r in took[p] for t in r) for p in ("kafka", "grpc")
            )
            if batch == 1:
                grpc_b1[validate_only] = grpc
            if batch == max(batches) > 1:
                grpc_big[validate_only] = grpc_ms
            emit(
                batch=batch,
                validate_only=validate_only,
                rounds=rounds,
                kafka_topics_per_s=round(kafka, 1),
                grpc_topics_per_s=round(grpc, 1),
                forwarding_cost=round(1 - kafka / grpc, 3),
                # 1 - kafka / grpc topics/s of each pair of rounds (run one after the
                # other, in alternated order): what one run can say about the goal
                pair_cost=spread(pair_costs),
                pairs_within_goal=f"{sum(c <= GOAL for c in pair_costs)}/{len(pair_costs)}",
                # per request, the median: steadier than the means on a busy machine
                kafka_median_ms=round(kafka_ms, 3),
                grpc_median_ms=round(grpc_ms, 3),
                forwarding_cost_median=round(1 - grpc_ms / kafka_ms, 3),
                request_ms_by_position={p: by_position(took[p]) for p in paths},
                **{
                    f"{who}_cpu_ms_per_topic": {
                        p: round(1000 * cpu[p][who] / (args.topics * rounds), 3) for p in paths
                    }
                    for who in ("brokers", "controllers")
                },
                **visible_figures(rates, took, visible_costs),
                client_nice=args.client_nice,
                load_average=[load_before, [round(x, 1) for x in os.getloadavg()]],
            )
        if args.floor:
            floor(cluster, args.floor, 3, grpc_b1)
            if max(batches) > 1:
                floor_batch(cluster, max(args.floor // 10, 20), 3, max(batches), grpc_big)


if __name__ == "__main__":
    main()
