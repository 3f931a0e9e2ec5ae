"""Where a server process's CPU goes during a bench window: py-spy and /proc.

`bench/fanout_floor.py --profile-dir DIR` uses it on the floor's server and on
the active controller of the quorum run (through `convergence` below, which runs
`bench/convergence.py` with its profiler hook replaced by this one):

- `Profile`: `py-spy record --nonblocking --rate 200 --format raw --threads` on
  one pid for the window (collapsed stacks, one file; `SPY_NATIVE=1` in the
  environment: `--native` instead, C frames too, at the price of pausing the
  process for each sample), and each thread's CPU (user + system, from
  /proc/PID/task/*/stat) over the same window, by thread name;
- `summary`: the top entries of a collapsed-stacks file, by own samples (the
  innermost frame) and by inclusive samples (any frame), as shares of the
  non-idle samples;
- `background`: three controllers, no brokers, the same change stream
  (`--rate` commits/s) for `--seconds`: the active controller's CPU when it
  answers no MetadataFetch at all (Raft voter fetches, timers, metrics, the
  writes themselves), per thread, with its own profile.

    .venv/bin/python bench/spy.py background [--seconds 15 --rate 20 --profile-dir DIR]
    .venv/bin/python bench/spy.py summary FILE [--top 25]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import proc_threads
from report import emit, process_cpu_s, say

PY_SPY = Path(sys.executable).parent / "py-spy"
CLK_TCK = os.sysconf("SC_CLK_TCK")


def thread_names(pid: int) -> dict[str, str]:
    """Thread id -> its name (`comm`; the main thread's marked)."""
    names = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            name = (task / "comm").read_text().strip()
        except OSError:
            continue  # the thread ended
        names[task.name] = f"{name} (main)" if task.name == str(pid) else name
    return names


def thread_cpu_s(pid: int) -> dict[str, float]:
    """CPU seconds per thread of `pid`, summed by thread name."""
    by_name: dict[str, float] = collections.defaultdict(float)
    for tid, name in thread_names(pid).items():
        try:
            stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        by_name[name] += (int(fields[11]) + int(fields[12])) / CLK_TCK
    return dict(by_name)


def tid_stats(pid: int) -> dict[str, list[float]]:
    """Per thread id: [CPU s, of it in the kernel, voluntary, involuntary switches]."""
    return {
        str(tid): [t.cpu_s, t.system_s, t.voluntary, t.involuntary]
        for tid, t in proc_threads.sample(pid).items()
    }


class Profile:
    """py-spy on `pid` for `seconds`, and its threads' CPU over the same window."""

    def __init__(
        self, pid: int, out: Path, seconds: float, rate: int = 200, native: bool | None = None
    ) -> None:
        self.pid, self.out = pid, out
        out.parent.mkdir(parents=True, exist_ok=True)
        self.started = time.monotonic()
        self.cpu_before = process_cpu_s(pid)
        self.threads_before = thread_cpu_s(pid)
        self.spy: subprocess.Popen[bytes] | None = None
        if native is None:
            native = os.environ.get("SPY_NATIVE", "") == "1"
        if PY_SPY.exists():
            # --native pauses the process for every sample (slowing it, and its
            # samples lean towards system calls); without it py-spy reads the
            # Python stacks while the process runs, and leaves out waiting threads.
            how = ["--native"] if native else ["--nonblocking"]
            command = [str(PY_SPY), "record", "--pid", str(pid), *how, "--threads",
                       "--rate", str(rate), "--format", "raw", "--output", str(out),
                       "--duration", str(max(1, int(seconds)))]  # fmt: skip
            self.spy = subprocess.Popen(command, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)  # fmt: skip
        self.perf: subprocess.Popen[bytes] | None = None
        if os.environ.get("SPY_PERF", "") == "1" and shutil.which("perf"):
            # perf samples every thread's C frames (gRPC's core, CPython, the
            # kernel's system calls) without stopping the process, on CPU time.
            what = os.environ.get("SPY_PERF_EVENTS", "").split() or ["-F", "499"]
            chains = [] if os.environ.get("SPY_PERF_CHAINS", "") == "0" else ["-g"]
            command = ["perf", "record", *what, *chains, "-p", str(pid),
                       "-o", str(out.with_suffix(".perf.data")), "--", "sleep",
                       str(max(1, int(seconds)))]  # fmt: skip
            self.perf = subprocess.Popen(command, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL)  # fmt: skip
        self.tids_before = tid_stats(pid)

    def finish(self) -> dict[str, Any]:
        """The threads' CPU since the start (read now) and the profile (once written)."""
        window_s = time.monotonic() - self.started
        cpu_s = process_cpu_s(self.pid) - self.cpu_before
        after = thread_cpu_s(self.pid)
        threads = {
            name: round(after[name] - self.threads_before.get(name, 0.0), 3)
            for name in sorted(after, key=lambda n: -(after[n] - self.threads_before.get(n, 0)))
        }
        zero = [0.0, 0.0, 0, 0]
        tids = {
            tid: [
                round(a - b, 3) for a, b in zip(now, self.tids_before.get(tid, zero), strict=True)
            ]
            for tid, now in tid_stats(self.pid).items()
        }
        if self.spy is not None:
            self.spy.wait(timeout=120)
        if self.perf is not None:
            self.perf.wait(timeout=120)
        result = {"pid": self.pid, "window_s": round(window_s, 2), "cpu_s": round(cpu_s, 3),
                  "threads_cpu_s": threads, "profile": str(self.out),
                  "thread_names": thread_names(self.pid),
                  "tids_cpu_sys_vol_invol": tids}  # fmt: skip
        self.out.with_suffix(".threads.json").write_text(json.dumps(result, indent=1))
        return result

    def wait(self, timeout: float | None = None) -> None:
        """convergence.py's profiler interface (it calls `wait` after its window)."""
        self.finish()


# ------------------------------------------------------------------ reading


_ADDRESS = re.compile(r"0x[0-9a-f]+")


def frame_name(frame: str) -> str:
    """`func (file.py:123)` -> `func (file.py)`; a native frame keeps its library."""
    frame = frame.strip()
    name, _, where = frame.partition(" (")
    where = where.rstrip(")")
    if ":" in where:
        where = where.rsplit(":", 1)[0]
    where = Path(where).name if where else ""
    return f"{_ADDRESS.sub('0x?', name)} ({where})" if where else _ADDRESS.sub("0x?", name)


def read_stacks(path: Path) -> list[tuple[list[str], int]]:
    stacks = []
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            stacks.append((stack.split(";"), int(count)))
    return stacks


# Leaves of a thread that waits (off the CPU): with --native py-spy pauses the
# process to sample it and counts every thread, waiting or not.
IDLE_LEAVES = frozenset({
    "epoll_wait", "epoll_pwait", "poll", "select", "pthread_cond_wait",
    "pthread_cond_timedwait", "sem_wait", "sem_timedwait", "sem_clockwait", "nanosleep",
    "clock_nanosleep", "PyThread_acquire_lock_timed", "fdatasync", "fsync",
    "pthread_cond_clockwait",
})  # fmt: skip


def is_idle(names: list[str]) -> bool:
    """The innermost named frame (past unnamed libc ones) is a wait."""
    for name in reversed(names):
        if name.startswith("0x?"):
            continue
        return name.split(" (")[0] in IDLE_LEAVES
    return False


def summary(path: Path, top: int = 25) -> dict[str, Any]:
    """Top frames by own and inclusive samples, as shares of the samples in which a
    thread was not waiting (`IDLE_LEAVES`), and those samples by thread."""
    stacks = read_stacks(path)
    idle = 0
    busy = []
    for frames, n in stacks:
        if is_idle([frame_name(f) for f in frames]):
            idle += n
        else:
            busy.append((frames, n))
    stacks = busy
    total = sum(n for _, n in stacks) or 1
    names_file = path.with_suffix(".threads.json")
    tids = json.loads(names_file.read_text())["thread_names"] if names_file.exists() else {}
    own: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    threads: collections.Counter[str] = collections.Counter()
    for frames, n in stacks:
        names = [frame_name(f) for f in frames]
        thread = frames[0].strip() if frames and frames[0].startswith("thread (") else ""
        body = names[1:] if thread else names
        tid = thread.removeprefix("thread (").rstrip(")")
        threads[tids.get(tid, thread or "?")] += n
        if body:
            own[body[-1]] += n
        for name in set(body):
            inclusive[name] += n

    def shares(counter: collections.Counter[str]) -> list[tuple[str, float]]:
        return [(k, round(100 * v / total, 1)) for k, v in counter.most_common(top)]

    return {"samples": total, "idle_samples": idle, "threads": shares(threads),
            "own": shares(own), "inclusive": shares(inclusive)}  # fmt: skip


# ------------------------------------------------------------------ modes


def convergence(profile_dir: str, argv: list[str]) -> None:
    """bench/convergence.py with its active-controller profiler replaced by `Profile`."""
    import convergence as conv

    def start_profiler(pid: int, brokers: int, args: argparse.Namespace) -> Profile:
        return Profile(pid, Path(profile_dir) / f"controller-{brokers}-brokers.txt", args.seconds)

    conv.start_profiler = start_profiler  # type: ignore[assignment]
    sys.argv = [conv.__file__, *argv]
    conv.main()


async def change_stream(system: Any, rate: float, seconds: float) -> int:
    """convergence.py's stream, one record a commit, without its topic (no brokers
    here to place it on): the cluster-wide `log.retention.ms`."""
    from quorum.admin_client import AdminClient
    from quorum.gen import admin_pb2 as api

    client = AdminClient(system.addresses(), system.cluster_id)
    changes = 0
    try:
        deadline = next_at = time.monotonic()
        deadline += seconds
        while time.monotonic() < deadline:
            config = api.AlterableConfig(
                name="log.retention.ms", value=str(60_000 + changes), op=api.SET
            )
            resource = api.AlterConfigsResource(
                resource_type=api.CLUSTER, resource_name="", configs=[config]
            )
            request = api.IncrementalAlterConfigsRequest(resources=[resource])
            reply = await client.admin("IncrementalAlterConfigs", request)
            assert reply.resources[0].error.error_code == 0, reply
            changes += 1
            next_at += 1 / rate
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))
    finally:
        await client.close()
    return changes


