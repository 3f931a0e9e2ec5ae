"""Analytics at scale: the export's memory, and the Spark job against pandas and DuckDB.

The exporter (`--export-sizes`, millions of apply-trace rows, default 1,3,10;
ten brokers, so a tenth as many committed records): synthetic raw data as a
real run leaves it (a controller directory whose log `FileLogStore` writes in
batches of 100 records; ten broker directories with `apply-trace.jsonl`,
lognormal lags, each broker's clock skewed by up to 300 ms, one broker stalling
for a while, and `broker-events.jsonl` with one fetch exchange per batch), then
`quorumctl log export` on it as a process: seconds and peak RSS
(`export_peak_rss_mb`: flat in the log size is the goal).

The analyses (`--sizes`, default 1,10,30): the same data written directly as an
export (vectorized; the exporter would take minutes to read 30 million JSON
lines), then

- `python -m analytics.convergence --master local[2]` as a process (JVM start
  included): seconds and rows/s;
- the same core computation (clock offsets per broker, controller and window by
  interval intersection; corrected lags, first apply per record, joined to the
  commits; exact p50/p95/p99/max per broker and record type and per broker and
  time window; records/s committed; periods behind) in plain pandas and in
  DuckDB, each in its own process, pandas stopped if its RSS passes
  `--pandas-limit-gb`; with the ratios to Spark.

One JSON object per measurement on stdout:

    .venv/bin/python bench/analytics.py [--sizes 1,10,30] [--export-sizes 1,3,10]
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
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
from report import emit, say

BROKERS = 10
BATCH = 100
CLUSTER_ID = "AnalyticsBenchClusterA"
T0 = 1_800_000_000_000
WINDOW_MS, OFFSET_WINDOW_MS, BEHIND_MS = 10_000, 60_000, 500.0
BIN = Path(sys.executable).parent


# ----------------------------------------------------------------- raw data


def write_meta(directory: Path, node_id: int) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "meta.properties").write_text(
        f"version=1\ncluster.id={CLUSTER_ID}\nnode.id={node_id}\n"
    )


def make_raw(root: Path, records: int, seed: int = 7) -> tuple[Path, list[Path]]:
    """A controller directory with `records` committed records and BROKERS broker
    directories that applied them all."""
    from quorum.controller.record_codec import encode, wrap
    from quorum.gen import metadata_pb2 as md
    from quorum.log.file_log import FileLogStore
    from quorum.raft.records import Batch

    rng = np.random.default_rng(seed)
    controller = root / "controller-1"
    write_meta(controller, 1)
    templates = [
        encode(
            wrap(
                partition_change=md.PartitionChangeRecord(
                    partition_id=p, topic_id="AAAAAAAAAAAAAAAAAAAAAA", leader=101 + p % BROKERS
                )
            )
        )
        for p in range(BATCH - 1)
    ] + [encode(wrap(topic=md.TopicRecord(name="bench", topic_id="AAAAAAAAAAAAAAAAAAAAAA")))]
    types = np.array(["partition_change"] * (BATCH - 1) + ["topic"])
    batches = records // BATCH
    append = T0 + np.arange(batches, dtype=np.int64) * 2  # a batch every 2 ms
    commit = append + rng.integers(1, 4, batches)
    with FileLogStore(controller / "__cluster_metadata-0") as log:
        for i in range(batches):
            log.append([Batch(i * BATCH, 1, tuple(templates), int(append[i]))])
            if i % 1000 == 999 or i == batches - 1:
                log.flush(log.end_offset)
    import pandas as pd

    broker_dirs = []
    for b in range(BROKERS):
        broker_id = 101 + b
        directory = root / f"broker-{broker_id}"
        write_meta(directory, broker_id)
        broker_dirs.append(directory)
        skew = int(rng.integers(-300, 301))  # controller minus broker clock
        there = rng.integers(0, 3, batches)
        back = rng.integers(0, 3, batches)
        t1 = commit - there - 1 - skew
        t2 = commit - 1
        t3 = commit
        t4 = commit + back - skew
        stall = np.zeros(batches, dtype=np.int64)
        if b == 0:  # one broker stalls for a second and a half, a third of the way in
            first = batches // 3
            stall[first : first + 500] = np.linspace(1500, 0, min(500, batches - first)).astype(
                np.int64
            )
        with (directory / "broker-events.jsonl").open("w") as events:
            for kind in ("started", "registered"):
                events.write(json.dumps({"broker_id": broker_id, "cluster_id": CLUSTER_ID,
                                         "event": kind, "time_ms": T0 - 1000 - skew,
                                         "state": "OFFLINE", "broker_epoch": 1,
                                         "offset": 0}) + "\n")  # fmt: skip
            frame = pd.DataFrame({
                "broker_id": broker_id, "cluster_id": CLUSTER_ID, "event": "fetch",
                "time_ms": t4, "fetch_send_time_ms": t1, "controller_receive_time_ms": t2,
                "controller_send_time_ms": t3, "receive_time_ms": t4, "controller_id": 1,
                "high_watermark": (np.arange(batches) + 1) * BATCH, "records": BATCH,
            })  # fmt: skip
            frame.to_json(events, orient="records", lines=True)
        with (directory / "apply-trace.jsonl").open("w") as trace:
            for start in range(0, batches, 10_000):
                sl = slice(start, min(batches, start + 10_000))
                n = sl.stop - sl.start
                rep = lambda a, sl=sl: np.repeat(a[sl], BATCH)  # noqa: E731
                lag = np.maximum(rep(back) + 1, rng.lognormal(1.5, 0.6, n * BATCH).astype(np.int64))
                apply_ = rep(commit) + lag + rep(stall) - skew
                offsets = np.arange(sl.start * BATCH, sl.stop * BATCH, dtype=np.int64)
                frame = pd.DataFrame({
                    "broker_id": broker_id, "offset": offsets, "epoch": 1,
                    "record_type": np.tile(types, n), "append_time_ms": rep(append),
                    "commit_time_ms": rep(commit), "receive_time_ms": rep(t4),
                    "apply_time_ms": apply_, "clock_offset_ms": (
                        ((rep(t2) - rep(t1)) + (rep(t3) - rep(t4))) / 2),
                    "state": "ONLINE", "fetch_send_time_ms": rep(t1),
                    "controller_receive_time_ms": rep(t2), "controller_send_time_ms": rep(t3),
                    "controller_id": 1,
                })  # fmt: skip
                frame.to_json(trace, orient="records", lines=True)
    return controller, broker_dirs


def make_export(out: Path, records: int, seed: int = 7) -> None:
    """The export `quorumctl log export` would write for `make_raw`'s data, written
    directly (vectorized), so the analyses can be timed at sizes whose raw
    traces would take the exporter long to read."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from analytics.schema import TABLES, schema_document
    from quorum.cli.export_writer import arrow_schema, write_schema

    rng = np.random.default_rng(seed)
    batches = records // BATCH
    n = batches * BATCH
    append = T0 + np.arange(batches, dtype=np.int64) * 2
    commit = append + rng.integers(1, 4, batches)
    types = np.tile(np.array(["partition_change"] * (BATCH - 1) + ["topic"]), batches)
    offsets = np.arange(n, dtype=np.int64)
    out.mkdir(parents=True)
    counts = {}

    def write(name: str, columns: dict[str, Any], rows: int) -> None:
        schema = arrow_schema(TABLES[name])
        (out / name).mkdir()
        data = {"schema_version": np.full(rows, 1, np.int32), **columns}
        table = pa.Table.from_pydict({f.name: data[f.name] for f in schema}, schema=schema)
        pq.write_table(table, out / name / "part-00000.parquet", compression="zstd",
                       row_group_size=1 << 20)  # fmt: skip
        counts[name] = counts.get(name, 0) + rows

    rep = lambda a: np.repeat(a, BATCH)  # noqa: E731
    write("log", {
        "offset": offsets, "leader_epoch": np.ones(n, np.int32),
        "batch_base_offset": offsets // BATCH * BATCH, "record_type": types,
        "control": np.zeros(n, bool), "entity_type": np.full(n, "partition"),
        "entity": np.full(n, "bench:0"), "topic": np.full(n, "bench"),
        "partition": (offsets % BATCH).astype(np.int32),
        "broker_id": pa.nulls(n, pa.int32()), "append_time_ms": rep(append),
        "commit_time_ms": rep(commit),
    }, n)  # fmt: skip
    applies, fetches = [], []
    for b in range(BROKERS):
        broker_id = 101 + b
        skew = int(rng.integers(-300, 301))
        there, back = rng.integers(0, 3, batches), rng.integers(0, 3, batches)
        t1, t2, t3, t4 = commit - there - 1 - skew, commit - 1, commit, commit + back - skew
        stall = np.zeros(batches, dtype=np.int64)
        if b == 0:
            first = batches // 3
            stall[first : first + 500] = np.linspace(1500, 0, min(500, batches - first)).astype(
                np.int64
            )
        lag = np.maximum(rep(back) + 1, rng.lognormal(1.5, 0.6, n).astype(np.int64))
        applies.append({
            "broker_id": np.full(n, broker_id, np.int32), "offset": offsets,
            "leader_epoch": np.ones(n, np.int32), "record_type": types,
            "state": np.full(n, "ONLINE"), "apply_time_ms": rep(commit) + lag + rep(stall) - skew,
            "commit_time_ms": rep(commit), "fetch_send_time_ms": rep(t1),
            "controller_receive_time_ms": rep(t2), "controller_send_time_ms": rep(t3),
            "receive_time_ms": rep(t4), "controller_id": np.ones(n, np.int32),
            "trace_clock_offset_ms": rep(((t2 - t1) + (t3 - t4)) / 2), "replay": np.zeros(n, bool),
        })  # fmt: skip
        fetches.append({
            "broker_id": np.full(batches, broker_id, np.int32), "fetch_send_time_ms": t1,
            "controller_receive_time_ms": t2, "controller_send_time_ms": t3,
            "receive_time_ms": t4, "controller_id": np.ones(batches, np.int32),
            "high_watermark": (np.arange(batches) + 1) * BATCH,
            "records": np.full(batches, BATCH, np.int32),
        })  # fmt: skip
    for name, parts, rows in (("apply", applies, n), ("fetches", fetches, batches)):
        (out / name).mkdir()
        schema = arrow_schema(TABLES[name])
        with pq.ParquetWriter(out / name / "part-00000.parquet", schema, compression="zstd") as w:
            for part in parts:
                data = {"schema_version": np.full(rows, 1, np.int32), **part}
                w.write_table(
                    pa.Table.from_pydict({f.name: data[f.name] for f in schema}, schema=schema),
                    row_group_size=1 << 20,
                )
        counts[name] = rows * BROKERS
    (out / "lifecycle").mkdir()
    pq.write_table(pa.Table.from_pylist([], schema=arrow_schema(TABLES["lifecycle"])),
                   out / "lifecycle" / "part-00000.parquet")  # fmt: skip
    counts["lifecycle"] = 0
    write_schema(out, schema_document("parquet", cluster_id=CLUSTER_ID, rows=counts,
                                      source="bench"))  # fmt: skip


