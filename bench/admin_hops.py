"""One CreateTopics of `--batch` topics, hop by hop: where the time of a create
forwarded by a broker goes, beside the same create sent straight to the controller.

The cluster of `bench/admin.py` (three controllers, three brokers), started with
`bench/admin_hops_trace` on `PYTHONPATH` and ADMIN_HOPS_DIR set, so each broker and
controller timestamps the steps a create passes (`sitecustomize.py` there). The
bench times each create from the client; after the cluster stops, the events that
fall inside each create's window give, per create: librdkafka to the broker's
listener, the broker to its forwarded gRPC call, that call to the controller's
handler, the handler, the reply back, the answer written, and back to the
client's future; and for the direct path, the client to the handler, the
handler, and back. Medians in ms, one JSON object per path and mode, then the
share of forwarded creates whose reply came while the forwarding broker was
applying metadata, and each broker's median apply. Inside each forwarded create's
window, on the forwarding broker: the time its loop spent applying metadata
(`apply_in_window_ms`) and its worker threads opening new logs
(`opening_in_window_ms`, the union of the opens' spans), medians; and per broker
the median time of one new log's open (`open_median_ms`, a worker thread's wall
time, GIL waits included).

`--round-requests K`: instead, rounds as `bench/admin.py` runs them (K creates
back to back per path, each path's round from idle brokers, the paths'
order alternated, created topics only), and the legs by each create's place
in its round (`by_position`): where a later create's time goes that the first,
from idle brokers, does not spend (the new logs the earlier ones left to open,
the forwarding broker's applies, garbage collection, in each create's window).

`--switch-interval S` sets the brokers' `sys.setswitchinterval` (CPython's
default 0.005) for the experiment of docs/benchmarks.md. `--profile` also
profiles (cProfile) the brokers' metadata applies and joins of new logs, on
their event loops, and prints the top functions of broker 101's.

    .venv/bin/python bench/admin_hops.py [--creates 200 --rounds 2]
    .venv/bin/python bench/admin_hops.py --batch 100 --creates 10 --rounds 3
    .venv/bin/python bench/admin_hops.py --batch 100 --round-requests 3 --rounds 12
"""

from __future__ import annotations

import argparse
import asyncio
import os
import pstats
import statistics
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # process_logs

from admin import pids, settle, warm_up_request
from report import emit, say

from quorum.admin_client import AdminClient
from quorum.gen import admin_pb2 as api
from tests.integration.controller_cluster import Cluster, cluster_with_online_brokers

Window = tuple[str, bool, int, int]  # path, validate_only, start ns, end ns
TRACE = Path(__file__).resolve().parent / "admin_hops_trace"


def add_step(steps: dict[str, list[float]], name: str, a: int | None, b: int | None) -> None:
    """One step's time in ms, from the stamps (ns) of its two ends, where both exist."""
    if a is not None and b is not None:
        steps.setdefault(name, []).append((b - a) / 1e6)


def topic_names(prefix: str, n: int, batch: int) -> list[list[str]]:
    return [[f"{prefix}-{i}-{j}" for j in range(batch)] for i in range(n)]


def kafka_creates(
    cluster: Cluster, prefix: str, n: int, batch: int, validate_only: bool
) -> list[Window]:
    from confluent_kafka.admin import AdminClient as KafkaAdmin
    from confluent_kafka.admin import NewTopic

    admin = KafkaAdmin({"bootstrap.servers": f"127.0.0.1:{cluster.brokers[101].port}"})
    admin.list_topics(timeout=10)
    for future in admin.create_topics(  # the client's first CreateTopics: see admin.py
        [NewTopic(f"{prefix}-warm-{i}", 1, 1) for i in range(batch)], validate_only=True
    ).values():
        future.result()
    windows = []
    groups = topic_names(prefix, n, batch)
    for group in groups:
        start = time.time_ns()
        for future in admin.create_topics(
            [NewTopic(name, 1, 1) for name in group],
            operation_timeout=30,
            validate_only=validate_only,
        ).values():
            future.result()
        windows.append(("kafka", validate_only, start, time.time_ns()))
    for group in groups if not validate_only else []:
        for future in admin.delete_topics(group, operation_timeout=30).values():
            future.result()
    return windows