def background(args: argparse.Namespace) -> None:
    """The active controller with no brokers: the same commits, no fetches."""
    from write_systems import QuorumSystem

    root = Path(tempfile.mkdtemp(prefix="bench-spy-"))
    system = QuorumSystem(root)
    try:
        system.start()
        time.sleep(2.0)  # settle after the election
        leader = system.leader()
        pids = {n: p.pid for n, p in system.members.procs.items()}
        for what, rate in (("idle", 0.0), ("commits", args.rate)):
            out = Path(args.profile_dir) / f"background-{what}.txt"
            profile = Profile(pids[leader], out, args.seconds)
            followers = {n: process_cpu_s(pid) for n, pid in pids.items() if n != leader}
            if rate:
                commits = asyncio.run(change_stream(system, rate, args.seconds))
            else:
                commits = 0
                time.sleep(args.seconds)
            followers_s = sum(process_cpu_s(pids[n]) - s for n, s in followers.items())
            result = profile.finish()
            emit(metric="controller_background_cpu", mode=what, commits=commits,
                 rate=rate, cores=round(result["cpu_s"] / result["window_s"], 3),
                 followers_cores=round(followers_s / result["window_s"], 3),
                 threads_cpu_s=result["threads_cpu_s"], window_s=result["window_s"],
                 profile=result["profile"],
                 load_average=[round(x, 2) for x in os.getloadavg()])  # fmt: skip
    finally:
        system.stop()
        import shutil

        shutil.rmtree(root, ignore_errors=True)


