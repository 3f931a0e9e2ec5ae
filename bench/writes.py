"""Durable replicated writes per second and failover time, beside etcd and ZooKeeper.

One write = one request that returns only once the write is committed on a
majority. The same asyncio driver runs every system: `concurrency` workers each
write after write (unique ~100-byte records) for `--seconds` after a 1 s warm-up,
then a failover measurement: writes at concurrency 1, `kill -9` the leader, and
the seconds until a write succeeds again, with 100 ms per attempt so the figure
is not rounded up to a client timeout. Every system runs three members on
loopback with default settings. Each throughput line also gives the CPU time
(user plus system, all threads) the three members and the client process spent
per write over the run, warm-up included.

The "floor" system (`bench/replication_floor.py`) is the same write path with
no consensus logic, driven by the same client: what Python's gRPC allows here
before any Raft work. It has a fixed leader, so it has no failover line.

    .venv/bin/python bench/writes.py [--systems floor,quorum,etcd,zookeeper]

Prints one JSON object per measurement on stdout; progress on stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from report import emit, percentile, process_cpu_s, say
from write_systems import SYSTEMS, Client, System, wait_for

RECORD_BYTES = 100
WARMUP_S = 1.0
FAILOVER_ATTEMPT_S = 0.1


async def throughput(client: Client, concurrency: int, seconds: float) -> dict[str, float]:
    """Writes/s and latency over `seconds` after the warm-up; `total` counts the
    warm-up's writes too (what CPU measured over the whole run is divided by)."""
    counter = itertools.count()
    latencies: list[float] = []
    measuring = False
    stop_at = time.monotonic() + WARMUP_S + seconds

    async def worker() -> None:
        while time.monotonic() < stop_at:
            n = next(counter)
            key = b"k%012d" % n
            started = time.perf_counter()
            await client.write(key, b"v" * (RECORD_BYTES - len(key)), None)
            if measuring:
                latencies.append(time.perf_counter() - started)

    async def clock() -> None:
        nonlocal measuring
        await asyncio.sleep(WARMUP_S)
        measuring = True

    started = time.monotonic()
    await asyncio.gather(clock(), *(worker() for _ in range(concurrency)))
    elapsed = time.monotonic() - started - WARMUP_S
    return {
        "value": round(len(latencies) / elapsed, 1),
        "p50_ms": round(percentile(latencies, 0.50) * 1000, 2),
        "p99_ms": round(percentile(latencies, 0.99) * 1000, 2),
        "writes": len(latencies),
        "total": next(counter) - concurrency,
    }


async def failover_once(system: System) -> float:
    client = await system.client()
    try:
        n = itertools.count()
        end = time.monotonic() + 1.0
        while time.monotonic() < end:  # steady writes first
            await client.write(b"f%012d" % next(n), b"x" * 80, FAILOVER_ATTEMPT_S)
        loop = asyncio.get_running_loop()
        leader = await loop.run_in_executor(None, system.leader)
        system.kill(leader)
        killed = time.monotonic()
        await client.write(b"f%012d" % next(n), b"x" * 80, FAILOVER_ATTEMPT_S)
        took = time.monotonic() - killed
    finally:
        await client.close()
    system.restart(leader)
    return took


def run_system(name: str, args: argparse.Namespace, root: Path) -> None:
    system: System = SYSTEMS[name](root)
    say(f"== {name}: starting three members under {root}")
    try:
        system.start()
    except Exception as err:
        emit(metric="error", system=name, value=f"could not start: {err}")
        system.stop()
        return
    try:
        for concurrency in args.concurrency:
            servers = [proc.pid for proc in system.members.procs.values()]
            servers_before = sum(process_cpu_s(pid) for pid in servers)
            client_before = time.process_time()
            result = asyncio.run(_measure(system, concurrency, args.seconds))
            total = result.pop("total")
            servers_cpu = sum(process_cpu_s(pid) for pid in servers) - servers_before
            emit(
                metric="writes_per_s",
                system=name,
                concurrency=concurrency,
                seconds=args.seconds,
                record_bytes=RECORD_BYTES,
                **result,
                servers_cpu_us_per_write=round(servers_cpu / total * 1e6),
                client_cpu_us_per_write=round((time.process_time() - client_before) / total * 1e6),
                load_average=round(os.getloadavg()[0], 1),
            )
        if args.failover_runs > 0 and system.fails_over:
            samples = []
            for _ in range(args.failover_runs):
                samples.append(round(asyncio.run(failover_once(system)), 3))
                say(f"   failover {samples[-1]:.3f}s")
                wait_for(lambda: system.leader() > 0, 60, f"{name} to recover")
                time.sleep(2.0)  # let the restarted member catch up
            emit(
                metric="failover_s",
                system=name,
                value=round(statistics.median(samples), 3),
                samples=samples,
                attempt_timeout_ms=int(FAILOVER_ATTEMPT_S * 1000),
            )
    except Exception as err:
        emit(metric="error", system=name, value=f"{type(err).__name__}: {err}")
    finally:
        system.stop()


async def _measure(system: System, concurrency: int, seconds: float) -> dict[str, float]:
    client = await system.client()
    try:
        return await throughput(client, concurrency, seconds)
    finally:
        await client.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--systems", default="floor,quorum,etcd,zookeeper")
    parser.add_argument("--concurrency", default="1,16,64")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--failover-runs", type=int, default=5)
    parser.add_argument("--keep-dir", action="store_true")
    args = parser.parse_args()
    args.concurrency = [int(c) for c in args.concurrency.split(",")]
    for name in args.systems.split(","):
        if name not in SYSTEMS:
            parser.error(f"unknown system {name!r} (choose from {', '.join(SYSTEMS)})")
        root = Path(tempfile.mkdtemp(prefix=f"bench-{name}-"))
        try:
            run_system(name, args, root)
        finally:
            if args.keep_dir:
                say(f"   kept {root}")
            else:
                shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