# --------------------------------------------------------------- processes


def timed_process(command: list[str], rss_limit_gb: float | None = None) -> dict[str, Any]:
    """Run `command`: wall seconds, its peak RSS (MiB, VmHWM) and whether it was
    stopped for passing `rss_limit_gb`."""
    started = time.monotonic()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(command, stdout=out, stderr=err, text=True)
        stopped, peak = False, 0.0
        while proc.poll() is None:
            rss, hwm = _memory_gb(proc.pid)
            peak = max(peak, hwm)
            if rss_limit_gb is not None and rss > rss_limit_gb:
                proc.kill()
                stopped = True
            time.sleep(0.1)
        seconds = time.monotonic() - started
        out.seek(0)
        err.seek(0)
        return {"seconds": seconds, "rc": proc.returncode, "stdout": out.read(),
                "stderr": err.read(), "peak_rss_mb": peak * 1024, "stopped": stopped}  # fmt: skip


def _memory_gb(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of a live process, in GiB."""
    found = {"VmRSS:": 0.0, "VmHWM:": 0.0}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key = line.split(":", 1)[0] + ":"
                if key in found:
                    found[key] = int(line.split()[1]) / 1024 / 1024
    except (FileNotFoundError, ProcessLookupError):
        pass
    return found["VmRSS:"], found["VmHWM:"]


def peak_rss_of(command: list[str]) -> dict[str, Any]:
    """Peak RSS of exactly this process, via a wrapper that reports its child's."""
    wrapper = (
        "import os,subprocess,sys,time,json;t=time.monotonic();"
        "p=subprocess.Popen(sys.argv[1:]);_,s,u=os.wait4(p.pid,0);"
        "print(json.dumps({'rc':os.waitstatus_to_exitcode(s),'rss_mb':u.ru_maxrss/1024,"
        "'seconds':time.monotonic()-t}),file=sys.stderr)"
    )
    done = subprocess.run([sys.executable, "-c", wrapper, *command], capture_output=True,
                          text=True, check=False)  # fmt: skip
    result: dict[str, Any] = json.loads(done.stderr.strip().splitlines()[-1])
    result["stdout"] = done.stdout
    return result


# --------------------------------------------------------- pandas and DuckDB


def pandas_job(export: Path) -> dict[str, int]:
    import pandas as pd

    cols = ["broker_id", "controller_id", "fetch_send_time_ms", "controller_receive_time_ms",
            "controller_send_time_ms", "receive_time_ms"]  # fmt: skip
    f = pd.read_parquet(export / "fetches", columns=cols)
    f["window"] = f.controller_receive_time_ms // OFFSET_WINDOW_MS * OFFSET_WINDOW_MS
    f["low"] = f.controller_send_time_ms - f.receive_time_ms - 1
    f["high"] = f.controller_receive_time_ms - f.fetch_send_time_ms + 1
    keys = ["broker_id", "controller_id", "window"]
    est = f.groupby(keys).agg(low=("low", "max"), high=("high", "min")).reset_index()
    est["offset_ms"] = (est.low + est.high) / 2
    a = pd.read_parquet(export / "apply", columns=[
        "broker_id", "offset", "record_type", "apply_time_ms", "commit_time_ms",
        "controller_id", "controller_receive_time_ms"])  # fmt: skip
    a["window"] = a.controller_receive_time_ms // OFFSET_WINDOW_MS * OFFSET_WINDOW_MS
    a = a.merge(est[[*keys, "offset_ms"]], on=keys, how="left")
    a["apply_ms"] = a.apply_time_ms + a.offset_ms
    a = a.sort_values("apply_ms").drop_duplicates(["broker_id", "offset"])
    log = pd.read_parquet(export / "log", columns=["offset", "commit_time_ms", "append_time_ms"])
    a = a.merge(log[["offset", "commit_time_ms"]].rename(columns={"commit_time_ms": "lc"}),
                on="offset", how="left")  # fmt: skip
    a["lag"] = a.apply_ms - a.commit_time_ms.fillna(a.lc)
    qs = [0.5, 0.95, 0.99]
    by_type = a.groupby(["broker_id", "record_type"]).lag.quantile(qs).unstack()
    a["cw"] = a.commit_time_ms // WINDOW_MS * WINDOW_MS
    windows = a.groupby(["broker_id", "cw"]).lag.quantile(qs).unstack()
    maxes = a.groupby(["broker_id", "record_type"]).lag.max()
    rate = log.groupby(log.commit_time_ms.fillna(log.append_time_ms) // WINDOW_MS).size()
    a = a.sort_values(["broker_id", "offset"])
    behind = a.lag > BEHIND_MS
    starts = behind & ~behind.groupby(a.broker_id).shift(fill_value=False)
    a["island"] = starts.groupby(a.broker_id).cumsum()
    periods = (
        a[behind]
        .groupby(["broker_id", "island"])
        .agg(start=("commit_time_ms", "min"), end=("apply_ms", "max"), n=("offset", "size"))
    )
    return {"groups": len(by_type), "maxes": len(maxes), "windows": len(windows), "rate": len(rate),
            "behind_periods": len(periods)}  # fmt: skip


def duckdb_job(export: Path) -> dict[str, int]:
    import duckdb

    con = duckdb.connect()
    con.execute("SET threads TO 2; SET memory_limit = '6GB'; SET preserve_insertion_order = false")
    con.execute(f"SET temp_directory = '{export.parent / 'duckdb.tmp'}'")
    p = lambda t: f"read_parquet('{export / t}/*.parquet')"  # noqa: E731
    con.execute(f"""
        CREATE TEMP TABLE est AS
        SELECT broker_id, controller_id,
               controller_receive_time_ms // {OFFSET_WINDOW_MS} * {OFFSET_WINDOW_MS} AS w,
               (max(controller_send_time_ms - receive_time_ms - 1)
                + min(controller_receive_time_ms - fetch_send_time_ms + 1)) / 2 AS offset_ms
        FROM {p("fetches")} GROUP BY ALL""")
    con.execute(f"""
        CREATE TEMP TABLE lagged AS
        WITH a AS (
          SELECT a.broker_id, a."offset", a.record_type, a.commit_time_ms,
                 a.apply_time_ms + e.offset_ms AS apply_ms
          FROM {p("apply")} a LEFT JOIN est e
            ON a.broker_id = e.broker_id AND a.controller_id = e.controller_id
           AND a.controller_receive_time_ms // {OFFSET_WINDOW_MS} * {OFFSET_WINDOW_MS} = e.w),
        d AS (SELECT broker_id, "offset", any_value(record_type) AS record_type,
                     min(apply_ms) AS apply_ms, min(commit_time_ms) AS sent
              FROM a GROUP BY broker_id, "offset")
        SELECT d.*, d.apply_ms - coalesce(d.sent, l.commit_time_ms) AS lag,
               coalesce(d.sent, l.commit_time_ms) AS commit_ms
        FROM d LEFT JOIN {p("log")} l USING ("offset")""")
    q = "quantile_cont(lag, [0.5, 0.95, 0.99]) AS q, max(lag) AS m"
    groups = con.execute(f"SELECT broker_id, record_type, {q} FROM lagged GROUP BY ALL").fetchall()
    windows = con.execute(
        f"SELECT broker_id, commit_ms // {WINDOW_MS} AS w, {q} FROM lagged GROUP BY ALL"
    ).fetchall()
    rate = con.execute(
        f"SELECT coalesce(commit_time_ms, append_time_ms) // {WINDOW_MS}, count(*) "
        f"FROM {p('log')} GROUP BY ALL"
    ).fetchall()
    periods = con.execute(f"""
        WITH m AS (SELECT *, lag > {BEHIND_MS} AS behind,
                   lag(lag > {BEHIND_MS}) OVER (PARTITION BY broker_id ORDER BY "offset") AS prev
                   FROM lagged),
        i AS (SELECT *, sum(CASE WHEN behind AND NOT coalesce(prev, false) THEN 1 ELSE 0 END)
                        OVER (PARTITION BY broker_id ORDER BY "offset") AS island FROM m)
        SELECT broker_id, island, min(commit_ms), max(apply_ms), count(*)
        FROM i WHERE behind GROUP BY ALL""").fetchall()
    return {"groups": len(groups), "windows": len(windows), "rate": len(rate),
            "behind_periods": len(periods)}  # fmt: skip


# -------------------------------------------------------------------- main


def bench_export(millions: float, work: Path) -> None:
    """The exporter on raw data of this size: seconds and peak RSS."""
    rows = int(millions * 1_000_000)
    records = rows // BROKERS
    root = work / f"export-{millions:g}"
    shutil.rmtree(root, ignore_errors=True)
    say(f"[export {millions:g}M] generating {records:,} records x {BROKERS} brokers")
    controller, brokers = make_raw(root / "raw", records)
    command = [str(BIN / "quorumctl"), "log", "export", "--dir", str(controller),
               "--out", str(root / "export")]  # fmt: skip
    for b in brokers:
        command += ["--broker-dir", str(b)]
    done = peak_rss_of(command)
    assert done["rc"] == 0, done
    emit(metric="export_peak_rss_mb", value=round(done["rss_mb"], 1), apply_rows=rows,
         records=records, seconds=round(done["seconds"], 1),
         rows_per_s=round(rows / done["seconds"]))  # fmt: skip
    shutil.rmtree(root)


def bench_analysis(millions: float, work: Path, pandas_limit_gb: float) -> None:
    """Spark, pandas and DuckDB on a synthetic export of this size."""
    rows = int(millions * 1_000_000)
    root = work / f"analysis-{millions:g}"
    shutil.rmtree(root, ignore_errors=True)
    say(f"[analysis {millions:g}M] writing the export")
    export = root / "export"
    make_export(export, rows // BROKERS)
    command = [sys.executable, "-m", "analytics.convergence", "--input", str(export),
               "--out", str(root / "report"), "--master", "local[2]"]  # fmt: skip
    os.environ.setdefault("QUORUM_DRIVER_MEMORY", "6g")
    spark = timed_process(command)
    assert spark["rc"] == 0, spark["stderr"][-3000:]
    emit(metric="spark_job_s", value=round(spark["seconds"], 1), apply_rows=rows,
         master="local[2]", rows_per_s=round(rows / spark["seconds"]))  # fmt: skip
    for engine, limit in (("pandas", pandas_limit_gb), ("duckdb", None)):
        child = [sys.executable, __file__, f"--{engine}-child", str(export)]
        result = timed_process(child, limit)
        if result["stopped"] or result["rc"] != 0:
            reason = (f"RSS passed {pandas_limit_gb} GiB" if result["stopped"]
                      else result["stderr"].strip().splitlines()[-1][:200])  # fmt: skip
            emit(metric=f"{engine}_job_s", value=None, apply_rows=rows, failed=reason,
                 after_s=round(result["seconds"], 1))  # fmt: skip
            continue
        emit(metric=f"{engine}_job_s", value=round(result["seconds"], 1), apply_rows=rows,
             rows_per_s=round(rows / result["seconds"]),
             spark_ratio=round(result["seconds"] / spark["seconds"], 2),
             peak_rss_mb=round(result["peak_rss_mb"]))  # fmt: skip
    shutil.rmtree(root)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--sizes", default="1,10,30", help="millions of apply rows for the analyses"
    )
    parser.add_argument(
        "--export-sizes", default="1,3,10", help="millions of apply rows for the exporter's RSS"
    )
    parser.add_argument("--work", type=Path, default=None, help="scratch directory")
    parser.add_argument("--pandas-limit-gb", type=float, default=10.0)
    parser.add_argument("--pandas-child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--duckdb-child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.pandas_child:
        print(json.dumps(pandas_job(args.pandas_child)))
        return
    if args.duckdb_child:
        print(json.dumps(duckdb_job(args.duckdb_child)))
        return
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    work = args.work or Path(tempfile.mkdtemp(prefix="analytics-bench-"))
    try:
        for size in filter(None, args.export_sizes.split(",")):
            bench_export(float(size), work)
        for size in filter(None, args.sizes.split(",")):
            bench_analysis(float(size), work, args.pandas_limit_gb)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
