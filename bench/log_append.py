"""Durable append throughput of FileLogStore against the raw disk it runs on.

For each batch size N (records of --record-bytes bytes) two loops run, each
doing exactly one flush (one fdatasync) per batch:

* sequential: append a batch, flush it, repeat;
* pipelined: what a server's driver does: the fsync of batch k runs on a
  flusher thread while the owner encodes and writes batch k+1
  (`begin_flush` fixes each flush to exactly one batch).

The raw limits are
measured in the same run, on the same file system, with the same sync call: a
bare 4 KiB write + sync loop (raw_fsyncs_per_s) and 100 KB writes + sync
(raw_write_mb_per_s; 100 KB is what one batch of 1000 records of 100 bytes
carries). This disk's speed drifts by tens of percent over seconds, so every
measurement runs in --slices short slices, interleaved round-robin with all
the others, and reports total work over total time.

Prints one JSON object per line on stdout and nothing else. Example:

    .venv/bin/python bench/log_append.py --seconds 4
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from quorum.common.fsutil import sync_file
from quorum.log.file_log import FileLogStore, PendingFlush
from quorum.raft.records import Batch

REPO = Path(__file__).resolve().parents[1]


def raw_sync_loop(directory: Path, chunk_bytes: int, seconds: float) -> tuple[int, float]:
    """Append `chunk_bytes` and sync, repeatedly; returns (syncs, elapsed)."""
    path = directory / f"raw-{chunk_bytes}"
    chunk = os.urandom(chunk_bytes)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        count = 0
        start = time.perf_counter()
        deadline = start + seconds
        while time.perf_counter() < deadline:
            os.write(fd, chunk)
            sync_file(fd)
            count += 1
        elapsed = time.perf_counter() - start
    finally:
        os.close(fd)
        path.unlink()
    return count, elapsed


def log_append_loop(
    directory: Path, batch: int, record_bytes: int, seconds: float
) -> tuple[int, float]:
    """Append + flush batches of `batch` records; returns (flushes, elapsed)."""
    log_dir = directory / f"log-{batch}"
    records = tuple(os.urandom(record_bytes) for _ in range(batch))
    log = FileLogStore(log_dir)
    try:
        offset = 0
        flushes = 0
        start = time.perf_counter()
        deadline = start + seconds
        while time.perf_counter() < deadline:
            log.append([Batch(offset, 1, records, append_time_ms=flushes)])
            offset += batch
            log.flush(offset)
            flushes += 1
        elapsed = time.perf_counter() - start
    finally:
        log.close()
        shutil.rmtree(log_dir)
    return flushes, elapsed


def pipelined_loop(
    directory: Path, batch: int, record_bytes: int, seconds: float
) -> tuple[int, float]:
    """Like log_append_loop, but batch k+1 is encoded and written while batch
    k's fsync runs on a flusher thread; returns (flushes, elapsed)."""
    log_dir = directory / f"pipelined-{batch}"
    records = tuple(os.urandom(record_bytes) for _ in range(batch))
    log = FileLogStore(log_dir)
    work: queue.SimpleQueue[PendingFlush | None] = queue.SimpleQueue()
    done: queue.SimpleQueue[int] = queue.SimpleQueue()

    def flusher() -> None:
        while (pending := work.get()) is not None:
            pending.complete()
            done.put(pending.end_offset)

    thread = threading.Thread(target=flusher, daemon=True)
    thread.start()
    try:
        offset = 0
        flushes = 0
        in_flight = False
        start = time.perf_counter()
        deadline = start + seconds
        while time.perf_counter() < deadline:
            log.append([Batch(offset, 1, records, append_time_ms=flushes)])
            offset += batch
            if in_flight:
                done.get()  # batch k-1 is durable: acknowledge it
            pending = log.begin_flush(offset)
            assert pending is not None and pending.end_offset == offset
            work.put(pending)
            in_flight = True
            time.sleep(0)  # hand the GIL to the flusher so its fsync starts now
            flushes += 1
        if in_flight:
            done.get()
        elapsed = time.perf_counter() - start
    finally:
        work.put(None)
        thread.join()
        log.close()
        shutil.rmtree(log_dir)
    return flushes, elapsed


def rate(samples: list[tuple[int, float]], scale: float = 1.0) -> float:
    return sum(count for count, _ in samples) * scale / sum(elapsed for _, elapsed in samples)


def emit(metric: str, value: float, **fields: object) -> None:
    print(json.dumps({"metric": metric, **fields, "value": round(value, 3)}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="per measurement")
    parser.add_argument("--slices", type=int, default=8)
    parser.add_argument("--batches", default="1,10,100,1000")
    parser.add_argument("--record-bytes", type=int, default=100)
    parser.add_argument("--dir", type=Path, default=REPO / "data" / "bench-tmp")
    args = parser.parse_args()
    batches = [int(b) for b in args.batches.split(",")]
    raw_chunk = 1000 * args.record_bytes
    slice_seconds = args.seconds / args.slices

    args.dir.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="log-append-", dir=args.dir))
    samples: dict[str, list[tuple[int, float]]] = {}
    try:
        runs: list[tuple[str, Callable[[], tuple[int, float]]]] = [
            ("raw_fsync", lambda: raw_sync_loop(workdir, 4096, slice_seconds)),
            ("raw_write", lambda: raw_sync_loop(workdir, raw_chunk, slice_seconds)),
        ]
        for b in batches:
            runs.append(
                (
                    f"log-{b}",
                    lambda b=b: log_append_loop(workdir, b, args.record_bytes, slice_seconds),
                )
            )
            runs.append(
                (
                    f"pipelined-{b}",
                    lambda b=b: pipelined_loop(workdir, b, args.record_bytes, slice_seconds),
                )
            )
        for _ in range(args.slices):
            for name, run in runs:
                samples.setdefault(name, []).append(run())
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    sync = "fdatasync" if hasattr(os, "fdatasync") else "fsync"
    raw_fsyncs = rate(samples["raw_fsync"])
    raw_mb = rate(samples["raw_write"], raw_chunk / 1e6)
    emit("raw_fsyncs_per_s", raw_fsyncs, write_bytes=4096, sync=sync)
    emit("raw_write_mb_per_s", raw_mb, write_bytes=raw_chunk, sync=sync)
    for mode, prefix in (("sequential", "log"), ("pipelined", "pipelined")):
        for b in batches:
            flushes = rate(samples[f"{prefix}-{b}"])
            mb = flushes * b * args.record_bytes / 1e6
            emit("durable_append_records_per_s", flushes * b, batch=b, mode=mode)
            emit("durable_append_mb_per_s", mb, batch=b, mode=mode)
            emit("durable_append_efficiency", mb / raw_mb, batch=b, mode=mode)
            # > 1: one durable append costs more than one bare 4 KiB write + sync.
            emit("durable_append_cost_vs_raw_fsync", raw_fsyncs / flushes, batch=b, mode=mode)


if __name__ == "__main__":
    main()
