"""bench/produce.py in a tiny configuration, so the bench cannot rot unnoticed.

A few hundred records per system, every part of the bench once (the disk,
every acks x linger.ms line, both JetStream modes, the replicas' memory and a
broker's restart with a handful of replicas). Asserts the shape of what it
prints and that records were delivered and stored; never a speed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
RECORDS = 50  # per producer and line


def test_produce_bench_runs_end_to_end(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable, str(ROOT / "bench" / "produce.py"),
            "--seconds", "5", "--records", str(RECORDS), "--producers", "1,2",
            "--acks", "1,all", "--linger", "0,5", "--window", "10",
            "--replica-partitions", "6", "--disk-seconds", "0.2", "--dir", str(tmp_path),
        ],
        capture_output=True, text=True, timeout=540, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert lines and all({"metric", "value"} <= set(line) for line in lines), lines

    def values(metric: str, **where: object) -> list[object]:
        return [
            line["value"]
            for line in lines
            if line["metric"] == metric and all(line.get(k) == v for k, v in where.items())
        ]

    assert all(v > 0 for v in values("disk_sequential_mb_per_s"))  # type: ignore[operator]
    for acks in ("1", "all"):
        for linger in (0, 5):
            for producers in (1, 2):
                line = {"system": "kafka", "acks": acks, "linger_ms": linger,
                        "producers": producers}  # fmt: skip
                assert values("records_delivered", **line) == [RECORDS * producers], line
                assert values("records_failed", **line) == [0], line
                for metric in ("records_per_s", "mb_per_s", "p50_latency_ms", "p99_latency_ms"):
                    assert len(values(metric, **line)) == 1, (metric, line)
    for mode in ("sync", "async"):
        for producers in (1, 2):
            line = {"system": "nats", "mode": mode, "producers": producers}
            assert values("records_delivered", **line) == [RECORDS * producers], line
            assert values("records_failed", **line) == [0], line
            # One more than delivered: each publisher's first publish, before the clock.
            assert values("stream_messages", **line) == [RECORDS * producers + producers], line
    assert len(values("broker_rss_mb")) == 3
    for metric in ("restart_listening_s", "restart_unfenced_s", "restart_serving_s"):
        assert [v for v in values(metric) if v is not None], metric
    assert values("goal_vs_jetstream") and values("goal_disk_share")
