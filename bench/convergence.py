"""Metadata convergence: how fast committed metadata reaches many brokers.

Starts three `quorum-controller` processes, then for each broker count in
`--brokers` (default 10, 50, 200) runs that many broker agents, spread over
`--workers` processes (each runs its agents on one event loop; real
`BrokerAgent`s with real metadata caches, talking gRPC to the controllers).
Once every broker is ONLINE, a steady stream of metadata changes (topic config
changes, `--rate` per second, one record each) runs for `--seconds`, and every
agent records the commit-to-apply lag of each record it applies (controller
commit time to broker apply time, corrected by the fetch's clock-offset
estimate). Then:

- `apply_lag_ms`: p50, p99 and max over every (record, broker) pair; `window_*`
  the same without records committed before the window (the brokers' own
  registrations and unfencings applied late: `committed_before_window`);
- `metadata_fetch_per_s`: MetadataFetch calls answered per second by the active
  controller during the window (all agents' successful fetches);
- `controller_cpu_us_per_commit_per_broker`: the active controller process's CPU
  (user + system, all threads, from /proc) over the window, divided by the
  changes committed and by the brokers fetching them; beside it the same CPU per
  fetch answered, the cores the agents' processes, the two followers and this
  process (the writer) used, and the machine's cores nobody used (`idle_cores`,
  /proc/stat) (`--profile-dir` also records a py-spy profile of the active
  controller, when py-spy is installed);
- with `--profile-agent-dir`, one agents' process's CPU by thread and context
  switches (`agent_process_threads`) and a py-spy profile (`--profile-rate`);
  with `--time-parts`, the agents' CPU in their apply, cache append and ISR scan
  per fetch (`agent_parts_cpu_us_per_fetch`, one call in 16 measured); `--agent-loop uvloop` and
  `--agent-switch-interval` run the agents' processes as a broker process could;
- `restart_to_online_s` (once, with a real `broker-agent` process): a broker that
  was `kill -9`ed and fenced is started again; seconds from its process start to
  ONLINE in the active controller's DescribeCluster.

    .venv/bin/python bench/convergence.py [--brokers 10,50,200 --seconds 20 --rate 20]
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import collections
import contextlib
import itertools
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from proc_threads import ProcessWatch, collector_clock
from report import emit, machine_idle_s, percentile, process_cpu_s, say
from write_systems import VENV_BIN, QuorumSystem, free_port, wait_for

from quorum.admin_client import AdminClient
from quorum.gen import admin_pb2 as api

SESSION_MS = 9000  # Kafka's default broker.session.timeout.ms


# ------------------------------------------------------------------ worker side


async def worker(args: argparse.Namespace) -> None:
    """Run agents until stdin says `start` (clear stats) and `stop` (report)."""
    from broker_agent.agent import BrokerAgent
    from broker_agent.config import parse_broker_config
    from broker_agent.main import open_cache
    from quorum.common import process
    from quorum.common.clocks import wall_clock_ms

    process.tune_collector()  # as a broker process does
    if args.agent_switch_interval:  # the controllers' 0.0002; broker processes keep 0.005
        sys.setswitchinterval(args.agent_switch_interval)
    gc_time = collector_clock()

    agents = []
    for broker_id in range(args.first_id, args.first_id + args.count):
        config = parse_broker_config({
            "node.id": str(broker_id),
            "process.roles": "broker",
            "controller.quorum.voters": args.voters,
            "listeners": f"PLAINTEXT://127.0.0.1:{20000 + broker_id}",
            "metadata.log.dir": str(Path(args.root) / f"broker-{broker_id}"),
            "broker.heartbeat.interval.ms": "2000",
            "log.level": "WARNING",
        })  # fmt: skip
        agents.append(BrokerAgent(config, args.cluster_id, open_cache(config, False), None))
    # The lags of records committed before `start` (the brokers' own registrations
    # and unfencings, caught up on late) apart from those of the window's changes.
    window = {"start_ms": float("inf")}
    late: list[float] = []

    def observe(lag: float, count: int) -> None:
        if wall_clock_ms() - lag < window["start_ms"]:
            late.extend([lag] * count)

    types: collections.Counter[str] = collections.Counter()  # records applied in the window

    def counting(append: Any) -> Any:
        def counted(batches: Any) -> Any:
            applied = append(batches)
            if window["start_ms"] < float("inf"):
                types.update(x.record_type for x in applied)
            return applied

        return counted

    parts: collections.Counter[str] = collections.Counter()  # --time-parts: CPU seconds
    for a in agents:
        a.stats.on_apply_lag.append(observe)
        if args.time_parts:
            a.cache.append = timed(parts, "cache_append", a.cache.append)  # type: ignore[method-assign]
            a._apply = timed_coroutine(parts, "apply", a._apply)  # type: ignore[method-assign]
            a._expand_isrs = timed_coroutine(parts, "expand_isrs", a._expand_isrs)  # type: ignore[method-assign]
        a.cache.append = counting(a.cache.append)  # type: ignore[method-assign]
    tasks = [asyncio.ensure_future(a.run()) for a in agents]
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    started = time.monotonic()
    while True:
        line = (await reader.readline()).decode().strip()
        if line == "start":
            await caught_up(agents)
            started = time.monotonic()
            window["start_ms"] = wall_clock_ms()
            late.clear()
            types.clear()
            for a in agents:
                a.stats.apply_lag_ms.clear()
                a.stats.fetches = 0
                a.stats.fetch_errors = 0
            gc_time["s"] = 0.0
            parts.clear()
            print("started", flush=True)
        elif line in ("stop", ""):
            break
    seconds = time.monotonic() - started
    lags = [lag for a in agents for lag in a.stats.apply_lag_ms]
    fetches = sum(a.stats.fetches for a in agents)
    errors = sum(a.stats.fetch_errors for a in agents)
    print(json.dumps({"lags": lags, "late": late, "fetches": fetches, "fetch_errors": errors,
                      "types": types, "seconds": seconds, "gc_s": gc_time["s"],
                      "parts": parts}),
          flush=True)  # fmt: skip
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(BaseException):
            await task
    for a in agents:
        await a.client.close()
        a.cache.close()


# `--time-parts` reads the thread's CPU clock (a system call, 1.1 µs quiet and far
# more on a loaded VM) around one call in this many, counted that many times: read
# around every call, the four reads per fetch added 45-55 µs to the agents' CPU per
# answer at 200 brokers (with 222 / 230 µs, without 178 / 167, load 10-14).
TIME_PARTS_EVERY = 16


def timed(parts: collections.Counter[str], name: str, call: Any) -> Any:
    """`--time-parts`: the loop thread's CPU inside `call`, added up under `name`
    (one call in `TIME_PARTS_EVERY` measured)."""
    calls = itertools.count()

    def run(*args: Any) -> Any:
        if next(calls) % TIME_PARTS_EVERY:
            return call(*args)
        began = time.thread_time()
        try:
            return call(*args)
        finally:
            parts[name] += (time.thread_time() - began) * TIME_PARTS_EVERY

    return run


def timed_coroutine(parts: collections.Counter[str], name: str, call: Any) -> Any:
    """As `timed`, for a coroutine that does not suspend on the path measured
    (`_apply`; `_expand_isrs` without an AlterPartition to send); the calls not
    measured get the coroutine itself, with no wrapper around it."""
    calls = itertools.count()

    async def measured(*args: Any) -> Any:
        began = time.thread_time()
        try:
            return await call(*args)
        finally:
            parts[name] += (time.thread_time() - began) * TIME_PARTS_EVERY

    def run(*args: Any) -> Any:
        if next(calls) % TIME_PARTS_EVERY:
            return call(*args)
        return measured(*args)

    return run


async def caught_up(agents: list[Any]) -> None:
    """Until every agent has applied the highest watermark any of them has seen:
    ONLINE in the controller's view comes before a broker has applied the other
    brokers' registrations and unfencings, and those late applies are no part of
    the fan-out measured (up to 30 s, then the window starts anyway)."""
    give_up = time.monotonic() + 30
    while time.monotonic() < give_up:
        high = max(a.stats.high_watermark for a in agents)
        if all(a.cache.next_offset >= high for a in agents):
            return
        await asyncio.sleep(0.1)


# ------------------------------------------------------------------ driver side


async def count_in_state(system: QuorumSystem, ids: range, state: str) -> int:
    client = AdminClient(system.addresses(), system.cluster_id)
    try:
        reply = await client.admin("DescribeCluster", api.DescribeClusterRequest(), deadline_s=5)
        return sum(1 for b in reply.brokers if b.broker_id in ids and b.state == state)
    finally:
        await client.close()


async def change_stream(system: QuorumSystem, rate: float, seconds: float) -> int:
    """One topic config change per tick: one record, one commit, fanned out to all."""
    client = AdminClient(system.addresses(), system.cluster_id)
    changes = 0
    try:
        topic = api.CreatableTopic(name="convergence", num_partitions=1, replication_factor=1)
        reply = await client.admin("CreateTopics", api.CreateTopicsRequest(topics=[topic]))
        assert reply.topics[0].error.error_code in (0, 36), reply
        deadline = time.monotonic() + seconds
        next_at = time.monotonic()
        while time.monotonic() < deadline:
            request = api.IncrementalAlterConfigsRequest(resources=[api.AlterConfigsResource(
                resource_type=api.TOPIC, resource_name="convergence",
                configs=[api.AlterableConfig(
                    name="retention.ms", value=str(60_000 + changes), op=api.SET)])])  # fmt: skip
            await client.admin("IncrementalAlterConfigs", request)
            changes += 1
            next_at += 1 / rate
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))
    finally:
        await client.close()
    return changes


def run_count(system: QuorumSystem, root: Path, brokers: int, first_id: int,
              args: argparse.Namespace) -> None:  # fmt: skip
    workers = min(args.workers, brokers)
    per = [brokers // workers + (1 if i < brokers % workers else 0) for i in range(workers)]
    voters = ",".join(f"{i}@{a}" for i, a in zip((1, 2, 3), system.addresses(), strict=True))
    procs = []
    next_id = first_id
    for count in per:
        procs.append(subprocess.Popen(
            [sys.executable, __file__, "--worker", "--first-id", str(next_id), "--count",
             str(count), "--voters", voters, "--cluster-id", system.cluster_id,
             "--root", str(root), *(["--time-parts"] if args.time_parts else []),
             "--agent-loop", args.agent_loop,
             "--agent-switch-interval", str(args.agent_switch_interval)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        ))  # fmt: skip
        next_id += count
    try:
        ids = range(first_id, first_id + brokers)
        wait_for(lambda: asyncio.run(count_in_state(system, ids, "ONLINE")) == brokers, 120,
                 f"{brokers} brokers ONLINE")  # fmt: skip
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("start\n")
            p.stdin.flush()
        for p in procs:  # each worker's agents have caught up
            assert p.stdout is not None
            assert p.stdout.readline().strip() == "started"
        leader_pid = system.members.procs[system.leader()].pid
        profiler = start_profiler(leader_pid, brokers, args)
        watch = None
        if args.profile_agent_dir:  # one agents' process: py-spy and its threads
            out = Path(args.profile_agent_dir) / f"agents-{brokers}-brokers.txt"
            watch = ProcessWatch(procs[0].pid, VENV_BIN / "py-spy", out, args.seconds,
                                 args.profile_rate)  # fmt: skip
        cpu_before, window_start = process_cpu_s(leader_pid), time.monotonic()
        agents_before = sum(process_cpu_s(p.pid) for p in procs)
        followers = [p.pid for p in system.members.procs.values() if p.pid != leader_pid]
        followers_before, idle_before = sum(map(process_cpu_s, followers)), machine_idle_s()
        own_before = time.process_time()
        changes = asyncio.run(change_stream(system, args.rate, args.seconds))
        time.sleep(1.0)  # the last changes reach everyone
        controller_cpu_s = process_cpu_s(leader_pid) - cpu_before
        agents_cpu_s = sum(process_cpu_s(p.pid) for p in procs) - agents_before
        followers_cpu_s = sum(map(process_cpu_s, followers)) - followers_before
        idle_s, own_cpu_s = machine_idle_s() - idle_before, time.process_time() - own_before
        window_s = time.monotonic() - window_start
        threads = watch.finish() if watch is not None else None
        if profiler is not None:
            profiler.wait(timeout=120)
        reports = []
        for p in procs:
            out, _ = p.communicate("stop\n", timeout=120)
            reports.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    # The next round starts once these brokers' sessions have run out.
    wait_for(lambda: asyncio.run(count_in_state(system, ids, "FENCED")) == brokers, 60,
             f"{brokers} brokers fenced")  # fmt: skip
    lags = [lag for r in reports for lag in r["lags"]]
    seconds = max(r["seconds"] for r in reports)
    params = {
        "brokers": brokers, "workers": workers, "changes": changes, "rate": args.rate,
        "agent_loop": args.agent_loop,
        "agent_switch_interval": args.agent_switch_interval or sys.getswitchinterval(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }  # fmt: skip
    late = [lag for r in reports for lag in r["late"]]
    window = sorted(lags)
    for lag in late:  # what is left: the lags of records committed in the window
        del window[bisect.bisect_left(window, lag)]
    emit(metric="apply_lag_ms", p50=round(percentile(lags, 0.5), 2),
         p99=round(percentile(lags, 0.99), 2), max=round(max(lags), 2),
         value=round(percentile(lags, 0.99), 2), samples=len(lags),
         committed_before_window=len(late),
         window_p50=round(percentile(window, 0.5), 2) if window else None,
         window_p99=round(percentile(window, 0.99), 2) if window else None,
         window_max=round(max(window), 2) if window else None, **params)  # fmt: skip
    fetches = sum(r["fetches"] for r in reports)
    errors = sum(r.get("fetch_errors", 0) for r in reports)
    types = sum((collections.Counter(r.get("types", {})) for r in reports), collections.Counter())
    emit(metric="metadata_fetch_per_s", value=round(fetches / seconds, 1), fetch_errors=errors,
         applied_record_types=dict(types), **params)  # fmt: skip
    parts = sum((collections.Counter(r.get("parts", {})) for r in reports), collections.Counter())
    if parts:  # --time-parts: the agents' own code, per fetch, as the loop thread ran it
        emit(metric="agent_parts_cpu_us_per_fetch",
             **{k: round(v / max(fetches, 1) * 1e6, 1) for k, v in parts.items()},
             **params)  # fmt: skip
    emit(metric="controller_cpu_us_per_commit_per_broker",
         value=round(controller_cpu_s / max(changes, 1) / brokers * 1e6, 1),
         controller_cpu_s=round(controller_cpu_s, 2),
         controller_cpu_share=round(controller_cpu_s / window_s, 3),
         controller_cpu_us_per_fetch=round(controller_cpu_s / max(fetches, 1) * 1e6, 1),
         agents_cpu_share=round(agents_cpu_s / window_s, 3),
         agents_cpu_us_per_fetch=round(agents_cpu_s / max(fetches, 1) * 1e6, 1),
         agents_gc_s=round(sum(r.get("gc_s", 0.0) for r in reports), 3),
         # the rest of the machine: the two follower controllers, this process (the
         # writer of the changes) and the cores nobody used over the window
         followers_cpu_share=round(followers_cpu_s / window_s, 3),
         writer_cpu_share=round(own_cpu_s / window_s, 3),
         idle_cores=round(idle_s / window_s, 3), **params)  # fmt: skip
    if threads is not None:
        emit(metric="agent_process_threads", fetches=reports[0]["fetches"],
             seconds=round(window_s, 2), threads=threads, io=watch.io if watch else {},
             **params)  # fmt: skip


def start_profiler(
    pid: int, brokers: int, args: argparse.Namespace
) -> subprocess.Popen[bytes] | None:
    """py-spy on the active controller for the change window (collapsed stacks)."""
    py_spy = VENV_BIN / "py-spy"
    if args.profile_dir is None or not py_spy.exists():
        return None
    out = Path(args.profile_dir) / f"controller-{brokers}-brokers.txt"
    out.parent.mkdir(parents=True, exist_ok=True)
    command = [str(py_spy), "record", "--pid", str(pid), "--format", "raw", "--output",
               str(out), "--duration", str(int(args.seconds)), "--rate", "100",
               "--nonblocking"]  # fmt: skip
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def restart_to_online(system: QuorumSystem, root: Path) -> None:
    from quorum.common.config import render_properties

    config = root / "broker-9000.properties"
    config.write_text(render_properties({
        "node.id": "9000", "process.roles": "broker",
        "controller.quorum.voters": ",".join(
            f"{i}@{a}" for i, a in zip((1, 2, 3), system.addresses(), strict=True)),
        "listeners": f"PLAINTEXT://127.0.0.1:{free_port()}",
        "metadata.log.dir": str(root / "broker-9000"),
        "broker.heartbeat.interval.ms": "500",
        "broker.session.timeout.ms": str(SESSION_MS),
    }))  # fmt: skip
    subprocess.run([str(VENV_BIN / "quorumctl"), "storage", "format", "--cluster-id",
                    system.cluster_id, "--config", str(config)], check=True,
                   capture_output=True)  # fmt: skip

    async def state() -> tuple[str, int]:
        client = AdminClient(system.addresses(), system.cluster_id)
        try:
            reply = await client.admin("DescribeCluster", api.DescribeClusterRequest())
            for b in reply.brokers:
                if b.broker_id == 9000:
                    return b.state, b.broker_epoch
            return "ABSENT", -1
        finally:
            await client.close()

    command = [str(VENV_BIN / "broker-agent"), "--config", str(config)]
    log = (root / "broker-9000.log").open("ab")
    proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    wait_for(lambda: asyncio.run(state())[0] == "ONLINE", 30, "broker 9000 ONLINE")
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    wait_for(lambda: asyncio.run(state())[0] == "FENCED", 30, "broker 9000 fenced")
    old_epoch = asyncio.run(state())[1]
    started = time.monotonic()
    proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        # A fenced broker is ONLINE again only by a new registration (a new epoch).
        wait_for(lambda: asyncio.run(state())[0] == "ONLINE", 30, "broker 9000 ONLINE again")
        assert asyncio.run(state())[1] != old_epoch
        emit(metric="restart_to_online_s", value=round(time.monotonic() - started, 3),
             session_timeout_ms=SESSION_MS)  # fmt: skip
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        log.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--brokers", default="10,50,200")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--rate", type=float, default=20)
    parser.add_argument("--keep-dir", action="store_true")
    parser.add_argument(
        "--skip-restart",
        action="store_true",
        help="no restart_to_online (bench/fanout_floor.py's side-by-side)",
    )
    parser.add_argument("--profile-dir", help="py-spy profiles of the active controller here")
    parser.add_argument(
        "--profile-agent-dir",
        help="py-spy profile (--native) and per-thread CPU of one agents' process here",
    )
    parser.add_argument(
        "--profile-rate", type=int, default=200, help="py-spy's for --profile-agent-dir; 0: none"
    )
    parser.add_argument(
        "--time-parts",
        action="store_true",
        help="the agents' CPU in their apply, cache append and ISR scan, per fetch",
    )
    parser.add_argument(
        "--agent-loop",
        choices=("asyncio", "uvloop"),
        default="asyncio",
        help="the agents' processes' event loop: asyncio's (as the floor's clients) or "
        "uvloop (as a broker process, broker_agent/event_loop.py)",
    )
    parser.add_argument(
        "--agent-switch-interval",
        type=float,
        default=0.0,
        help="sys.setswitchinterval in the agents' processes (default: CPython's 0.005)",
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--first-id", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--count", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--voters", help=argparse.SUPPRESS)
    parser.add_argument("--cluster-id", help=argparse.SUPPRESS)
    parser.add_argument("--root", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        if args.agent_loop == "uvloop":
            from broker_agent import event_loop

            event_loop.run(worker(args))
        else:
            asyncio.run(worker(args))
        return
    root = Path(tempfile.mkdtemp(prefix="bench-convergence-"))
    system = QuorumSystem(root)
    try:
        say(f"== starting three controllers under {root}")
        system.start()
        first_id = 1001
        for count in (int(c) for c in args.brokers.split(",")):
            say(f"== {count} brokers, {args.rate} changes/s for {args.seconds} s")
            # Brokers accumulate: each round adds to those still registered.
            run_count(system, root, count, first_id, args)
            first_id += count
        if not args.skip_restart:
            say("== restart of a fenced broker")
            restart_to_online(system, root)
    finally:
        system.stop()
        if not args.keep_dir:
            import shutil

            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