def grpc_creates(
    cluster: Cluster, prefix: str, n: int, batch: int, validate_only: bool
) -> list[Window]:
    async def go() -> list[Window]:
        client = AdminClient(cluster.voter_addresses(), cluster.cluster_id)
        windows = []
        groups = topic_names(prefix, n, batch)
        try:
            await client.admin("CreateTopics", warm_up_request(prefix, batch))
            for group in groups:
                start = time.time_ns()
                topics = [
                    api.CreatableTopic(name=name, num_partitions=1, replication_factor=1)
                    for name in group
                ]
                request = api.CreateTopicsRequest(validate_only=validate_only, topics=topics)
                await client.admin("CreateTopics", request)
                windows.append(("grpc", validate_only, start, time.time_ns()))
            for group in groups if not validate_only else []:
                await client.admin("DeleteTopics", api.DeleteTopicsRequest(names=group))
        finally:
            await client.close()
        return windows

    return asyncio.run(go())


def spans(rows: list[tuple[int, str]], label: str) -> list[tuple[int, int]]:
    """(start, end) of each `label>` ... `label<`, paired in order (one thread's
    opens may interleave with another's: pairs are matched first in, first out)."""
    starts = [t for t, lab in rows if lab == label + ">"]
    ends = [t for t, lab in rows if lab == label + "<"]
    return [(a, b) for a, b in zip(starts, ends, strict=False) if b >= a]


def covered_ms(intervals: list[tuple[int, int]], start: int, end: int) -> float:
    """How much of [start, end] the union of `intervals` covers, in ms."""
    clipped = sorted((max(a, start), min(b, end)) for a, b in intervals if b > start and a < end)
    total, reach = 0, start
    for a, b in clipped:
        if b > reach:
            total += b - max(a, reach)
            reach = b
    return total / 1e6


def read_events(directory: Path) -> dict[str, list[tuple[int, str]]]:
    events = {}
    for path in directory.glob("*.tsv"):
        rows = [line.split("\t") for line in path.read_text().splitlines()]
        events[path.stem] = sorted((int(t), label) for t, label in rows)
    return events


def first(rows: list[tuple[int, str]], label: str) -> int | None:
    return next((t for t, lab in rows if lab == label), None)


def last(rows: list[tuple[int, str]], label: str) -> int | None:
    return next((t for t, lab in reversed(rows) if lab == label), None)


