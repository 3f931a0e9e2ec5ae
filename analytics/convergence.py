"""Convergence lag of the metadata log: from a controller's commit to each broker's apply.

    python -m analytics.convergence --input EXPORT_DIR --out REPORT_DIR \\
        [--master local[*]|spark://HOST:PORT|k8s://...] [--charts]

Reads an export of `quorumctl log export` (and nothing else: no live internals)
and computes, with Spark's DataFrame API and without collecting the data set
to the driver:

- each broker's clock offset per controller and time window, from its fetch
  exchanges (`analytics/clock_offsets.py`), and every apply's corrected lag
  `apply + offset - commit` with the offset's uncertainty;
- lag percentiles (p50, p95, p99, max; exact) per broker and record type, per
  broker over time windows, and as a CDF per broker; records/s committed;
- catch-up episodes: a broker fenced, restarted or loading a snapshot, from
  then until it had applied everything committed by then;
- periods in which a broker's lag passed a threshold, and how long they lasted.

Writes Parquet tables and `summary.json` into REPORT_DIR; `--charts` also
renders the PNGs of `analytics/charts.py`. Bad input (no such directory, not
an export, an empty one, an unknown schema version) exits 1 with a message and
before Spark starts.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from analytics import clock_offsets
from analytics.schema import TABLES, SchemaError, read_schema

SPARK_TYPES = {
    "int32": T.IntegerType(),
    "int64": T.LongType(),
    "double": T.DoubleType(),
    "string": T.StringType(),
    "bool": T.BooleanType(),
}
PERCENTILES = "array(0.5, 0.95, 0.99)"
CDF_POINTS = "array(" + ", ".join(f"{i / 100:.2f}" for i in range(101)) + ")"
EXIT_BAD_INPUT = 1


def check_export(export_dir: Path) -> dict[str, Any]:
    """The export's schema document; raises SchemaError for anything unreadable."""
    document = read_schema(export_dir)
    rows = document.get("rows", {})
    if not rows.get("log") or not rows.get("apply"):
        raise SchemaError(
            f"{export_dir}: empty export ({rows.get('log', 0)} committed records, "
            f"{rows.get('apply', 0)} applies): nothing to analyse"
        )
    return document


def read_table(spark: SparkSession, export_dir: Path, name: str, format_: str) -> DataFrame:
    schema = T.StructType(
        [T.StructField(c.name, SPARK_TYPES[c.type], c.nullable) for c in TABLES[name]]
    )
    path = str(export_dir / name)
    if format_ == "parquet":
        return spark.read.schema(schema).parquet(path)
    return spark.read.schema(schema).json(path)


