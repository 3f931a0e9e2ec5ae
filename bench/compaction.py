"""Compaction's two performance goals (issue 34), in one run.

* Cleaner throughput: `bench/log_cleaner.py` builds a compacted partition log
  of --records records of --record-bytes bytes over --keys keys (1 GiB of
  1 KiB records over 100,000 keys by default) and cleans a copy in a child
  process per dedupe buffer size (`--buffers`) until its whole dirty range was
  mapped; beside it, this disk's sequential write bandwidth measured with
  `bench/log_append.py`'s raw loop (1 MiB and 16 MiB writes each followed by
  fdatasync, the larger figure counts) in the same directory, just before.
  `goal_cleaner_disk_share`: the cleaner's read + written MB/s over the
  disk's, by the wall clock and per CPU second of the child (goal: 0.3).
  `cleaner_disk_share_one_fsync`: the same over the other reading of the
  disk's sequential bandwidth, --buffered-mb of 1 MiB writes and one fsync at
  the end (`disk_one_fsync_mb_per_s`, higher where a cache absorbs the writes).
* Produce throughput with the cleaner running beside it without: three real
  brokers (the integration tests' launcher, as `bench/produce.py`), one
  compacted topic (`--partitions`, RF 3, small segments, a low
  `min.cleanable.dirty.ratio` so the cleaner has work all the time), and
  --producers librdkafka producers (`bench/produce_worker.py`, keyed records
  over --produce-keys keys) for --seconds per measurement. The brokers are
  restarted before every measurement with `log.cleaner.enable` false or true
  (the cleaner throttled by `log.cleaner.io.max.bytes.per.second`,
  `--throttle-mb`), alternating for --rounds rounds, so a round with the
  cleaner always finds the backlog the one before left dirty. Each
  measurement: records/s, MB/s, p50/p99 latency, the brokers' CPU seconds, the
  cleaners' MB read and written meanwhile (`io_bytes`, counted step by step: what the
  throttle meters), their rounds completed and MB written (counted when a
  round ends), and the load average.
  `goal_produce_with_cleaner_ratio`: the median records/s with the cleaner
  over the median without (goal: at least 0.8).

    .venv/bin/python bench/compaction.py [--quick] [--parts cleaner,produce]

One JSON object per measurement on stdout (`metric`, `value`, its parameters
and `load`, the 1-minute load average); progress on stderr. `--quick` is a
small run of every part (the smoke test's).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from log_append import raw_sync_loop
from log_cleaner import build, disk_write_mb_per_s
from produce import csv, run_workers
from report import percentile, process_cpu_s, say

from broker_agent.kafka.versions import ApiKey
from quorum.gen import admin_pb2 as admin_pb
from tests.integration.controller_cluster import Cluster, cluster_with_online_brokers, ctl_json
from tests.integration.kafka_wire import KafkaSocket, metadata_v12, wait_for_topic_everywhere

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
BROKERS = (101, 102, 103)
TOPIC = "bench-compacted"
CLEANER_METRICS = ("runs", "io_bytes", "written_bytes")


def load() -> float:
    return round(os.getloadavg()[0], 2)


def emit(metric: str, value: float | None, **params: Any) -> None:
    print(json.dumps({"metric": metric, "value": value, **params, "load": load()}), flush=True)


# ------------------------------------------------------- cleaner throughput


def disk_bandwidth(directory: Path, seconds: float) -> float:
    """Sequential write MB/s at 1 MiB and 16 MiB per synced write (the raw loop of
    bench/log_append.py, as bench/produce.py measures it); the larger."""
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


def cleaner_throughput(root: Path, args: argparse.Namespace) -> None:
    """bench/log_cleaner.py's log and child per buffer size, the disk just before each."""
    root.mkdir(parents=True, exist_ok=True)
    template = root / "template"
    say(f"cleaner: building {args.records:,} records over {args.keys:,} keys")
    size = build(template, args.records, args.record_bytes, args.keys, args.batch_records)
    log_params = {"records": args.records, "keys": args.keys, "record_bytes": args.record_bytes}
    emit("cleaner_log_mb", round(size / 1e6, 1), **log_params)
    for buffer in args.buffers:
        disk = disk_bandwidth(root, args.disk_seconds)
        # The other reading of "sequential bandwidth": 1 MiB writes, one fsync at
        # the end (bench/log_cleaner.py's figure; higher where a cache absorbs them).
        buffered = disk_write_mb_per_s(root, args.buffered_mb)
        emit("disk_one_fsync_mb_per_s", round(buffered, 1), chunk_bytes=1 << 20,
             megabytes=args.buffered_mb)  # fmt: skip
        copy = root / f"clean-{buffer}"
        shutil.copytree(template, copy)
        say(f"cleaner: cleaning with log.cleaner.dedupe.buffer.size={buffer}")
        child = subprocess.run(
            [sys.executable, str(BENCH / "log_cleaner.py"), "--child", str(copy), str(buffer)],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        shutil.rmtree(copy)
        result = json.loads(child.stdout)
        params = {**log_params, "dedupe_buffer_bytes": buffer, "rounds": result["rounds"],
                  "seconds": result["seconds"], "cpu_seconds": result["cpu_seconds"]}  # fmt: skip
        for metric in ("read_mb_per_s", "written_mb_per_s", "read_mb_per_cpu_s",
                       "written_mb_per_cpu_s", "records_per_s"):  # fmt: skip
            emit(f"cleaner_{metric}", result[metric], **params)
        emit("cleaner_log_mb_after", result["log_mb_after"], **params)
        wall = result["read_mb_per_s"] + result["written_mb_per_s"]
        cpu = result["read_mb_per_cpu_s"] + result["written_mb_per_cpu_s"]
        emit("goal_cleaner_disk_share", round(wall / disk, 3), clock="wall",
             disk_mb_per_s=round(disk, 1), goal=0.3, **params)  # fmt: skip
        emit("goal_cleaner_disk_share", round(cpu / disk, 3), clock="cpu",
             disk_mb_per_s=round(disk, 1), goal=0.3, **params)  # fmt: skip
        for clock, mb in (("wall", wall), ("cpu", cpu)):
            emit("cleaner_disk_share_one_fsync", round(mb / buffered, 3), clock=clock,
                 disk_mb_per_s=round(buffered, 1), goal=0.3, **params)  # fmt: skip


# ------------------------------------------- produce with and without it


def set_property(path: Path, key: str, value: str) -> None:
    lines = [line for line in path.read_text().splitlines() if not line.startswith(f"{key}=")]
    path.write_text("\n".join([*lines, f"{key}={value}"]) + "\n")


def restart_brokers(cluster: Cluster, cleaner: bool) -> None:
    """Every broker stopped (SIGTERM, a controlled shutdown) and started with
    `log.cleaner.enable` set; back when each is ONLINE and the topic's
    partitions have all three replicas in sync again."""
    for proc in cluster.brokers.values():
        set_property(proc.config, "log.cleaner.enable", str(cleaner).lower())
        if proc.popen is not None and proc.alive():
            proc.popen.send_signal(signal.SIGTERM)
    for proc in cluster.brokers.values():
        if proc.popen is not None:
            try:
                proc.popen.wait(60)
            except subprocess.TimeoutExpired:
                proc.popen.kill()
                proc.popen.wait(10)
    cluster.start_brokers()

    def online() -> list[int]:
        reply = cluster.call("admin", "DescribeCluster", admin_pb.DescribeClusterRequest())
        return sorted(b.broker_id for b in reply.brokers if b.state == "ONLINE")

    cluster.wait_until(lambda: online() == sorted(BROKERS), 120, "the brokers ONLINE")
    cluster.wait_until(lambda: all_in_sync(cluster), 120, "every replica back in sync")


def all_in_sync(cluster: Cluster) -> bool:
    for proc in cluster.brokers.values():
        with KafkaSocket("127.0.0.1", proc.port) as s:
            answer = s.request(ApiKey.METADATA, 12, metadata_v12([TOPIC]))
        partitions = answer.topics[0].partitions
        if not partitions or any(sorted(p.isr_nodes) != sorted(BROKERS) for p in partitions):
            return False
    return True


def cleaner_counters(cluster: Cluster) -> dict[str, float]:
    """The brokers' cleaner counters, summed (Prometheus counters end in _total)."""
    totals = dict.fromkeys(CLEANER_METRICS, 0.0)
    for proc in cluster.brokers.values():
        values = proc.metrics()
        for name in CLEANER_METRICS:
            totals[name] += values.get(f"quorum_broker_log_cleaner_{name}_total", 0.0)
    return totals


def broker_cpu(pids: list[int]) -> float:
    return sum(process_cpu_s(pid) for pid in pids)


def produce_runs(root: Path, args: argparse.Namespace) -> None:
    broker_settings = {
        "log__cleaner__enable": "false",
        "log__cleaner__backoff__ms": str(args.backoff_ms),
        "log__cleaner__dedupe__buffer__size": str(args.dedupe_buffer),
    }
    if args.throttle_mb > 0:
        throttle = str(int(args.throttle_mb * 1e6))
        broker_settings["log__cleaner__io__max__bytes__per__second"] = throttle
    with cluster_with_online_brokers(root / "kafka", *BROKERS, **broker_settings) as cluster:
        ctl_json(cluster, "topics", "create", TOPIC, "--partitions", str(args.partitions),
                 "--replication-factor", "3", "--config", "cleanup.policy=compact",
                 "--config", f"segment.bytes={args.segment_bytes}",
                 "--config", f"min.cleanable.dirty.ratio={args.dirty_ratio}")  # fmt: skip
        wait_for_topic_everywhere(cluster, TOPIC)
        bootstrap = ",".join(f"127.0.0.1:{p.port}" for p in cluster.brokers.values())
        worker = {"bootstrap": bootstrap, "topic": TOPIC, "acks": args.acks,
                  "linger_ms": args.linger, "seconds": args.seconds, "window": args.window,
                  "record_bytes": args.record_bytes, "records": 0,
                  "keys": args.produce_keys}  # fmt: skip
        rates: dict[bool, list[float]] = {False: [], True: []}
        for round_ in range(args.rounds):
            order = (False, True) if round_ % 2 == 0 else (True, False)
            for cleaner in order:
                say(f"produce: round {round_ + 1}, cleaner {'on' if cleaner else 'off'}")
                restart_brokers(cluster, cleaner)
                pids = [p.popen.pid for p in cluster.brokers.values() if p.popen is not None]
                before, cpu = cleaner_counters(cluster), broker_cpu(pids)
                outcome = run_workers("kafka", worker, args.producers)
                after, cpu = cleaner_counters(cluster), broker_cpu(pids) - cpu
                params = {
                    "round": round_ + 1,
                    "cleaner": cleaner,
                    "throttle_mb_per_s": args.throttle_mb if cleaner else None,
                    "producers": args.producers,
                    "acks": args.acks,
                    "linger_ms": args.linger,
                    "partitions": args.partitions,
                    "keys": args.produce_keys,
                    "record_bytes": args.record_bytes,
                    "seconds": round(outcome.seconds, 2),
                }
                rate = outcome.rate()
                rates[cleaner].append(rate)
                emit("produce_records_per_s", round(rate, 1), **params)
                emit("produce_mb_per_s", round(rate * args.record_bytes / 1e6, 2), **params)
                if outcome.latencies_ms:
                    for q, name in ((0.5, "produce_p50_latency_ms"),
                                    (0.99, "produce_p99_latency_ms")):  # fmt: skip
                        emit(name, round(percentile(outcome.latencies_ms, q), 2), **params)
                emit("produce_records_delivered", outcome.delivered, **params)
                emit("produce_records_failed", outcome.failed, first_error=outcome.first_error,
                     **params)  # fmt: skip
                emit("cleaner_io_mb_during", round((after["io_bytes"] - before["io_bytes"])
                                                   / 1e6, 2), **params)  # fmt: skip
                emit("cleaner_written_mb_during",
                     round((after["written_bytes"] - before["written_bytes"]) / 1e6, 2),
                     **params)  # fmt: skip
                emit("cleaner_rounds_during", after["runs"] - before["runs"], **params)
                emit("broker_cpu_s_during", round(cpu, 2), **params)
        without, with_ = statistics.median(rates[False]), statistics.median(rates[True])
        emit("goal_produce_with_cleaner_ratio", round(with_ / without, 3) if without else None,
             median_without=round(without, 1), median_with=round(with_, 1),
             throttle_mb_per_s=args.throttle_mb, rounds=args.rounds, goal=0.8)  # fmt: skip


# --------------------------------------------------------------------- main

QUICK = {
    "records": 20_000, "keys": 2_000, "buffers": [4 << 20], "disk_seconds": 0.2, "buffered_mb": 16,
    "seconds": 2.0, "rounds": 1, "producers": 1, "produce_keys": 500,
    "segment_bytes": 262_144, "backoff_ms": 200, "dedupe_buffer": 4 << 20, "window": 500,
}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", type=csv(str), default=["cleaner", "produce"])
    parser.add_argument("--quick", action="store_true", help="a small run of every part")
    parser.add_argument("--dir", type=Path, default=REPO / "data" / "bench-tmp")
    parser.add_argument("--record-bytes", type=int, default=1024)
    cleaner = parser.add_argument_group("cleaner throughput")
    cleaner.add_argument("--records", type=int, default=1_000_000)
    cleaner.add_argument("--keys", type=int, default=100_000)
    cleaner.add_argument("--batch-records", type=int, default=10)
    cleaner.add_argument("--buffers", type=csv(int), default=[134_217_728, 33_554_432])
    cleaner.add_argument("--disk-seconds", type=float, default=4.0)
    cleaner.add_argument("--buffered-mb", type=int, default=1024, help="one-fsync disk figure")
    produce = parser.add_argument_group("produce with and without the cleaner")
    produce.add_argument("--seconds", type=float, default=15.0, help="per measurement")
    produce.add_argument("--rounds", type=int, default=3, help="each: one without, one with")
    produce.add_argument("--producers", type=int, default=2)
    produce.add_argument("--acks", default="all")
    produce.add_argument("--linger", type=int, default=5)
    produce.add_argument("--window", type=int, default=4000)
    produce.add_argument("--partitions", type=int, default=1)
    produce.add_argument("--produce-keys", type=int, default=10_000)
    produce.add_argument("--segment-bytes", type=int, default=8 << 20)
    produce.add_argument("--dirty-ratio", type=float, default=0.1)
    produce.add_argument("--throttle-mb", type=float, default=5.0, help="0: unthrottled")
    produce.add_argument("--backoff-ms", type=int, default=1000)
    produce.add_argument("--dedupe-buffer", type=int, default=32 << 20)
    args = parser.parse_args()
    if args.quick:
        for key, value in QUICK.items():
            setattr(args, key, value)
    args.dir.mkdir(parents=True, exist_ok=True)
    emit("load_average_1m", load(), when="start")
    with tempfile.TemporaryDirectory(prefix="bench-compaction-", dir=args.dir) as tmp:
        if "cleaner" in args.parts:
            cleaner_throughput(Path(tmp) / "cleaner", args)
        if "produce" in args.parts:
            produce_runs(Path(tmp) / "produce", args)
    emit("load_average_1m", load(), when="end")


if __name__ == "__main__":
    main()
