"""bench/membership.py at a small size, so the bench cannot rot unnoticed: five
real controllers (three voters, two observers), two adds and removes, a second
of writes without and during changes, one self-removal of the leader and one
SIGKILL failover. Asserts the shape of what it prints and that writes were
acknowledged in both windows; never a speed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def test_membership_bench_runs_end_to_end(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "membership.py"), "--runs", "1",
         "--seconds", "1", "--concurrency", "2", "--dir", str(tmp_path)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert all({"metric", "value", "load_average"} <= set(line) for line in lines), lines
    by_metric: dict[str, list[dict[str, object]]] = {}
    for line in lines:
        by_metric.setdefault(str(line["metric"]), []).append(line)
    for metric in ("add_voter_ms", "remove_voter_ms"):
        (line,) = by_metric[metric]
        assert line["runs"] == 1 and float(line["value"]) > 0, line  # type: ignore[arg-type]
    rates = {line["changing"]: line for line in by_metric["writes_per_s"]}
    assert set(rates) == {False, True}
    assert all(float(line["value"]) > 0 for line in rates.values())  # type: ignore[arg-type]
    assert int(rates[True]["changes"]) >= 2  # type: ignore[call-overload]
    assert {line["changing"] for line in by_metric["write_gap_max_s"]} == {False, True}
    for metric in ("leader_self_remove_gap_s", "kill_failover_gap_s"):
        (line,) = by_metric[metric]
        assert float(line["value"]) > 0, line  # type: ignore[arg-type]
    assert len(by_metric["leader_self_remove_vs_failover"]) == 1