def session(master: str, app_name: str = "quorum-convergence") -> SparkSession:
    """A Spark session on `master`; small shuffles, no UI (loopback by default)."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", os.environ.get("QUORUM_SHUFFLE_PARTITIONS", "4"))
        .config("spark.driver.host", os.environ["SPARK_LOCAL_IP"])
        .config("spark.driver.bindAddress", os.environ["SPARK_LOCAL_IP"])
        .config("spark.driver.memory", os.environ.get("QUORUM_DRIVER_MEMORY", "2g"))
        .config("spark.sql.session.timeZone", "UTC")
    )
    return builder.getOrCreate()


def _pcts(column: str) -> list[Any]:
    p = F.expr(f"percentile({column}, {PERCENTILES})")
    return [
        p[0].alias("p50_ms"),
        p[1].alias("p95_ms"),
        p[2].alias("p99_ms"),
        F.max(column).alias("max_ms"),
        F.min(column).alias("min_ms"),
    ]


def run(
    spark: SparkSession,
    export_dir: Path,
    out_dir: Path,
    window_s: float = 10.0,
    offset_window_s: float = 60.0,
    behind_threshold_ms: float = 500.0,
) -> dict[str, Any]:
    """The whole analysis; returns (and writes) the summary."""
    document = check_export(export_dir)
    fmt = document["format"]
    window_ms, offset_window_ms = int(window_s * 1000), int(offset_window_s * 1000)
    log = read_table(spark, export_dir, "log", fmt)
    raw = read_table(spark, export_dir, "apply", fmt)
    fetches = read_table(spark, export_dir, "fetches", fmt)
    lifecycle = read_table(spark, export_dir, "lifecycle", fmt)
    out_dir.mkdir(parents=True, exist_ok=True)

    def save(df: DataFrame, name: str, *order: str) -> None:
        """A small result as one sorted file (sorting one partition: no range job)."""
        df.coalesce(1).sortWithinPartitions(*order).write.mode("overwrite").parquet(
            str(out_dir / name)
        )

    # Clock offsets: per broker, controller and window, and per broker and controller.
    sample = clock_offsets.samples(fetches, offset_window_ms)
    sample = sample.persist()
    windowed = clock_offsets.estimate(
        sample, ["broker_id", "controller_id", "window_start_ms"]
    ).persist()
    overall = clock_offsets.estimate(sample, ["broker_id", "controller_id"]).persist()
    save(windowed, "clock_offsets", "broker_id", "controller_id", "window_start_ms")
    per_broker = (
        windowed.groupBy("broker_id")
        .agg(F.expr("percentile(offset_ms, 0.5)").alias("broker_offset_ms"))
        .persist()
    )

    # Every apply, corrected; a record applied twice (a replay after a crash) counts
    # once. Offsets and commits are small: broadcast, so the applies never shuffle.
    key = F.coalesce(
        "controller_receive_time_ms", F.col("apply_time_ms") + F.col("trace_clock_offset_ms")
    )
    commits = log.select(
        "offset",
        F.col("commit_time_ms").alias("log_commit_ms"),
        F.coalesce("commit_time_ms", "append_time_ms").alias("commit_clock_ms"),
        F.col("record_type").alias("log_record_type"),
    ).persist()
    offset_ms = F.coalesce("w_off", "b_off", "trace_clock_offset_ms")
    applied = (
        raw.where(~F.col("replay"))
        .select(
            "broker_id", "offset", "record_type", "state", "apply_time_ms",
            "commit_time_ms", "trace_clock_offset_ms",
            F.coalesce("controller_id", F.lit(-1)).alias("controller_id"),
            clock_offsets.window_start(key, offset_window_ms).alias("window_start_ms"),
        )
        .join(
            F.broadcast(windowed.select(
                "broker_id", "controller_id", "window_start_ms",
                F.col("offset_ms").alias("w_off"), F.col("uncertainty_ms").alias("w_unc"),
            )),
            ["broker_id", "controller_id", "window_start_ms"], "left",
        )
        .join(
            F.broadcast(overall.select(
                "broker_id", "controller_id", F.col("offset_ms").alias("b_off"),
                F.col("uncertainty_ms").alias("b_unc"),
            )),
            ["broker_id", "controller_id"], "left",
        )
        .join(F.broadcast(commits), "offset", "left")
        .select(
            "broker_id", "offset", "record_type", "state",
            (F.col("apply_time_ms") + offset_ms).alias("apply_ms"),
            offset_ms.alias("offset_ms"),
            F.coalesce("w_unc", "b_unc").alias("uncertainty_ms"),
            F.coalesce("commit_time_ms", "log_commit_ms").alias("commit_ms"),
            F.col("log_record_type").isNotNull().alias("matched"),
        )
        .withColumn("lag_ms", F.col("apply_ms") - F.col("commit_ms"))
        .persist()
    )  # fmt: skip
    lagged = applied.where(F.col("lag_ms").isNotNull())

    by_type = lagged.groupBy("broker_id", "record_type").agg(
        F.count("*").alias("records"),
        *_pcts("lag_ms"),
        F.max("uncertainty_ms").alias("max_uncertainty_ms"),
    )
    save(by_type, "lag_by_broker_type", "broker_id", "record_type")
    by_broker = lagged.groupBy("broker_id").agg(F.count("*").alias("records"), *_pcts("lag_ms"))
    cdf = lagged.groupBy("broker_id").agg(F.expr(f"percentile(lag_ms, {CDF_POINTS})").alias("lags"))
    save(
        cdf.select("broker_id", F.posexplode("lags").alias("i", "lag_ms")).select(
            "broker_id", (F.col("i") / 100).alias("quantile"), "lag_ms"
        ),
        "lag_cdf",
        "broker_id",
        "quantile",
    )
    win = clock_offsets.window_start(F.col("commit_ms"), window_ms).alias("window_start_ms")
    per_window = lagged.groupBy("broker_id", win).agg(
        F.count("*").alias("records"), *_pcts("lag_ms")
    )
    all_window = lagged.groupBy(win).agg(F.count("*").alias("records"), *_pcts("lag_ms"))
    save(
        per_window.unionByName(all_window.withColumn("broker_id", F.lit(-1))),
        "lag_windows",
        "broker_id",
        "window_start_ms",
    )
    rate = log.groupBy(
        clock_offsets.window_start(F.coalesce("commit_time_ms", "append_time_ms"), window_ms).alias(
            "window_start_ms"
        )
    ).agg(F.count("*").alias("records"))
    save(
        rate.withColumn("records_per_s", F.col("records") / window_s),
        "commit_rate",
        "window_start_ms",
    )

    # Lifecycle on the controller's clock; catch-up episodes; periods behind.
    events = lifecycle.join(per_broker, "broker_id", "left").select(
        "broker_id", "event", "source", "offset", "broker_epoch",
        F.when(F.col("clock") == "broker",
               F.col("time_ms") + F.coalesce("broker_offset_ms", F.lit(0.0)))
        .otherwise(F.col("time_ms").cast("double")).alias("time_ms"),
    )  # fmt: skip
    save(events, "events", "time_ms", "broker_id", "event", "source")
    episodes = catch_up_episodes(events, commits, applied)
    save(episodes, "catch_up_episodes", "start_ms", "broker_id", "kind")
    behind = behind_periods(lagged, behind_threshold_ms)
    save(behind, "behind_periods", "broker_id", "start_ms")

    summary = {
        "schema_version": document["schema_version"],
        "cluster_id": document.get("cluster_id"),
        "window_s": window_s,
        "offset_window_s": offset_window_s,
        "behind_threshold_ms": behind_threshold_ms,
        "records": _counts(log, raw, applied),
        "lag_ms": {
            "all": _stats_row(lagged.agg(F.count("*").alias("records"), *_pcts("lag_ms")).first()),
            "by_broker": {str(r["broker_id"]): _stats_row(r) for r in by_broker.collect()},
        },
        "clock_offsets": _offsets(overall),
        "catch_up_episodes": _rows(episodes, "start_ms", "broker_id", "kind"),
        "behind_periods": _rows(behind, "broker_id", "start_ms"),
    }
    summary["brokers_behind"] = sorted({p["broker_id"] for p in summary["behind_periods"]})
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    for cached in (applied, sample, windowed, overall, per_broker, commits):
        cached.unpersist()
    return summary


def catch_up_episodes(events: DataFrame, commits: DataFrame, applied: DataFrame) -> DataFrame:
    """From a fence, restart or snapshot load until the broker had applied every
    record committed by then (or loaded a snapshot past it); end null: never."""
    starts = events.where(
        ((F.col("source") == "controller") & (F.col("event") == "fenced"))
        | (
            (F.col("source") == "broker")
            & F.col("event").isin("restarted", "snapshot_load_started")
        )
    ).select("broker_id", F.col("event").alias("kind"), F.col("time_ms").alias("start_ms"))
    keys = ["broker_id", "kind", "start_ms"]
    targets = (
        F.broadcast(starts)
        .join(commits, F.col("commit_clock_ms") <= F.col("start_ms"), "left")
        .groupBy(*keys)
        .agg(F.coalesce(F.max("offset"), F.lit(-1)).alias("target_offset"))
    )
    by_apply = (
        targets.join(
            applied.select("broker_id", F.col("offset").alias("o"), "apply_ms"), "broker_id"
        )
        .where((F.col("o") >= F.col("target_offset")) & (F.col("apply_ms") >= F.col("start_ms")))
        .groupBy(*keys)
        .agg(F.min("apply_ms").alias("end_ms"))
    )
    loaded = events.where(F.col("event") == "snapshot_loaded").select(
        "broker_id", F.col("offset").alias("o"), F.col("time_ms").alias("loaded_ms")
    )
    by_snapshot = (
        targets.join(loaded, "broker_id")
        .where((F.col("o") > F.col("target_offset")) & (F.col("loaded_ms") >= F.col("start_ms")))
        .groupBy(*keys)
        .agg(F.min("loaded_ms").alias("snapshot_end_ms"))
    )
    return (
        targets.join(by_apply, keys, "left")
        .join(by_snapshot, keys, "left")
        .select(
            *keys, "target_offset",
            F.least("end_ms", "snapshot_end_ms").alias("end_ms"),
        )
        .withColumn("duration_ms", F.col("end_ms") - F.col("start_ms"))
        .persist()
    )  # fmt: skip


def behind_periods(lagged: DataFrame, threshold_ms: float) -> DataFrame:
    """When a broker's lag passed `threshold_ms`: each late record keeps its broker
    behind from its commit to its apply, and overlapping spans are one period.
    Only the late records are sorted, not the whole trace."""
    late = lagged.where(F.col("lag_ms") > threshold_ms).select(
        "broker_id", "offset", "commit_ms", "apply_ms", "lag_ms"
    )
    order = Window.partitionBy("broker_id").orderBy("commit_ms", "offset")
    before = order.rowsBetween(Window.unboundedPreceding, -1)
    running = order.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    reach = F.col("reach")
    starts = (reach.isNull() | (F.col("commit_ms") > reach)).cast("int")
    return (
        late.withColumn("reach", F.max("apply_ms").over(before))
        .withColumn("starts", starts)
        .withColumn("period", F.sum("starts").over(running))
        .groupBy("broker_id", "period")
        .agg(
            F.min("commit_ms").alias("start_ms"),
            F.max("apply_ms").alias("end_ms"),
            F.count("*").alias("records"),
            F.max("lag_ms").alias("max_lag_ms"),
        )
        .withColumn("duration_ms", F.col("end_ms") - F.col("start_ms"))
        .drop("period")
        .persist()
    )


def _counts(log: DataFrame, raw: DataFrame, applied: DataFrame) -> dict[str, int]:
    row = applied.agg(
        F.count("*").alias("applied_records"),
        F.sum(F.col("matched").cast("int")).alias("matched_to_commit"),
        F.sum(F.col("lag_ms").isNotNull().cast("int")).alias("with_commit_time"),
    ).first()
    assert row is not None
    return {
        "committed": log.count(),
        "applies": raw.count(),
        "replayed": raw.where("replay").count(),
        **{k: int(v or 0) for k, v in row.asDict().items()},
    }


def _offsets(overall: DataFrame) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for r in sorted(overall.collect(), key=lambda r: (r["broker_id"], r["controller_id"])):
        found.setdefault(str(r["broker_id"]), {})[str(r["controller_id"])] = {
            "offset_ms": round(r["offset_ms"], 3),
            "uncertainty_ms": round(r["uncertainty_ms"], 3),
            "method": r["method"],
            "samples": r["samples"],
        }
    return found


def _rows(df: DataFrame, *order: str) -> list[dict[str, Any]]:
    """A small result's rows for the summary, in a deterministic order."""
    rows = [_round_row(r.asDict()) for r in df.collect()]
    return sorted(rows, key=lambda r: tuple(r[k] for k in order))


