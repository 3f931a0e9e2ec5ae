"""The floor under broker fan-out: what Python's gRPC allows here, with no Raft.

`bench/convergence.py` measures commit-to-apply lag with three controllers and
real broker agents. This bench keeps only the shape of its traffic: one server
process stands in for the active controller, `--brokers` long-lived
MetadataFetchStream calls stand in for the brokers, spread over as many client
processes as convergence.py spreads its agents over (`--workers`), one channel
per broker. Each broker keeps one fetch parked; `--rate` times a second the
server "commits" (no log, no fsync, no metadata apply), encodes the answer once
(one batch holding one topic config record, the size of convergence's) and
answers every parked fetch, its own fields appended per broker as the
controller does. Each broker records commit-to-receive latency and sends its
next fetch at once. The server's registration, the channels' options, the
client's exchange on the open call and the message types are the product's
(`add_broker_lifecycle`, `open_channel`, `exchange`, broker.proto), so the gap
between the two benches is the controller's and the agents' own work.

Per broker count it prints (one JSON object each, `system: floor`):

- `commit_to_receive_ms`: p50, p99 and max over every (commit, broker) pair;
- `answers_per_s`, the server's CPU per answer (all threads, from /proc), its
  cores, the client processes' cores, the machine's cores nobody used over the
  window (`idle_cores`, /proc/stat), and the load average.

With `--systems floor,quorum` it also runs `bench/convergence.py` for the same
broker count, seconds, rate and workers right after (or before: the order
given), and prints a `fanout_floor_vs_quorum` line with both p99s side by side.

    .venv/bin/python bench/fanout_floor.py [--brokers 200,500 --seconds 15 --rate 20]
    .venv/bin/python bench/fanout_floor.py --brokers 200,500 --systems floor,quorum
    .venv/bin/python bench/fanout_floor.py --brokers 200,500 --answers write  # vs yield
    .venv/bin/python bench/fanout_floor.py --brokers 200 --systems floor,quorum \
        --profile-dir /tmp/fanout-profiles   # py-spy and per-thread CPU of both servers
    .venv/bin/python bench/fanout_floor.py --brokers 200 --systems floor,quorum \
        --profile-clients-dir D               # the same of one client process each

`--profile-clients-dir` records py-spy (`--native`, `--profile-rate` Hz; 0: none) on
one client process of the floor and one agents' process of the quorum over the
window, and prints each one's CPU by thread, context switches and collector time
(and the agents' CPU in their own apply, per fetch: convergence.py `--time-parts`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from proc_threads import ProcessWatch, collector_clock
from report import emit, machine_idle_s, percentile, process_cpu_s, say
from spy import Profile
from write_systems import VENV_BIN, free_port

from quorum.common.channels import exchange, open_channel
from quorum.controller.image_records import config_record
from quorum.gen import admin_pb2 as api
from quorum.gen import broker_pb2 as bpb
from quorum.gen import broker_pb2_grpc as bpb_grpc
from quorum.gen import metadata_pb2 as md
from quorum.rpc.servers import new_server
from quorum.server.broker_servicer import BrokerLifecycleServicer, add_broker_lifecycle

MAX_WAIT_MS = 2000  # the agents' broker.heartbeat.interval.ms in convergence.py
KEEP_COMMITS = 1000  # commits a lagging broker can still be answered from


def wall_us() -> int:
    return time.time_ns() // 1000


# ------------------------------------------------------------------ server side


class FloorLog:
    """Committed records in memory, and one future every parked fetch awaits."""

    def __init__(self) -> None:
        self.records: list[tuple[bytes, int]] = []  # (record, commit wall time µs)
        self.answers: dict[int, bytes] = {}  # fetch offset -> shared bytes, this HW
        self.commit = asyncio.get_running_loop().create_future()
        self.append(0)  # one record before the window: a first fetch is answered at once

    @property
    def high_watermark(self) -> int:
        return len(self.records)

    def wake(self) -> None:
        """Every parked fetch answers now (with whatever is new, maybe nothing)."""
        waiting, self.commit = self.commit, asyncio.get_running_loop().create_future()
        waiting.set_result(None)

    def append(self, commit_us: int) -> None:
        """One commit: a topic config record whose value carries its commit time
        (convergence's value is a retention.ms; this one is 16 digits, not 5)."""
        record = config_record(api.TOPIC, "convergence", "retention.ms", str(commit_us))
        self.records.append((record.SerializeToString(), commit_us))
        self.answers = {}
        self.wake()

    def shared(self, fetch_offset: int) -> bytes:
        """Encoded once per fetch offset and high watermark, as the controller does."""
        answer = self.answers.get(fetch_offset)
        if answer is None:
            response = bpb.MetadataFetchResponse(high_watermark=self.high_watermark)
            first = max(fetch_offset, self.high_watermark - KEEP_COMMITS)
            for offset in range(first, self.high_watermark):
                record, commit_us = self.records[offset]
                response.batches.add(
                    base_offset=offset, epoch=1, append_time_ms=commit_us // 1000,
                    commit_time_ms=commit_us // 1000, records=[record],
                )  # fmt: skip
            answer = self.answers[fetch_offset] = response.SerializeToString()
        return answer


class FloorServicer(BrokerLifecycleServicer):
    """Only MetadataFetchStream: park until a commit, answer, repeat. Answers are
    yielded, as the controller's are (`--answers write`: `WritingFloorServicer`)."""

    def __init__(self, log: FloorLog) -> None:
        self._log = log

    async def _answers(
        self, requests: AsyncIterator[bpb.MetadataFetchRequest]
    ) -> AsyncIterator[bytes]:
        log = self._log
        async for request in requests:
            received_ms = time.time_ns() // 1_000_000
            if request.fetch_offset >= log.high_watermark:
                await log.commit  # one future for all: the cheapest park there is
            own = bpb.MetadataFetchResponse(
                is_caught_up=True, controller_receive_time_ms=received_ms, controller_id=1,
                controller_send_time_ms=time.time_ns() // 1_000_000,
            )  # fmt: skip
            yield log.shared(request.fetch_offset) + own.SerializeToString()

    async def MetadataFetchStream(
        self, requests: AsyncIterator[bpb.MetadataFetchRequest], context: Any
    ) -> AsyncIterator[bytes]:
        async for answer in self._answers(requests):
            yield answer


class WritingFloorServicer(FloorServicer):
    """`--answers write`: the same answers written to the call (`context.write`),
    not passed up through the interceptors' generators (what FetchStream and
    WriteStream do since 6888c0f)."""

    async def MetadataFetchStream(  # type: ignore[override]
        self, requests: AsyncIterator[bpb.MetadataFetchRequest], context: Any
    ) -> None:
        async for answer in self._answers(requests):
            await context.write(answer)


async def serve(port: int, rate: float, answers: str) -> None:
    """Commits `rate` per second for the seconds a `start SECONDS` line asks."""
    log = FloorLog()
    server = new_server()
    servicer = WritingFloorServicer(log) if answers == "write" else FloorServicer(log)
    add_broker_lifecycle(servicer, server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    idle = asyncio.ensure_future(wake_idle(log))
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    print("ready", flush=True)
    while True:
        words = (await reader.readline()).decode().split()
        if not words or words[0] == "stop":
            break
        deadline = time.monotonic() + float(words[1])
        next_at = time.monotonic()
        while time.monotonic() < deadline:
            log.append(wall_us())
            next_at += 1 / rate
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))
        print("done", flush=True)
    idle.cancel()
    await server.stop(0)


