"""Produce throughput and latency on three brokers (RF 3), beside NATS JetStream
and the disk; broker memory and restart with 1,000 partition replicas (issue 29).

In one run:

* `disk_sequential_mb_per_s`: this disk's sequential write bandwidth, measured
  with `bench/log_append.py`'s raw loop (writes of `chunk_bytes`, each followed
  by fdatasync) in the directory the brokers write to; the goal is judged
  against the largest chunk's figure (the fastest, so the strictest).
* Kafka: three controllers and three brokers (the integration tests' launcher,
  default settings), one topic of `--partitions` partitions with RF 3. For each
  `acks` x `linger.ms` x producer count, that many processes with one librdkafka
  producer each (`confluent-kafka`, idempotence off) send 1 KiB records for
  `--seconds`, each with at most `--window` records unacknowledged (4,000 by
  default: nats-py's own bound on pending async publishes). Reported:
  records/s and MB/s (payload bytes acknowledged over the time from the common
  start to the last acknowledgement), p50/p99 delivery latency (produce call to
  delivery report), failed records, `replicated_write_mb_per_s` (bytes the three
  replicas' partition directories grew by, over the same time) and the brokers'
  CPU seconds per 1,000 records.
* NATS JetStream, the peer: three `nats-server` processes clustered on
  loopback (`bench/nats_cluster.py`), one file-backed stream with 3 replicas,
  `nats-py` publishers, the same payloads and producer counts. `mode=sync`:
  one publish in flight, each awaiting its acknowledgement; `mode=async`:
  `publish_async` with the same window as the Kafka producers (JetStream's
  answer to batching). Every JetStream publish is acknowledged once stored by
  a majority of the stream's replicas, so its peer line is Kafka's `acks=all`.
* `broker_rss_mb`: a topic of `--replica-partitions` partitions with RF 3 (so
  each of the three brokers holds that many replicas), one record produced to
  each, then VmRSS of every broker from /proc.
* Restart: one broker SIGKILLed, the others left to drop it from every ISR
  (fencing), then started again. From its spawn: `restart_listening_s` (its
  Kafka listener accepts a connection), `restart_unfenced_s` (a surviving
  broker's Metadata answer lists it among the live brokers), `restart_serving_s`
  (that answer shows it back in the ISR of every one of its replicas: caught up,
  and counted again by acks=all; and it answers Metadata itself). The goal is
  judged on the last.

    .venv/bin/python bench/produce.py [--seconds 5] [--producers 1,4,16]
        [--acks 1,all] [--linger 0,5] [--replica-partitions 1000]

One JSON object per measurement on stdout (`metric`, `value`, its
parameters); progress on stderr. `--replica-partitions 0` skips the memory and
restart part, `--systems kafka` the peer; `--replicas-only` runs only the memory
and restart part (`--replica-partitions` replicas per broker).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
# process_logs, which the tests' cluster launcher imports
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from log_append import raw_sync_loop
from nats_cluster import create_stream, nats_cluster, stream_messages
from produce_replicas import replica_memory_and_restart
from report import percentile, process_cpu_s, say

from tests.integration.controller_cluster import Cluster, cluster_with_online_brokers, ctl_json
from tests.integration.kafka_wire import wait_for_topic_everywhere

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
BROKERS = (101, 102, 103)
TOPIC = "bench-produce"
WORKER = BENCH / "produce_worker.py"


def emit(metric: str, value: float, **params: Any) -> None:
    print(json.dumps({"metric": metric, "value": value, **params}), flush=True)


# ------------------------------------------------------------------ disk


def disk_bandwidth(directory: Path, seconds: float) -> float:
    """Sequential write MB/s at 1 MiB and 16 MiB per synced write; the larger."""
    best = 0.0
    for chunk in (1 << 20, 16 << 20):
        count, elapsed = 0, 0.0
        for _ in range(4):  # slices: this disk's speed drifts over seconds
            c, e = raw_sync_loop(directory, chunk, seconds / 4)
            count, elapsed = count + c, elapsed + e
        mb = count * chunk / 1e6 / elapsed
        emit("disk_sequential_mb_per_s", round(mb, 1), chunk_bytes=chunk, sync="fdatasync")
        best = max(best, mb)
    return best


# --------------------------------------------------------------- workers


@dataclass
class Outcome:
    delivered: int
    failed: int
    seconds: float
    latencies_ms: list[float]
    first_error: str

    def rate(self) -> float:
        return self.delivered / self.seconds if self.seconds > 0 else 0.0


def run_workers(system: str, params: dict[str, Any], count: int) -> Outcome:
    """`count` producer processes started together; their summed result."""
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER), system, json.dumps(params)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(count)
    ]
    try:
        for p in procs:
            assert p.stdout is not None
            line = p.stdout.readline().strip()
            if line != "ready":
                raise RuntimeError(f"{system} worker did not start: {line!r}")
        start = time.time() + 0.2
        for p in procs:
            assert p.stdin is not None
            p.stdin.write(f"{start}\n")
            p.stdin.flush()
        results = []
        for p in procs:
            assert p.stdout is not None
            results.append(json.loads(p.stdout.readline()))
            p.wait(30)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    last = max((r["last"] for r in results), default=start)
    return Outcome(
        delivered=sum(r["delivered"] for r in results),
        failed=sum(r["failed"] for r in results),
        seconds=max(last - start, 1e-9),
        latencies_ms=[v for r in results for v in r["latencies_ms"]],
        first_error=next((r["first_error"] for r in results if r["first_error"]), ""),
    )


def report(system: str, outcome: Outcome, record_bytes: int, **params: Any) -> None:
    rate = outcome.rate()
    emit("records_per_s", round(rate, 1), system=system, **params)
    emit("mb_per_s", round(rate * record_bytes / 1e6, 2), system=system, **params)
    if outcome.latencies_ms:
        for q, name in ((0.5, "p50_latency_ms"), (0.99, "p99_latency_ms")):
            emit(name, round(percentile(outcome.latencies_ms, q), 2), system=system, **params)
    emit("records_delivered", outcome.delivered, system=system, **params)
    emit("records_failed", outcome.failed, system=system, first_error=outcome.first_error,
         **params)  # fmt: skip


def cpu_of(pids: list[int]) -> float:
    return sum(process_cpu_s(pid) for pid in pids)


# ----------------------------------------------------------------- kafka


def replica_bytes(cluster: Cluster, prefix: str) -> int:
    """Bytes in every broker's directories of the topic's partitions."""
    total = 0
    for proc in cluster.brokers.values():
        for directory in proc.data_dir.glob(f"{prefix}-*"):
            total += sum(f.stat().st_size for f in directory.iterdir() if f.is_file())
    return total


def kafka_runs(cluster: Cluster, args: argparse.Namespace) -> dict[tuple[str, int, int], float]:
    """Every acks x linger x producers line; records/s by (acks, linger, producers)."""
    ctl_json(cluster, "topics", "create", TOPIC, "--partitions", str(args.partitions),
             "--replication-factor", "3")  # fmt: skip
    wait_for_topic_everywhere(cluster, TOPIC)
    bootstrap = ",".join(f"127.0.0.1:{p.port}" for p in cluster.brokers.values())
    pids = [p.popen.pid for p in cluster.brokers.values() if p.popen is not None]
    rates: dict[tuple[str, int, int], float] = {}
    for acks in args.acks:
        for linger in args.linger:
            for producers in args.producers:
                say(f"kafka: acks={acks} linger.ms={linger} producers={producers}")
                params = {"bootstrap": bootstrap, "topic": TOPIC, "acks": acks,
                          "linger_ms": linger, "seconds": args.seconds, "window": args.window,
                          "record_bytes": args.record_bytes, "records": args.records}  # fmt: skip
                size, cpu = replica_bytes(cluster, TOPIC), cpu_of(pids)
                outcome = run_workers("kafka", params, producers)
                grown, cpu = replica_bytes(cluster, TOPIC) - size, cpu_of(pids) - cpu
                line = {"acks": acks, "linger_ms": linger, "producers": producers,
                        "partitions": args.partitions, "load": os.getloadavg()[0]}  # fmt: skip
                report("kafka", outcome, args.record_bytes, **line)
                emit("replicated_write_mb_per_s", round(grown / 1e6 / outcome.seconds, 2),
                     system="kafka", **line)  # fmt: skip
                if outcome.delivered:
                    per_1000 = round(cpu * 1e6 / outcome.delivered, 2)
                    emit("server_cpu_ms_per_1000_records", per_1000, system="kafka", **line)
                rates[(acks, linger, producers)] = outcome.rate()
    ctl_json(cluster, "topics", "delete", TOPIC)
    return rates


# ------------------------------------------------------------------ nats


def nats_runs(root: Path, args: argparse.Namespace) -> dict[tuple[str, int], float]:
    """Sync and async publishers per producer count; records/s by (mode, producers)."""
    rates: dict[tuple[str, int], float] = {}
    with nats_cluster(root) as servers:
        pids = [s.popen.pid for s in servers if s.popen is not None]
        for index, (mode, producers) in enumerate(
            (m, n) for m in args.nats_modes for n in args.producers
        ):
            stream, subject = f"BENCH{index}", f"bench.produce.{index}"
            create_stream(servers, stream, subject, replicas=3)
            say(f"nats: mode={mode} producers={producers}")
            params = {"servers": [s.url for s in servers], "subject": subject,
                      "window": 1 if mode == "sync" else args.window, "seconds": args.seconds,
                      "record_bytes": args.record_bytes, "records": args.records}  # fmt: skip
            cpu = cpu_of(pids)
            outcome = run_workers("nats", params, producers)
            cpu = cpu_of(pids) - cpu
            line = {"mode": mode, "producers": producers, "replicas": 3, "storage": "file",
                    "load": os.getloadavg()[0]}  # fmt: skip
            report("nats", outcome, args.record_bytes, **line)
            emit("stream_messages", stream_messages(servers, stream), system="nats", **line)
            if outcome.delivered:
                emit("server_cpu_ms_per_1000_records", round(cpu * 1e6 / outcome.delivered, 2),
                     system="nats", **line)  # fmt: skip
            rates[(mode, producers)] = outcome.rate()
    return rates


# ------------------------------------------------------------------ main


def csv(kind: Callable[[str], Any]) -> Callable[[str], list[Any]]:
    return lambda text: [kind(v) for v in text.split(",") if v]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="per line")
    parser.add_argument("--producers", type=csv(int), default=[1, 4, 16])
    parser.add_argument("--acks", type=csv(str), default=["1", "all"])
    parser.add_argument("--linger", type=csv(int), default=[0, 5])
    parser.add_argument("--window", type=int, default=4000, help="unacknowledged per producer")
    parser.add_argument("--record-bytes", type=int, default=1024)
    parser.add_argument("--records", type=int, default=0, help="per producer, 0: no cap")
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--systems", type=csv(str), default=["kafka", "nats"])
    parser.add_argument("--nats-modes", type=csv(str), default=["sync", "async"])
    parser.add_argument("--replica-partitions", type=int, default=1000)
    parser.add_argument("--disk-seconds", type=float, default=4.0)
    parser.add_argument("--dir", type=Path, default=REPO / "data" / "bench-tmp")
    parser.add_argument(
        "--replicas-only",
        action="store_true",
        help="only the memory and restart part (no disk, throughput or peer)",
    )
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    emit("load_average_1m", os.getloadavg()[0], when="start")
    with tempfile.TemporaryDirectory(prefix="bench-produce-", dir=args.dir) as tmp:
        root = Path(tmp)
        if args.replicas_only:
            with cluster_with_online_brokers(root / "kafka", *BROKERS) as cluster:
                try:
                    replica_memory_and_restart(cluster, args.replica_partitions or 1000, emit)
                finally:  # the processes' logs, for the timeline of the restart
                    kept = args.dir / "replicas-only-logs"
                    shutil.rmtree(kept, ignore_errors=True)
                    shutil.copytree(cluster.root / "logs", kept)
                    say(f"process logs kept in {kept}")
            emit("load_average_1m", os.getloadavg()[0], when="end")
            return
        disk = disk_bandwidth(root, args.disk_seconds)
        kafka: dict[tuple[str, int, int], float] = {}
        if "kafka" in args.systems:
            with cluster_with_online_brokers(root / "kafka", *BROKERS) as cluster:
                kafka = kafka_runs(cluster, args)
                if args.replica_partitions:
                    replica_memory_and_restart(cluster, args.replica_partitions, emit)
        nats: dict[tuple[str, int], float] = {}
        if "nats" in args.systems:
            nats = nats_runs(root / "nats", args)
    goals(kafka, nats, disk, args)
    emit("load_average_1m", os.getloadavg()[0], when="end")


def goals(
    kafka: dict[tuple[str, int, int], float],
    nats: dict[tuple[str, int], float],
    disk: float,
    args: argparse.Namespace,
) -> None:
    """The issue's throughput goals from this run's lines (acks=all with batching)."""
    batched = max(args.linger)
    for producers in args.producers:
        rate = kafka.get(("all", batched, producers))
        if rate is None:
            continue
        replicated = 3 * rate * args.record_bytes / 1e6
        emit("goal_disk_share", round(replicated / disk, 3), producers=producers,
             linger_ms=batched, goal=0.5)  # fmt: skip
        peer = nats.get(("async", producers))
        if peer:
            emit("goal_vs_jetstream", round(rate / peer, 3), producers=producers,
                 linger_ms=batched, goal=1.0)  # fmt: skip


if __name__ == "__main__":
    main()
