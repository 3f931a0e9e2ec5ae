"""How the benches report: one JSON object per measurement on stdout, progress
on stderr, and the percentile they all compute the same way."""

from __future__ import annotations

import json
import os
import sys
from typing import Any


def emit(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def percentile(values: list[float], q: float) -> float:
    """The value below which a fraction `q` (0..1) of `values` lies."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def process_cpu_s(pid: int) -> float:
    """User plus system CPU seconds a process has used (all its threads), from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_idle_s() -> float:
    """Idle (and I/O-wait) CPU seconds of the whole machine so far, all cores, from
    /proc/stat: over a window, the cores nobody used, whoever the processes were."""
    with open("/proc/stat") as f:
        fields = f.readline().split()
    return (int(fields[4]) + int(fields[5])) / os.sysconf("SC_CLK_TCK")
