"""Where a process's CPU goes by thread, and how often its threads are switched out.

The fan-out benches compare the broker agents' processes with the floor's client
processes (`bench/fanout_floor.py --profile-dir`): the same gRPC exchange, so
the split between gRPC's own threads and the event loop's thread, and the
context switches per answer, say which side of the exchange costs more. Read
from /proc at two moments and subtracted; threads are grouped by name (the
kernel's `comm`: gRPC names its threads, Python's are `python` or the
executor's `asyncio_N`).
"""

from __future__ import annotations

import gc
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class ThreadSample:
    name: str
    cpu_s: float
    system_s: float  # of cpu_s, in the kernel
    voluntary: int
    involuntary: int


def sample(pid: int) -> dict[int, ThreadSample]:
    """Every live thread of `pid`: its name, CPU seconds, context switches so far."""
    out: dict[int, ThreadSample] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (task / "stat").read_text()
            status = (task / "status").read_text()
        except OSError:  # the thread ended between the listing and the read
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat.rsplit(")", 1)[1].split()
        switches = {}
        for line in status.splitlines():
            key, _, value = line.partition(":")
            if key in ("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches"):
                switches[key] = int(value)
        out[int(task.name)] = ThreadSample(
            name,
            (int(fields[11]) + int(fields[12])) / TICKS,
            int(fields[12]) / TICKS,
            switches.get("voluntary_ctxt_switches", 0),
            switches.get("nonvoluntary_ctxt_switches", 0),
        )
    return out


def split(
    before: dict[int, ThreadSample], after: dict[int, ThreadSample], main_tid: int
) -> dict[str, dict[str, Any]]:
    """Per thread name (the main thread, the event loop's, apart as `loop`): CPU
    seconds (and the kernel's part), threads, voluntary and involuntary switches
    between the two samples."""
    groups: dict[str, dict[str, Any]] = {}
    for tid, now in after.items():
        then = before.get(tid, ThreadSample(now.name, 0.0, 0.0, 0, 0))
        name = "loop" if tid == main_tid else now.name
        group = groups.setdefault(
            name, {"cpu_s": 0.0, "system_s": 0.0, "threads": 0, "voluntary": 0, "involuntary": 0}
        )
        group["cpu_s"] = round(group["cpu_s"] + now.cpu_s - then.cpu_s, 3)
        group["system_s"] = round(group["system_s"] + now.system_s - then.system_s, 3)
        group["threads"] += 1
        group["voluntary"] += now.voluntary - then.voluntary
        group["involuntary"] += now.involuntary - then.involuntary
    return dict(sorted(groups.items(), key=lambda kv: -kv[1]["cpu_s"]))


class ProcessWatch:
    """py-spy (when installed) and the per-thread split of one process over a window."""

    def __init__(self, pid: int, py_spy: Path, out: Path, seconds: float, rate: int) -> None:
        """`rate` 0: the thread split only (py-spy stops the process at each
        sample to read its native stacks, which adds switches of its own)."""
        self.pid = pid
        self.out = out
        self.profiler: subprocess.Popen[bytes] | None = None
        if rate and py_spy.exists():
            out.parent.mkdir(parents=True, exist_ok=True)
            command = [str(py_spy), "record", "--native", "--rate", str(rate), "--pid",
                       str(pid), "--duration", str(int(seconds)), "--format", "raw",
                       "--output", str(out)]  # fmt: skip
            self.profiler = subprocess.Popen(
                command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
        self.before = sample(pid)
        self.io_before = io_counts(pid)
        self.io: dict[str, int] = {}

    def finish(self) -> dict[str, dict[str, Any]]:
        """The thread split now (call it at the window's end), then wait for py-spy;
        `io` then holds the read and write system calls made over the window."""
        threads = split(self.before, sample(self.pid), self.pid)
        after = io_counts(self.pid)
        self.io = {k: after[k] - self.io_before.get(k, 0) for k in after}
        if self.profiler is not None:
            self.profiler.wait(timeout=120)
        return threads


def io_counts(pid: int) -> dict[str, int]:
    """The process's read and write system calls so far (`syscr`, `syscw`): a
    socket's `sendmsg` and a file's `writev` both count as writes."""
    counts = {}
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("syscr", "syscw"):
            counts[key] = int(value)
    return counts


def collector_clock() -> dict[str, float]:
    """Seconds spent in the cyclic collector (`gc.callbacks`), kept in `["s"]`."""
    spent = {"s": 0.0}
    began = [0.0]

    def callback(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            began[0] = time.perf_counter()
        else:
            spent["s"] += time.perf_counter() - began[0]

    gc.callbacks.append(callback)
    return spent