def switches(perf_data: Path, tid: int, top: int = 12) -> list[tuple[int, str, str, str]]:
    """A `SPY_PERF_EVENTS="-e sched:sched_switch"` recording, one thread's switches
    out, grouped by how it left the CPU (S: it slept; R: it was preempted), the
    innermost user-space frame and the system call or kernel path it left from
    (e.g. R after `write`: its write woke a thread that took the CPU)."""
    text = subprocess.run(
        ["perf", "script", "-i", str(perf_data), "--tid", str(tid), "-F", "tid,trace,ip,sym"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    found: collections.Counter[tuple[str, str, str]] = collections.Counter()
    state, frames = "", []

    def count() -> None:
        if not state:
            return
        user = [f.split(None, 1)[-1] for f in frames if not f.startswith("ffffffff")]
        kernel = [f.split(None, 1)[-1] for f in frames if f.startswith("ffffffff")]
        via = [k for k in kernel if k.startswith(("__x64_sys", "exit_to_user", "irqentry"))]
        found[(state, user[0] if user else "?", via[0] if via else "?")] += 1

    for line in text.splitlines():
        if "prev_state=" in line:
            count()
            state, frames = line.split("prev_state=")[1].split()[0], []
        elif line.strip():
            frames.append(line.strip())
    count()
    return [(n, *key) for key, n in found.most_common(top)]


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "convergence":
        convergence(sys.argv[2], sys.argv[3:])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    bg = sub.add_parser("background")
    bg.add_argument("--seconds", type=float, default=15)
    bg.add_argument("--rate", type=float, default=20)
    bg.add_argument("--profile-dir", default="/tmp/spy-background")
    sm = sub.add_parser("summary")
    sm.add_argument("file")
    sm.add_argument("--top", type=int, default=25)
    sw = sub.add_parser("switches", help="one thread's context switches (perf sched_switch)")
    sw.add_argument("perf_data")
    sw.add_argument("--tid", type=int, required=True, help="the main thread's: the pid")
    args = parser.parse_args()
    if args.mode == "switches":
        for n, state, frame, via in switches(Path(args.perf_data), args.tid):
            print(f"{n:8d}  {state}  {frame}  ({via})")
        return
    if args.mode == "background":
        say(f"== background: three controllers, no brokers, {args.rate} commits/s")
        background(args)
    else:
        found = summary(Path(args.file), args.top)
        print(f"{found['samples']} samples not waiting ({found['idle_samples']} waiting)")
        for part in ("threads", "own", "inclusive"):
            print(f"-- {part} (% of samples)")
            for name, share in found[part]:
                print(f"{share:6.1f}  {name}")


if __name__ == "__main__":
    main()
