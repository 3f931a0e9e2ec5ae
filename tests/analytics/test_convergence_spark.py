"""The analytics end to end, on real Spark.

Everything that needs Spark or the real cluster run lives in this one module so
that, under `--dist loadscope`, one worker holds the one Spark session and the
one cluster run:

- hand-built exports with known lags and skewed clocks (exact percentiles,
  offsets within 5 ms);
- a real run (three controllers, three broker agents, a burst of admin changes,
  one broker killed and restarted) exported offline and online, in Parquet and
  JSON Lines, and analysed; damaged and foreign inputs refused;
- the same job on a real Spark standalone cluster, with the same summary;
- the notebook, executed headless.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from cluster_run import BROKERS, KILLED, SESSION_MS, ClusterRun, run_cluster
from handmade import add_broker, build, write
from spark_standalone import standalone_cluster

from analytics.convergence import run

pytestmark = pytest.mark.slow
BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parents[2]


def quorumctl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "quorumctl"), *args], capture_output=True, text=True, timeout=120, check=False
    )


def broker_args(root: Path) -> list[str]:
    return [a for b in BROKERS for a in ("--broker-dir", str(root / f"broker-{b}"))]


# ------------------------------------------------------------------ hand-built


@pytest.fixture(scope="module")
def handmade_report(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("handmade")
    h = build(200)
    exact = [3 + (i * 7) % 40 for i in range(200)]
    add_broker(h, 201, 0, exact)
    skewed = random.Random(19)
    late = [5 + skewed.randint(0, 30) for _ in range(200)]
    for i in range(100, 110):  # a stall: ten records applied together, late
        late[i] = 900 + (110 - i) * STEP
    add_broker(h, 202, -250, [5 + skewed.randint(0, 30) for _ in range(200)], skewed)
    add_broker(h, 203, 400, late, skewed)
    export = write(h, root / "export")
    summary = run(spark, export, root / "report")
    return {"h": h, "summary": summary, "report": root / "report"}


STEP = 50


def test_known_lags_give_exactly_the_expected_percentiles(handmade_report: dict[str, Any]) -> None:
    h, report = handmade_report["h"], handmade_report["report"]
    table = pd.read_parquet(report / "lag_by_broker_type")
    rows = table[table["broker_id"] == 201]
    lags = np.array(h.true_lags[201])
    types = np.array(h.types)
    assert set(rows["record_type"]) == {"topic", "partition"}
    for _, row in rows.iterrows():
        mine = lags[types == row["record_type"]]
        assert row["records"] == len(mine)
        for p, column in ((50, "p50_ms"), (95, "p95_ms"), (99, "p99_ms")):
            assert row[column] == pytest.approx(np.percentile(mine, p), abs=1e-9), column
        assert row["max_ms"] == pytest.approx(mine.max(), abs=1e-9)
    overall = handmade_report["summary"]["lag_ms"]["by_broker"]["201"]
    assert overall["p99_ms"] == pytest.approx(round(float(np.percentile(lags, 99)), 3))


def test_skewed_clocks_are_estimated_within_5_ms_and_their_lags_corrected(
    handmade_report: dict[str, Any],
) -> None:
    h, summary = handmade_report["h"], handmade_report["summary"]
    offsets = summary["clock_offsets"]
    assert abs(offsets["202"]["1"]["offset_ms"] - (-250)) <= 5, offsets["202"]
    assert abs(offsets["203"]["1"]["offset_ms"] - 400) <= 5, offsets["203"]
    assert offsets["201"]["1"]["offset_ms"] == 0
    for broker in (202, 203):
        true = np.array(h.true_lags[broker])
        got = summary["lag_ms"]["by_broker"][str(broker)]
        uncertainty = offsets[str(broker)]["1"]["uncertainty_ms"]
        assert uncertainty <= 5
        for p in (50, 95, 99):
            assert abs(got[f"p{p}_ms"] - np.percentile(true, p)) <= uncertainty + 1e-6, (broker, p)
        assert abs(got["max_ms"] - true.max()) <= uncertainty + 1e-6
    # Uncorrected, 202's lags would be 250 ms too high and 203's 400 ms too low.
    assert summary["lag_ms"]["by_broker"]["202"]["p50_ms"] < 50


def test_a_stall_is_a_period_behind_with_its_duration(handmade_report: dict[str, Any]) -> None:
    h, summary = handmade_report["h"], handmade_report["summary"]
    behind = summary["behind_periods"]
    assert summary["brokers_behind"] == [203]
    (period,) = behind
    assert period["records"] == 10
    lags = h.true_lags[203]
    expected = h.commit(109) + lags[109] - h.commit(100)
    assert abs(period["duration_ms"] - expected) <= 5
    assert abs(period["max_lag_ms"] - max(lags[100:110])) <= 5


# ------------------------------------------------------------------- real run


@pytest.fixture(scope="module")
def cluster_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("run")
    result: ClusterRun | None = None
    try:
        result = run_cluster(root / "data")
        c = result.cluster
        online = quorumctl(
            "log", "export", "--bootstrap-controller", ",".join(c.voter_addresses()),
            *broker_args(root / "data"), "--out", str(root / "export-online"),
        )  # fmt: skip
        assert online.returncode == 0, online.stderr
    finally:
        if result is not None:
            result.cluster.stop_all()
    offline = quorumctl(
        "log", "export", "--dir", str(root / "data" / "controller-1"),
        *broker_args(root / "data"), "--out", str(root / "export"),
    )  # fmt: skip
    assert offline.returncode == 0, offline.stderr
    yield {"run": result, "root": root, "data": root / "data", "export": root / "export",
           "online": root / "export-online"}  # fmt: skip


@pytest.fixture(scope="module")
def cluster_report(spark: Any, cluster_run: dict[str, Any]) -> dict[str, Any]:
    report = cluster_run["root"] / "report"
    summary = run(spark, cluster_run["export"], report)
    return {"summary": summary, "report": report}


def table(export: Path, name: str) -> pd.DataFrame:
    return pd.read_parquet(export / name)


def test_the_export_holds_the_committed_log_traces_and_lifecycle(
    cluster_run: dict[str, Any],
) -> None:
    export = cluster_run["export"]
    schema = json.loads((export / "schema.json").read_text())
    assert schema["schema_version"] == 1 and schema["source"] == "offline"
    log = table(export, "log")
    assert list(log["offset"]) == list(range(len(log)))  # no snapshot: from 0, no gaps
    assert set(log["schema_version"]) == {1}
    assert {"register_broker", "topic", "partition", "config", "fence_broker"} <= set(
        log["record_type"]
    )
    topics = log[log["record_type"] == "topic"]
    assert len(topics) == cluster_run["run"].topics
    parts = log[log["record_type"] == "partition"]
    assert parts["topic"].str.startswith(("burst-", "missed-", "after-")).all()
    assert parts["partition"].between(0, 2).all()
    assert (log["commit_time_ms"].dropna() >= log["append_time_ms"].loc[
        log["commit_time_ms"].notna()] - 50).all()  # fmt: skip
    applies = table(export, "apply")
    assert set(applies["broker_id"]) == set(BROKERS)
    assert applies["fetch_send_time_ms"].notna().all()
    assert set(applies["state"]) <= {"FENCED", "ONLINE", "STOPPING"}
    fetches = table(export, "fetches")
    assert len(fetches) >= len(applies.groupby(["broker_id", "receive_time_ms"]))
    life = table(export, "lifecycle")
    killed = life[life["broker_id"] == KILLED]
    assert {"restarted", "registered", "unfenced"} <= set(killed[killed.source == "broker"].event)
    assert {"registered", "fenced", "unfenced"} <= set(killed[killed.source == "controller"].event)


def test_the_online_export_matches_the_offline_one_up_to_its_high_watermark(
    cluster_run: dict[str, Any],
) -> None:
    online, offline = table(cluster_run["online"], "log"), table(cluster_run["export"], "log")
    schema = json.loads((cluster_run["online"] / "schema.json").read_text())
    assert schema["source"] == "online"
    assert len(online) == schema["high_watermark"] <= len(offline)
    columns = ["offset", "leader_epoch", "batch_base_offset", "record_type", "entity",
               "append_time_ms"]  # fmt: skip
    pd.testing.assert_frame_equal(online[columns], offline[columns].iloc[: len(online)])


def test_jsonl_export_has_the_same_rows(cluster_run: dict[str, Any], tmp_path: Path) -> None:
    done = quorumctl(
        "log", "export", "--dir", str(cluster_run["data"] / "controller-1"),
        *broker_args(cluster_run["data"]), "--out", str(tmp_path / "x"), "--format", "jsonl",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    for name in ("log", "apply", "fetches", "lifecycle"):
        lines = (tmp_path / "x" / name / "part-00000.jsonl").read_text().splitlines()
        parquet = table(cluster_run["export"], name)
        assert len(lines) == len(parquet), name
        first = json.loads(lines[0])
        assert list(first) == list(parquet.columns)


def test_every_apply_matches_its_commit_and_corrected_lags_are_not_negative(
    cluster_report: dict[str, Any],
) -> None:
    summary, report = cluster_report["summary"], cluster_report["report"]
    records = summary["records"]
    assert records["applied_records"] > 0
    assert records["matched_to_commit"] == records["applied_records"]
    assert records["with_commit_time"] >= 0.95 * records["applied_records"]
    lags = pd.read_parquet(report / "lag_by_broker_type")
    assert set(lags["broker_id"]) == set(BROKERS)
    assert (lags["min_ms"] + lags["max_uncertainty_ms"] + 1 >= 0).all(), lags
    for broker in BROKERS:
        offset = summary["clock_offsets"][str(broker)]
        assert all(abs(o["offset_ms"]) <= o["uncertainty_ms"] + 5 for o in offset.values())


def test_the_killed_broker_catch_up_episode_is_found(
    cluster_run: dict[str, Any], cluster_report: dict[str, Any]
) -> None:
    r: ClusterRun = cluster_run["run"]
    episodes = [e for e in cluster_report["summary"]["catch_up_episodes"]
                if e["broker_id"] == KILLED]  # fmt: skip
    fenced = [e for e in episodes if e["kind"] == "fenced" and e["start_ms"] < r.online_again_at_ms]
    (fence,) = fenced
    assert r.killed_at_ms + SESSION_MS / 2 <= fence["start_ms"] <= r.restarted_at_ms + 200
    assert fence["end_ms"] is not None
    assert r.restarted_at_ms - 200 <= fence["end_ms"] <= r.online_again_at_ms + 2000
    (restart,) = [e for e in episodes if e["kind"] == "restarted"]
    assert r.restarted_at_ms - 200 <= restart["start_ms"] <= r.online_again_at_ms
    assert 0 <= restart["duration_ms"] <= r.online_again_at_ms - r.restarted_at_ms + 2000
    assert KILLED in cluster_report["summary"]["brokers_behind"]


def test_charts_are_rendered(cluster_report: dict[str, Any]) -> None:
    from analytics.charts import render_all

    for path in render_all(cluster_report["report"]):
        assert path.stat().st_size > 10_000, path
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ---------------------------------------------------------------- bad inputs


def test_a_damaged_segment_stops_the_export_and_leaves_nothing(
    cluster_run: dict[str, Any], tmp_path: Path
) -> None:
    copy = tmp_path / "controller-1"
    shutil.copytree(cluster_run["data"] / "controller-1", copy)
    (segment,) = sorted((copy / "__cluster_metadata-0").glob("*.log"))
    data = bytearray(segment.read_bytes())
    data[len(data) // 2] ^= 0xFF
    segment.write_bytes(bytes(data))
    done = quorumctl("log", "export", "--dir", str(copy), *broker_args(cluster_run["data"]),
                     "--out", str(tmp_path / "out"))  # fmt: skip
    assert done.returncode == 1
    assert "damaged segment" in done.stderr and segment.name in done.stderr, done.stderr
    assert not (tmp_path / "out").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out")]


def test_a_trace_from_another_cluster_stops_the_export(
    cluster_run: dict[str, Any], tmp_path: Path
) -> None:
    broker = tmp_path / "broker-101"
    shutil.copytree(cluster_run["data"] / "broker-101", broker)
    events = broker / "broker-events.jsonl"
    lines = events.read_text().splitlines()
    foreign = json.loads(lines[-1]) | {"cluster_id": "AAAAAAAAAAAAAAAAAAAAAA"}
    events.write_text("\n".join([*lines, json.dumps(foreign)]) + "\n")
    done = quorumctl("log", "export", "--dir", str(cluster_run["data"] / "controller-1"),
                     "--broker-dir", str(broker), "--out", str(tmp_path / "out"))  # fmt: skip
    assert done.returncode == 1
    assert "from cluster 'AAAAAAAAAAAAAAAAAAAAAA'" in done.stderr, done.stderr
    assert not (tmp_path / "out").exists()
    meta = broker / "meta.properties"
    meta.write_text(meta.read_text().replace("cluster.id=", "cluster.id=X"))
    done = quorumctl("log", "export", "--dir", str(cluster_run["data"] / "controller-1"),
                     "--broker-dir", str(broker), "--out", str(tmp_path / "out"))  # fmt: skip
    assert done.returncode == 1 and "belongs to cluster" in done.stderr, done.stderr


def test_an_export_never_overwrites_another(cluster_run: dict[str, Any]) -> None:
    done = quorumctl("log", "export", "--dir", str(cluster_run["data"] / "controller-1"),
                     "--out", str(cluster_run["export"]))  # fmt: skip
    assert done.returncode == 1 and "already exists" in done.stderr


# ------------------------------------------------- a Spark standalone cluster


def test_the_job_on_a_standalone_cluster_gives_the_same_summary(
    cluster_run: dict[str, Any], cluster_report: dict[str, Any], tmp_path: Path
) -> None:
    with standalone_cluster(tmp_path / "spark") as master:
        done = subprocess.run(
            [sys.executable, "-m", "analytics.convergence", "--input", str(cluster_run["export"]),
             "--out", str(tmp_path / "report"), "--master", master],
            capture_output=True, text=True, timeout=420, check=False,
            env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"},
        )  # fmt: skip
    assert done.returncode == 0, done.stderr[-5000:]
    remote = json.loads((tmp_path / "report" / "summary.json").read_text())
    assert remote == cluster_report["summary"]


# ------------------------------------------------------------------- notebook


def test_the_notebook_runs_headless(cluster_run: dict[str, Any], tmp_path: Path) -> None:
    import nbformat
    from nbclient import NotebookClient

    path = REPO / "analytics" / "notebooks" / "convergence.ipynb"
    notebook = nbformat.read(path, as_version=4)
    os.environ["QUORUM_RUN_DIR"] = str(cluster_run["data"])
    os.environ["QUORUM_NOTEBOOK_OUT"] = str(tmp_path)
    try:
        NotebookClient(
            notebook, timeout=600, kernel_name="python3",
            resources={"metadata": {"path": str(path.parent)}},
        ).execute()  # fmt: skip
    finally:
        del os.environ["QUORUM_RUN_DIR"], os.environ["QUORUM_NOTEBOOK_OUT"]
    images = [o for c in notebook.cells for o in c.get("outputs", [])
              if "image/png" in o.get("data", {})]  # fmt: skip
    assert len(images) == 4
    assert (tmp_path / "report" / "summary.json").is_file()