async def wake_idle(log: FloorLog) -> None:
    """Parked fetches end after `MAX_WAIT_MS` without a commit, as a long poll
    does (one timer for all, where the controller keeps one per fetch)."""
    while True:
        seen = log.high_watermark
        await asyncio.sleep(MAX_WAIT_MS / 1000)
        if log.high_watermark == seen:
            log.wake()


# ------------------------------------------------------------------ client side


CLIENT_WORK_S = 0.0  # --client-work-us


class Broker:
    def __init__(self, broker_id: int, address: str) -> None:
        self.broker_id = broker_id
        self.channel = open_channel(address)
        self.stub = bpb_grpc.BrokerLifecycleStub(self.channel)
        self.next_offset = 0
        self.lags_ms: list[float] = []
        self.fetches = 0
        self.first = asyncio.get_running_loop().create_future()

    async def run(self) -> None:
        call = self.stub.MetadataFetchStream()
        while True:
            request = bpb.MetadataFetchRequest(
                cluster_id="floor", broker_id=self.broker_id, broker_epoch=1,
                fetch_offset=self.next_offset, current_state=bpb.ONLINE,
                max_wait_ms=MAX_WAIT_MS, broker_send_time_ms=time.time_ns() // 1_000_000,
            )  # fmt: skip
            response = await exchange(call, request, MAX_WAIT_MS / 1000 + 10)
            now_us = wall_us()
            self.fetches += 1
            for batch in response.batches:
                for data in batch.records:
                    commit_us = int(md.MetadataRecord.FromString(data).config.value)
                    if commit_us:
                        self.lags_ms.append((now_us - commit_us) / 1000)
            self.next_offset = response.high_watermark
            if CLIENT_WORK_S:  # the agent's apply, standing in: the loop's CPU, no await
                until = time.perf_counter() + CLIENT_WORK_S
                while time.perf_counter() < until:
                    pass
            if not self.first.done():
                self.first.set_result(None)


