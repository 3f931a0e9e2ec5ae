"""PNG charts of a convergence report (matplotlib, no display needed).

They read the report's small tables (never the export), so rendering takes a
second however large the log was:

- `lag_cdf.png`: corrected commit-to-apply lag, CDF per broker (log scale);
- `lag_over_time.png`: p50/p95/p99 of all brokers per time window;
- `commit_rate.png`: records/s committed, with fence, unfence and restart marks;
- `clock_offsets.png`: each broker's estimated clock offset and its uncertainty.
"""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pandas as pd

EVENT_STYLE = {
    ("controller", "fenced"): ("tab:red", "fenced"),
    ("controller", "unfenced"): ("tab:green", "unfenced"),
    ("broker", "restarted"): ("tab:purple", "restarted"),
    ("controller", "controlled_shutdown"): ("tab:orange", "controlled shutdown"),
}


def _table(report: Path, name: str) -> pd.DataFrame:
    return pd.read_parquet(report / name)


def _origin(report: Path) -> float:
    rate = _table(report, "commit_rate")
    return float(rate["window_start_ms"].min()) if len(rate) else 0.0


def lag_cdf(report: Path) -> Path:
    cdf = _table(report, "lag_cdf")
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for broker, rows in cdf.groupby("broker_id"):
        ax.plot(rows["lag_ms"].clip(lower=0.1), rows["quantile"], label=f"broker {broker}")
    ax.set_xscale("log")
    ax.set_xlabel("commit-to-apply lag, clock-offset corrected (ms)")
    ax.set_ylabel("fraction of records")
    ax.set_title("Convergence lag CDF per broker")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    return _save(fig, report / "lag_cdf.png")


def lag_over_time(report: Path) -> Path:
    windows = _table(report, "lag_windows")
    every = windows[windows["broker_id"] == -1].sort_values("window_start_ms")
    t = (every["window_start_ms"] - _origin(report)) / 1000
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for column, label in (("p50_ms", "p50"), ("p95_ms", "p95"), ("p99_ms", "p99")):
        ax.plot(t, every[column], marker=".", label=label)
    ax.set_yscale("symlog", linthresh=1)
    ax.set_xlabel("time since the first commit (s)")
    ax.set_ylabel("lag (ms)")
    ax.set_title("Lag percentiles over time, all brokers")
    ax.grid(True, alpha=0.3)
    ax.legend()
    return _save(fig, report / "lag_over_time.png")


def commit_rate(report: Path) -> Path:
    rate = _table(report, "commit_rate").sort_values("window_start_ms")
    events = _table(report, "events")
    origin = _origin(report)
    fig, ax = plt.subplots(figsize=(7, 4.2))
    window_s = json.loads((report / "summary.json").read_text())["window_s"]
    ax.bar((rate["window_start_ms"] - origin) / 1000, rate["records_per_s"], width=window_s,
           align="edge", color="tab:blue", alpha=0.6, label="committed records/s")  # fmt: skip
    seen: set[str] = set()
    for _, e in events.iterrows():
        style = EVENT_STYLE.get((e["source"], e["event"]))
        if style is None:
            continue
        color, label = style
        ax.axvline((e["time_ms"] - origin) / 1000, color=color, linestyle="--", alpha=0.8,
                   label=None if label in seen else label)  # fmt: skip
        ax.annotate(f"{e['broker_id']}", ((e["time_ms"] - origin) / 1000, 0), color=color,
                    fontsize=7, xytext=(2, 2), textcoords="offset points")  # fmt: skip
        seen.add(label)
    ax.set_xlabel("time since the first commit (s)")
    ax.set_ylabel("records/s")
    ax.set_title("Commit rate with broker lifecycle events")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, report / "commit_rate.png")


def clock_offset(report: Path) -> Path:
    offsets = _table(report, "clock_offsets")
    origin = _origin(report)
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for (broker, controller), rows in offsets.groupby(["broker_id", "controller_id"]):
        rows = rows.sort_values("window_start_ms")
        t = (rows["window_start_ms"] - origin) / 1000
        line = ax.plot(
            t, rows["offset_ms"], marker="o", label=f"broker {broker} / ctrl {controller}"
        )
        ax.fill_between(t, rows["offset_ms"] - rows["uncertainty_ms"],
                        rows["offset_ms"] + rows["uncertainty_ms"], alpha=0.2,
                        color=line[0].get_color())  # fmt: skip
    ax.set_xlabel("time since the first commit (s)")
    ax.set_ylabel("controller minus broker clock (ms)")
    ax.set_title("Estimated clock offset per broker (band: uncertainty)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    return _save(fig, report / "clock_offsets.png")


def _save(fig: plt.Figure, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def render_all(report: Path) -> list[Path]:
    return [lag_cdf(report), lag_over_time(report), commit_rate(report), clock_offset(report)]