def hops(windows: list[Window], events: dict[str, list[tuple[int, str]]]) -> None:
    controllers = sorted(e for k, v in events.items() if k.startswith("quorum") for e in v)
    brokers = {k: v for k, v in events.items() if k.startswith("broker")}
    applies = {k: spans(v, "apply") for k, v in brokers.items()}
    opens = {k: spans(v, "open") for k, v in brokers.items()}
    for path, validate_only in (("kafka", False), ("grpc", False), ("kafka", True), ("grpc", True)):
        steps: dict[str, list[float]] = {}
        overlapped = counted = 0

        add = partial(add_step, steps)

        for p, v, start, end in windows:
            if (p, v) != (path, validate_only):
                continue
            inside = [e for e in controllers if start <= e[0] <= end]
            handler_in, handler_out = first(inside, "controller>"), last(inside, "controller<")
            add("whole create", start, end)
            add("controller handler (commit included)", handler_in, handler_out)
            # the commit of this create (none with validate_only: nothing is written)
            after_in = [e for e in inside if handler_in is not None and e[0] >= handler_in]
            commit = None if validate_only else first(after_in, "commit")
            add("commit -> controller handler returns", commit, handler_out)
            if not validate_only:
                add("commit -> raft.propose returns", commit, first(inside, "propose<"))
                add("commit -> write queue returns", commit, first(inside, "submit<"))
            if commit is not None and handler_out is not None:
                answers = [
                    t for t, lab in inside if lab == "answer<" and commit <= t <= handler_out
                ]
                steps.setdefault("fetch answers built before the reply (count)", []).append(
                    len(answers)
                )
                if answers:
                    add("commit -> first fetch answer built", commit, answers[0])
                    add("commit -> last fetch answer built before the reply", commit, answers[-1])
            if path == "grpc":
                add("client -> controller handler", start, handler_in)
                add("controller handler -> client", handler_out, end)
                add("commit -> reply at the client", commit, end)
                continue
            for name, rows in brokers.items():
                mine = [e for e in rows if start <= e[0] <= end]
                call, reply = first(mine, "forward>"), last(mine, "forward<")
                if call is None:
                    continue
                steps.setdefault("apply_in_window_ms", []).append(
                    covered_ms(applies[name], start, end)
                )
                steps.setdefault("opening_in_window_ms", []).append(
                    covered_ms(opens[name], start, end)
                )
                listen_in, listen_out = first(mine, "listen>"), last(mine, "listen<")
                add("librdkafka -> broker's listener", start, listen_in)
                add("broker: decode, request -> forwarded call", listen_in, call)
                decode, build = first(mine, "decode"), first(mine, "build")
                grpc_in, grpc_out = first(mine, "grpc>"), last(mine, "grpc<")
                add("  broker: frame -> kio decode starts", listen_in, decode)
                add("  broker: kio decode, dispatch -> protobuf request", decode, build)
                add("  broker: protobuf request -> forwarder", build, call)
                add("  broker: forwarder -> AdminClient.admin", call, grpc_in)
                add("  broker: AdminClient.admin returned -> forwarder returned", grpc_out, reply)
                add("  broker: forwarder returned -> encode starts", reply, last(mine, "encode"))
                add("  broker: encode starts -> answer encoded", last(mine, "encode"), listen_out)
                add("forwarded call -> controller handler", call, handler_in)
                add("controller handler -> reply at the broker", handler_out, reply)
                add("broker: answer written", reply, listen_out)
                add("commit -> reply at the broker", commit, reply)
                fetched = first(
                    [e for e in mine if commit is not None and e[0] >= commit], "fetch<"
                )
                add("commit -> its fetch answer at the broker", commit, fetched)
                if fetched is not None and reply is not None:
                    steps.setdefault("fetch answer before the reply (share)", []).append(
                        float(fetched < reply)
                    )
                add("answer -> librdkafka's future", listen_out, end)
                if handler_out is not None and reply is not None:
                    counted += 1
                    overlapped += any(a < reply and b > handler_out for a, b in applies[name])
        medians = {
            k: round(statistics.fmean(v) if k.endswith(")") else statistics.median(v), 3)
            for k, v in steps.items()
        }
        extra = {"reply_during_apply": round(overlapped / counted, 2)} if counted else {}
        emit(path=path, validate_only=validate_only, creates=len(steps.get("whole create", [])),
             median_ms=medians, **extra)  # fmt: skip
    for name in sorted(brokers):
        took = [(b - a) / 1e6 for a, b in applies[name]]
        opened = [(b - a) / 1e6 for a, b in opens[name]]
        if took:
            open_ms = round(statistics.median(opened), 3) if opened else None
            emit(broker_process=name, applies=len(took),
                 apply_median_ms=round(statistics.median(took), 3),
                 opens=len(opened), open_median_ms=open_ms)  # fmt: skip


Placed = tuple[str, int, int, int]  # path, place in its round, start ns, end ns