async def clients(port: int, first_id: int, count: int) -> None:
    """`count` brokers on one event loop; `start` clears their figures, `stop` reports."""
    gc_time = collector_clock()
    address = f"127.0.0.1:{port}"
    brokers = [Broker(first_id + i, address) for i in range(count)]
    tasks = [asyncio.ensure_future(b.run()) for b in brokers]
    await asyncio.gather(*(b.first for b in brokers))
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    print("ready", flush=True)
    started = time.monotonic()
    while True:
        line = (await reader.readline()).decode().strip()
        if line == "start":
            started = time.monotonic()
            for b in brokers:
                b.lags_ms.clear()
                b.fetches = 0
            gc_time["s"] = 0.0
        elif line in ("stop", ""):
            break
    seconds = time.monotonic() - started
    lags = [lag for b in brokers for lag in b.lags_ms]
    fetches = sum(b.fetches for b in brokers)
    failed = sum(1 for t in tasks if t.done())
    print(json.dumps({"lags": lags, "fetches": fetches, "seconds": seconds, "failed": failed,
                      "gc_s": gc_time["s"]}))  # fmt: skip
    for task in tasks:
        task.cancel()
    for b in brokers:
        await b.channel.close()


# ------------------------------------------------------------------ driver side


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def run_floor(brokers: int, args: argparse.Namespace) -> dict[str, Any]:
    port = free_port()
    me = [sys.executable, __file__]
    server = subprocess.Popen([*me, "--serve", str(port), "--rate", str(args.rate),
                               "--switch-interval", str(args.switch_interval),
                               "--answers", args.answers],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
    workers = min(args.workers, brokers)
    per = [brokers // workers + (1 if i < brokers % workers else 0) for i in range(workers)]
    procs: list[subprocess.Popen[str]] = []
    try:
        assert server.stdout is not None and server.stdin is not None
        assert server.stdout.readline().strip() == "ready"
        next_id = 1001
        for count in per:
            procs.append(subprocess.Popen(
                [*me, "--client", str(port), "--first-id", str(next_id), "--count", str(count),
                 "--client-work-us", str(args.client_work_us)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            ))  # fmt: skip
            next_id += count
        for p in procs:
            assert p.stdout is not None
            line = p.stdout.readline().strip()
            assert line == "ready", f"a client process did not connect: {line!r}"
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("start\n")
            p.stdin.flush()
        profile = None
        if args.profile_dir:
            out = Path(args.profile_dir) / f"floor-{brokers}-brokers.txt"
            profile = Profile(server.pid, out, args.seconds)
        watch = None
        if args.profile_clients_dir:  # one client process: py-spy and its threads
            out = Path(args.profile_clients_dir) / f"floor-clients-{brokers}-brokers.txt"
            watch = ProcessWatch(procs[0].pid, VENV_BIN / "py-spy", out, args.seconds,
                                 args.profile_rate)  # fmt: skip
        server_before, window_start = process_cpu_s(server.pid), time.monotonic()
        clients_before, idle_before = sum(process_cpu_s(p.pid) for p in procs), machine_idle_s()
        server.stdin.write(f"start {args.seconds}\n")
        server.stdin.flush()
        assert server.stdout.readline().strip() == "done"
        time.sleep(1.0)  # the last commits reach everyone, as in convergence.py
        server_cpu_s = process_cpu_s(server.pid) - server_before
        clients_cpu_s = sum(process_cpu_s(p.pid) for p in procs) - clients_before
        idle_s = machine_idle_s() - idle_before
        window_s = time.monotonic() - window_start
        if profile is not None:
            profile.finish()
        threads = watch.finish() if watch is not None else None
        reports = []
        for p in procs:
            out, _ = p.communicate("stop\n", timeout=120)
            reports.append(json.loads(out.strip().splitlines()[-1]))
        server.communicate("stop\n", timeout=30)
    finally:
        for p in [*procs, server]:
            if p.poll() is None:
                p.kill()
                p.wait()
    lags = [lag for r in reports for lag in r["lags"]]
    fetches = sum(r["fetches"] for r in reports)
    seconds = max(r["seconds"] for r in reports)
    commits = round(args.seconds * args.rate)
    result = {
        "system": "floor", "answers": args.answers,
        "switch_interval": args.switch_interval or sys.getswitchinterval(),
        "brokers": brokers, "workers": workers, "rate": args.rate,
        "commits": commits, "samples": len(lags), "expected_samples": commits * brokers,
        "p50": round(percentile(lags, 0.5), 2), "p99": round(percentile(lags, 0.99), 2),
        "max": round(max(lags), 2), "answers_per_s": round(fetches / seconds, 1),
        "server_cpu_us_per_answer": round(server_cpu_s / max(fetches, 1) * 1e6, 1),
        "server_cpu_share": round(server_cpu_s / window_s, 3),
        "clients_cpu_share": round(clients_cpu_s / window_s, 3),
        "idle_cores": round(idle_s / window_s, 3),  # the machine's cores nobody used
        "clients_cpu_us_per_answer": round(clients_cpu_s / max(fetches, 1) * 1e6, 1),
        "brokers_failed": sum(r["failed"] for r in reports), "load_average": load(),
        "clients_gc_s": round(sum(r["gc_s"] for r in reports), 3),
    }  # fmt: skip
    emit(metric="commit_to_receive_ms", value=result["p99"], **result)
    if threads is not None:
        emit(metric="client_process_threads", system="floor", brokers=brokers,
             fetches=reports[0]["fetches"], seconds=round(window_s, 2),
             threads=threads, io=watch.io if watch else {})  # fmt: skip
    return result


def run_quorum(brokers: int, args: argparse.Namespace) -> dict[str, Any]:
    """bench/convergence.py for this one broker count; its lines, tagged."""
    command = [sys.executable, str(Path(__file__).with_name("convergence.py")), "--brokers",
               str(brokers), "--seconds", str(args.seconds), "--rate", str(args.rate),
               "--workers", str(args.workers), "--skip-restart"]  # fmt: skip
    if args.profile_dir:  # the same run, its active controller profiled as the floor's server
        command[1:2] = [str(Path(__file__).with_name("spy.py")), "convergence", args.profile_dir]
    if args.profile_clients_dir:
        command += ["--profile-agent-dir", args.profile_clients_dir, "--time-parts",
                    "--profile-rate", str(args.profile_rate)]  # fmt: skip
    out = subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True).stdout
    merged: dict[str, Any] = {"system": "quorum", "brokers": brokers}
    for line in out.splitlines():
        fields = json.loads(line)
        emit(system="quorum", **fields)
        if fields["metric"] == "apply_lag_ms":
            merged.update(p50=fields["p50"], p99=fields["p99"], max=fields["max"])
        elif fields["metric"] == "metadata_fetch_per_s":
            merged["answers_per_s"] = fields["value"]
        elif fields["metric"] == "controller_cpu_us_per_commit_per_broker":
            merged["server_cpu_us_per_answer"] = fields["controller_cpu_us_per_fetch"]
            merged["clients_cpu_share"] = fields["agents_cpu_share"]
            merged["idle_cores"] = fields.get("idle_cores")
        merged["load_average"] = fields.get("load_average")
    return merged


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--brokers", default="200,500")
    parser.add_argument("--workers", type=int, default=4, help="as convergence.py's")
    parser.add_argument("--seconds", type=float, default=15)
    parser.add_argument("--rate", type=float, default=20)
    parser.add_argument("--systems", default="floor", help="floor, quorum, in this order")
    parser.add_argument(
        "--switch-interval",
        type=float,
        default=0.0,
        help="the server's sys.setswitchinterval (the controller's: 0.0002)",
    )
    parser.add_argument(
        "--answers",
        choices=("yield", "write"),
        default="yield",
        help="the server yields its answers (as the controller does) or writes them to the call",
    )
    parser.add_argument(
        "--profile-dir",
        help="py-spy (--native, 200 Hz) and per-thread CPU of the floor's server and the "
        "active controller over the window, here (bench/spy.py summary FILE reads them)",
    )
    parser.add_argument(
        "--profile-clients-dir", help="py-spy and thread split of one client process each"
    )
    parser.add_argument("--profile-rate", type=int, default=200, help="py-spy Hz; 0: none")
    parser.add_argument(
        "--client-work-us", type=float, default=0.0,
        help="CPU each floor client spends after an answer before its next request "
        "(a broker agent's apply: 45-62 us in bench/agent_fetch_cost.py)",
    )  # fmt: skip
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--client", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--first-id", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--count", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        if args.switch_interval:
            sys.setswitchinterval(args.switch_interval)
        asyncio.run(serve(args.serve, args.rate, args.answers))
        return
    if args.client:
        global CLIENT_WORK_S
        CLIENT_WORK_S = args.client_work_us / 1e6
        asyncio.run(clients(args.client, args.first_id, args.count))
        return
    systems = args.systems.split(",")
    assert set(systems) <= {"floor", "quorum"}, systems
    for brokers in (int(b) for b in args.brokers.split(",")):
        results = {}
        for system in systems:
            say(f"== {system}: {brokers} brokers, {args.rate} commits/s for {args.seconds} s")
            run = run_floor if system == "floor" else run_quorum
            results[system] = run(brokers, args)
        if len(results) == 2:
            floor, quorum = results["floor"], results["quorum"]
            emit(metric="fanout_floor_vs_quorum", brokers=brokers, order=systems,
                 floor_p50=floor["p50"], quorum_p50=quorum["p50"],
                 floor_p99=floor["p99"], quorum_p99=quorum["p99"],
                 floor_answers_per_s=floor["answers_per_s"],
                 quorum_answers_per_s=quorum.get("answers_per_s"),
                 floor_server_cpu_us_per_answer=floor["server_cpu_us_per_answer"],
                 quorum_controller_cpu_us_per_answer=quorum.get("server_cpu_us_per_answer"),
                 floor_clients_cpu_share=floor["clients_cpu_share"],
                 quorum_agents_cpu_share=quorum.get("clients_cpu_share"),
                 floor_idle_cores=floor.get("idle_cores"),
                 quorum_idle_cores=quorum.get("idle_cores"),
                 load_average=load())  # fmt: skip


if __name__ == "__main__":
    main()