def _stats_row(row: Any) -> dict[str, Any]:
    return _round_row({k: row[k] for k in ("records", "p50_ms", "p95_ms", "p99_ms", "max_ms")})


def _round_row(row: dict[str, Any]) -> dict[str, Any]:
    return {k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}


def _version_line() -> str:
    """As every console script prints it; read from the installed distribution, since
    the analytics import nothing of the quorum (they read exports only)."""
    try:
        version = metadata.version("kraft-quorum")
    except metadata.PackageNotFoundError:
        version = "unknown"
    return f"quorum-convergence {version} (kraft-quorum)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m analytics.convergence",
        description="Commit-to-apply convergence lag of the metadata log, on Spark.",
        epilog="Example: python -m analytics.convergence --input export/ --out report/ --charts",
    )
    parser.add_argument("--input", required=True, type=Path, help="an export directory")
    parser.add_argument("--out", required=True, type=Path, help="where the report goes")
    parser.add_argument("--master", default="local[*]", help="local[*], spark://HOST:PORT, ...")
    parser.add_argument("--window-s", type=float, default=10.0, help="time window for rates")
    parser.add_argument("--offset-window-s", type=float, default=60.0,
                        help="time window for clock-offset estimates")  # fmt: skip
    parser.add_argument("--behind-threshold-ms", type=float, default=500.0,
                        help="a broker whose lag passes this is behind")  # fmt: skip
    parser.add_argument("--charts", action="store_true", help="also render the PNG charts")
    parser.add_argument("--version", action="version", version=_version_line())
    args = parser.parse_args(argv)
    try:
        check_export(args.input)
    except SchemaError as err:
        print(f"convergence: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    started = time.monotonic()
    spark = session(args.master)
    try:
        summary = run(
            spark, args.input, args.out, args.window_s, args.offset_window_s,
            args.behind_threshold_ms,
        )  # fmt: skip
    finally:
        spark.stop()
    if args.charts:
        from analytics.charts import render_all

        for path in render_all(args.out):
            print(f"chart: {path}")
    lag = summary["lag_ms"]["all"]
    print(
        f"{summary['records']['applied_records']} applies of {summary['records']['committed']} "
        f"committed records analysed in {time.monotonic() - started:.1f} s: lag p50 "
        f"{lag['p50_ms']} ms, p99 {lag['p99_ms']} ms, max {lag['max_ms']} ms; "
        f"report in {args.out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
