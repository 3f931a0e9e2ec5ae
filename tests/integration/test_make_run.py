"""What `make run` runs (the launcher), end to end: three controllers, three brokers
ONLINE, a clean stop on Ctrl-C, and a second run resuming from the same data.

It uses the fixed ports the README documents (9093-9095 and friends), below the
ephemeral range the other tests' free ports come from.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ONLINE_LINES = ("101       ONLINE", "102       ONLINE", "103       ONLINE")


def run_until_online(data_dir: Path) -> str:
    proc = subprocess.Popen(
        [sys.executable, "-m", "quorum.launcher", "--data-dir", str(data_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if "Ctrl-C stops everything" in line:
                break
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=60)
        lines.append(rest)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, "".join(lines)
    return "".join(lines)


@pytest.mark.slow
def test_make_run_starts_three_controllers_and_three_online_brokers(tmp_path: Path) -> None:
    first = run_until_online(tmp_path)
    for line in ONLINE_LINES:
        assert line in first, first
    assert "LeaderId:" in first and "stopping brokers, then controllers" in first
    for name in ("controller-1", "controller-2", "controller-3", "broker-101", "broker-102"):
        assert (tmp_path / "config" / f"{name}.properties").exists()
    broker_log = (tmp_path / "logs" / "broker-101.log").read_text()
    assert "STOPPING -> OFFLINE" in broker_log  # Ctrl-C: a controlled shutdown
    second = run_until_online(tmp_path)
    assert "Formatting" not in second  # resumed, not formatted again
    for line in ONLINE_LINES:
        assert line in second, second