def by_position(placed: list[Placed], events: dict[str, list[tuple[int, str]]], fwd: str) -> None:
    """Per path and place in the round, medians (ms) of each create's legs and of
    what ran inside its window: the forwarding broker's applies (`fwd_apply`),
    its and the other brokers' log opens (`fwd_opening`, `others_opening`: the
    union of the opens' spans), and GC passes in any process (`gc_any`)."""
    controllers = sorted(e for k, v in events.items() if k.startswith("quorum") for e in v)
    brokers = {k: v for k, v in events.items() if k.startswith("broker")}
    applies = spans(brokers[fwd], "apply")
    opens = {k: spans(v, "open") for k, v in brokers.items()}
    collections = [spans(v, "gc") for v in events.values()]
    for path in ("kafka", "grpc"):
        for place in sorted({p for q, p, _, _ in placed if q == path}):
            steps: dict[str, list[float]] = {}

            add = partial(add_step, steps)

            for q, p, start, end in placed:
                if (q, p) != (path, place):
                    continue
                inside = [e for e in controllers if start <= e[0] <= end]
                handler_in, handler_out = first(inside, "controller>"), last(inside, "controller<")
                add("whole", start, end)
                add("to the controller's handler", start, handler_in)
                add("handler (commit included)", handler_in, handler_out)
                add("handler -> reply at the client", handler_out, end)
                if path == "kafka":
                    mine = [e for e in brokers[fwd] if start <= e[0] <= end]
                    add(
                        "  of it: handler -> reply at the broker",
                        handler_out,
                        last(mine, "forward<"),
                    )
                    add("  of it: reply at the broker -> answer written",
                        last(mine, "forward<"), last(mine, "listen<"))  # fmt: skip
                    add("  of it: answer written -> client", last(mine, "listen<"), end)
                for name, value in (
                    ("fwd_apply", covered_ms(applies, start, end)),
                    ("fwd_opening", covered_ms(opens[fwd], start, end)),
                    ("others_opening", max(
                        (covered_ms(v, start, end) for k, v in opens.items() if k != fwd),
                        default=0.0,
                    )),
                    ("gc_any", sum(covered_ms(g, start, end) for g in collections)),
                ):  # fmt: skip
                    steps.setdefault(name, []).append(value)
            medians = {k: round(statistics.median(v), 3) for k, v in steps.items()}
            emit(path=path, place=place + 1, creates=len(steps.get("whole", [])), median_ms=medians)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--creates", type=int, default=200, help="per path, mode and round")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--batch", type=int, default=1, help="topics per CreateTopics")
    parser.add_argument(
        "--switch-interval", type=float, default=0.0, metavar="S",
        help="the brokers' sys.setswitchinterval (default: CPython's 0.005)",
    )  # fmt: skip
    parser.add_argument("--profile", action="store_true", help="cProfile the brokers' applies")
    parser.add_argument(
        "--round-requests", type=int, default=0, metavar="K",
        help="rounds of K creates per path as bench/admin.py runs them, legs by place",
    )  # fmt: skip
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-admin-hops-") as root:
        out = Path(root) / "events"
        out.mkdir()
        os.environ["ADMIN_HOPS_DIR"] = str(out)
        if args.switch_interval:
            os.environ["ADMIN_HOPS_SWITCH_INTERVAL"] = str(args.switch_interval)
        if args.profile:
            os.environ["ADMIN_HOPS_PROFILE"] = "1"
        os.environ["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(TRACE), os.environ.get("PYTHONPATH")) if p
        )
        windows: list[Window] = []
        placed: list[Placed] = []
        with cluster_with_online_brokers(Path(root) / "cluster", 101, 102, 103) as cluster:
            forwarding = cluster.brokers[101].popen.pid if cluster.brokers[101].popen else 0
            idle = pids(cluster.brokers.values())
            paths = {"kafka": kafka_creates, "grpc": grpc_creates}
            for round_ in range(args.rounds if args.round_requests else 0):
                order = ("kafka", "grpc") if round_ % 2 == 0 else ("grpc", "kafka")
                for path in order:
                    say(f"round {round_ + 1}: {path}")
                    settle(idle)
                    made = paths[path](cluster, f"{path}-r{round_}", args.round_requests,
                                       args.batch, False)  # fmt: skip
                    placed += [(path, i, w[2], w[3]) for i, w in enumerate(made)]
            for round_ in range(0 if args.round_requests else args.rounds):
                for validate_only in (False, True):
                    for path, run in (("kafka", kafka_creates), ("grpc", grpc_creates)):
                        say(f"round {round_ + 1}, validate_only {validate_only}: {path}")
                        prefix = f"{path}-{int(validate_only)}-{round_}"
                        windows += run(cluster, prefix, args.creates, args.batch, validate_only)
            load = [round(x, 1) for x in os.getloadavg()]
        if placed:
            by_position(placed, read_events(out), f"broker-agent-{forwarding}")
        else:
            hops(windows, read_events(out))
        for profile in out.glob(f"broker-agent-{forwarding}.prof"):
            stats = pstats.Stats(str(profile), stream=sys.stderr)
            stats.sort_stats("cumulative").print_stats(40)
            stats.sort_stats("tottime").print_stats(25)
        emit(batch=args.batch, switch_interval=args.switch_interval or sys.getswitchinterval(),
             load_average=load)  # fmt: skip


if __name__ == "__main__":
    main()
