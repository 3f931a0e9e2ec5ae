"""bench/compaction.py in its `--quick` configuration, so the bench cannot rot
unnoticed: a 20 MB log cleaned beside the disk, and one measurement each of
produce without and with the cleaner on three real brokers. Asserts the shape
of what it prints, that records were delivered, and that the brokers really ran
without their cleaner when told to; never a speed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def test_compaction_bench_runs_end_to_end(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "compaction.py"), "--quick", "--dir", str(tmp_path)],
        capture_output=True, text=True, timeout=540, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert all({"metric", "value", "load"} <= set(line) for line in lines), lines

    def values(metric: str, **where: object) -> list[object]:
        return [
            line["value"]
            for line in lines
            if line["metric"] == metric and all(line.get(k) == v for k, v in where.items())
        ]

    assert len(values("disk_sequential_mb_per_s")) == 2
    assert all(v > 0 for v in values("disk_sequential_mb_per_s"))  # type: ignore[operator]
    # The quick log: 20,000 records over 2,000 keys, one kept per key.
    (after,) = values("cleaner_log_mb_after")
    (before,) = values("cleaner_log_mb")
    assert 0 < after < before / 5, (before, after)  # type: ignore[operator]
    assert len(values("goal_cleaner_disk_share")) == 2  # wall clock and CPU
    assert len(values("cleaner_disk_share_one_fsync")) == 2  # against the other disk figure
    assert all(v > 0 for v in values("disk_one_fsync_mb_per_s"))  # type: ignore[operator]
    for cleaner in (False, True):
        (delivered,) = values("produce_records_delivered", cleaner=cleaner)
        assert delivered > 0  # type: ignore[operator]
        assert values("produce_records_failed", cleaner=cleaner) == [0]
        assert len(values("produce_records_per_s", cleaner=cleaner)) == 1
        assert len(values("broker_cpu_s_during", cleaner=cleaner)) == 1
    # log.cleaner.enable=false really stopped the cleaners for that measurement.
    assert values("cleaner_rounds_during", cleaner=False) == [0]
    assert values("cleaner_io_mb_during", cleaner=False) == [0]
    (ratio,) = values("goal_produce_with_cleaner_ratio")
    assert ratio is not None and ratio > 0  # type: ignore[operator]
