"""The log cleaner's throughput and memory, beside this disk's sequential bandwidth.

A partition log of --records records of --record-bytes bytes over --keys keys
(producer batches of --batch-records records, 16 MiB segments) is built once;
then, for each dedupe buffer size (`log.cleaner.dedupe.buffer.size`), a child
process copies it and cleans it until the whole dirty range is mapped (one
round per time the key -> offset map fills). Reported per buffer size: rounds,
records/s cleaned (records in the log / total time), MB/s of log read and
written (the map pass reads the dirty range, the rewrite reads every cleaned
segment and writes what it keeps), and the child's peak RSS growth while
cleaning (the map is a fixed buffer of that size; the rest is per-step
buffers). The disk's sequential write bandwidth (1 MiB writes, then one fsync)
is measured in the same run on the same file system.

`--produce` also measures produce throughput (acks=1, one replica, batches of
--batch-records records) through a ReplicaManager with the cleaner task running
beside it and with it disabled.

Prints one JSON object per line on stdout and nothing else. Example:

    .venv/bin/python bench/log_cleaner.py --records 100000 --keys 10000 --produce
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import google_crc32c

from broker_agent.partitions.assignments import MetadataView, PartitionAssignment
from broker_agent.partitions.log_cleaner import CleanerConfig, LogCleaner
from broker_agent.partitions.partition_log import LogConfig, PartitionLog
from broker_agent.partitions.producer_state import ProducerStateTable
from broker_agent.partitions.record_batch import split_batches
from broker_agent.partitions.record_codec import write_varint
from broker_agent.partitions.replica_config import ReplicaConfig
from broker_agent.partitions.replica_manager import ReplicaManager
from quorum.common.fsutil import sync_file

SEGMENT_BYTES = 16 << 20
NOW_MS = 1_700_000_000_000
_TAIL = struct.Struct(">hiqqqhii")


def make_batch(keys: list[int], value: bytes, base_offset: int = 0) -> bytes:
    """A producer's uncompressed batch (magic 2), written directly: kio's writer
    is too slow to build 1 GiB of input."""
    bodies = []
    for delta, key in enumerate(keys):
        k = b"key-%d" % key
        body = (
            b"\x00" + write_varint(0) + write_varint(delta)
            + write_varint(len(k)) + k + write_varint(len(value)) + value + write_varint(0)
        )  # fmt: skip
        bodies.append(write_varint(len(body)) + body)
    records = b"".join(bodies)
    tail = _TAIL.pack(0, len(keys) - 1, NOW_MS, NOW_MS, -1, -1, -1, len(keys)) + records
    crc = google_crc32c.value(tail)
    return struct.pack(">qiibI", base_offset, 49 + len(tail) - 40, 0, 2, crc) + tail


def build(directory: Path, records: int, record_bytes: int, keys: int, per_batch: int) -> int:
    config = LogConfig(segment_bytes=SEGMENT_BYTES, cleanup_policy="compact")
    plog = PartitionLog(directory, config, NOW_MS)
    value = os.urandom(record_bytes)
    done = 0
    while done < records:
        n = min(per_batch, records - done)
        batch = make_batch([(done + i) % keys for i in range(n)], value)
        plog.append_as_leader(split_batches(batch), 0, NOW_MS)
        done += n
    plog.store.roll()
    size = plog.size_bytes
    plog.close()
    return size


def disk_write_mb_per_s(directory: Path, megabytes: int = 256) -> float:
    path = directory / "raw-sequential"
    chunk = os.urandom(1 << 20)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        start = time.perf_counter()
        for _ in range(megabytes):
            os.write(fd, chunk)
        sync_file(fd)
        elapsed = time.perf_counter() - start
    finally:
        os.close(fd)
        path.unlink()
    return megabytes / elapsed


def clean_child(directory: Path, buffer_bytes: int) -> dict[str, object]:
    """In a fresh process: clean until everything dirty was mapped once."""
    plog = PartitionLog(directory, LogConfig(segment_bytes=SEGMENT_BYTES,
                                             cleanup_policy="compact"), NOW_MS)  # fmt: skip
    producers = ProducerStateTable()
    records = sum(h.records_count for h in plog.batch_headers())
    size_before = plog.size_bytes
    cleaner = LogCleaner(CleanerConfig(dedupe_buffer_size=buffer_bytes))
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    rounds = read = written = 0
    start = time.perf_counter()
    cpu_start = time.process_time()
    active = plog.store.segments[-1].base_offset
    while True:
        result = cleaner.clean(plog, plog.log_end_offset, NOW_MS, producers)
        rounds += 1
        read += result.bytes_read
        written += result.bytes_written
        if result.map_end >= active or rounds > 1000:
            break
    elapsed = time.perf_counter() - start
    cpu = time.process_time() - cpu_start
    rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    mapped = size_before  # the map passes read the whole dirty range once in all
    return {
        "dedupe_buffer_bytes": buffer_bytes,
        "rounds": rounds,
        "seconds": round(elapsed, 2),
        "records_per_s": round(records / elapsed),
        "read_mb_per_s": round((read + mapped) / elapsed / 1e6, 1),
        "written_mb_per_s": round(written / elapsed / 1e6, 1),
        # On a shared machine the wall clock counts other processes' turns too:
        # the same bytes over this process's own CPU time.
        "cpu_seconds": round(cpu, 2),
        "read_mb_per_cpu_s": round((read + mapped) / cpu / 1e6, 1),
        "written_mb_per_cpu_s": round(written / cpu / 1e6, 1),
        "log_mb_before": round(size_before / 1e6, 1),
        "log_mb_after": round(plog.size_bytes / 1e6, 2),
        "peak_rss_growth_mb": round((rss_after - rss_before) / 1024, 1),
        "load_average": [round(x, 1) for x in os.getloadavg()],
    }


async def produce(
    directory: Path,
    batches: int,
    per_batch: int,
    keys: int,
    record_bytes: int,
    cleaner: bool,
    throttle: float,
) -> dict[str, object]:
    config = ReplicaConfig(
        log=LogConfig(segment_bytes=SEGMENT_BYTES),
        tick_interval_ms=100,
        cleaner=CleanerConfig(enable=cleaner, backoff_ms=50, dedupe_buffer_size=16 << 20,
                              io_max_bytes_per_second=throttle),
    )  # fmt: skip
    manager = ReplicaManager(0, directory, config)
    await manager.start()
    topic = "bench"
    view = MetadataView(
        (PartitionAssignment(topic, "id", 0, (0,), (0,), 0, 0, 0),),
        {topic: {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.1"}},
    )
    manager.apply_metadata(view)
    value = os.urandom(record_bytes)
    payloads = [make_batch([(i * per_batch + j) % keys for j in range(per_batch)], value)
                for i in range(64)]  # fmt: skip
    start = time.perf_counter()
    for i in range(batches):
        result = await manager.append(topic, 0, payloads[i % 64], 1, 10_000)
        assert result.error.value == 0, result
        if i % 16 == 0:
            await asyncio.sleep(0)  # what a network listener's reads give the loop
    elapsed = time.perf_counter() - start
    runs = manager.cleaner.stats.runs
    await manager.close()
    return {
        "produce": "with cleaner" if cleaner else "without cleaner",
        "cleaner_io_max_mb_per_s": None if throttle == float("inf") else throttle / 1e6,
        "records_per_s": round(batches * per_batch / elapsed),
        "mb_per_s": round(batches * per_batch * record_bytes / elapsed / 1e6, 1),
        "cleaner_rounds": runs,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--record-bytes", type=int, default=1024)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--batch-records", type=int, default=10)
    parser.add_argument(
        "--buffers",
        default="134217728,4194304,1048576",
        help="dedupe buffer sizes in bytes, comma-separated (empty: no cleaning runs)",
    )
    parser.add_argument("--produce", action="store_true")
    parser.add_argument("--repeat", type=int, default=2, help="interleaved produce rounds")
    parser.add_argument(
        "--throttle-mb",
        type=float,
        default=5.0,
        help="log.cleaner.io.max.bytes.per.second of the throttled run, in MB",
    )
    parser.add_argument("--child", nargs=2, metavar=("DIR", "BUFFER"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(clean_child(Path(args.child[0]), int(args.child[1]))))
        return
    root = Path(tempfile.mkdtemp(prefix="bench-cleaner-", dir=os.environ.get("BENCH_DIR")))
    try:
        template = root / "template"
        size = build(template, args.records, args.record_bytes, args.keys, args.batch_records)
        print(json.dumps({"disk_sequential_write_mb_per_s": round(disk_write_mb_per_s(root), 1),
                          "log_mb": round(size / 1e6, 1), "records": args.records,
                          "keys": args.keys, "record_bytes": args.record_bytes,
                          "load_average": [round(x, 1) for x in os.getloadavg()]}))  # fmt: skip
        for buffer in (int(b) for b in args.buffers.split(",") if b.strip()):
            copy = root / f"clean-{buffer}"
            shutil.copytree(template, copy)
            out = subprocess.run(
                [sys.executable, __file__, "--child", str(copy), str(buffer)],
                capture_output=True, text=True, check=True,
            )  # fmt: skip
            print(out.stdout.strip(), flush=True)
            shutil.rmtree(copy)
        if args.produce:
            batches = args.records // args.batch_records
            unlimited, throttled = float("inf"), args.throttle_mb * 1e6
            runs = [(False, unlimited), (True, unlimited), (True, throttled)] * args.repeat
            for cleaner, throttle in runs:
                directory = root / f"produce-{cleaner}-{time.monotonic_ns()}"
                result = asyncio.run(produce(directory, batches, args.batch_records, args.keys,
                                             args.record_bytes, cleaner, throttle))  # fmt: skip
                print(json.dumps(result), flush=True)
                shutil.rmtree(directory)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
