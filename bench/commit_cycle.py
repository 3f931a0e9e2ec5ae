"""A server's commit cycle, from `bench/commit_cycle`'s event files.

For each server process that answered brokers (the active controller, the
floor's server), over the commits of the `--window` seconds with the most broker answers,
per commit cycle (from one commit to the next), medians and p90s of:

- `parked`: the broker fetches parked when the commit came (the controller's
  `CommitClock.waiting`; the floor does not count them);
- the broker answers of the cycle: how many, over how many loop iterations,
  how long after the commit the last one left the servicer, and how many were
  answered on arrival (the request and its answer in one loop iteration:
  a fetch behind the high watermark, not parked);
- the brokers' requests: how many, over how many loop iterations, when the
  last one came;
- the loop's sleeps: how many, what woke them, and how many fell between the
  cycle's first and last answer (a burst split in two).

And for the whole stretch: answers, loop sleeps and loop iterations a second,
and (the controller) the kinds of records its commits applied.

With `--perf PID PERF_DATA TID` (repeatable), the wake-ups of thread TID of
process PID (gRPC's poller, say) from a `perf record -k mono -e
sched:sched_switch` of it (`SPY_PERF=1` in `bench/spy.py`), per cycle: while
the answers were leaving, after the last one, and how long after the commit.

`--sends PID PERF_DATA`: the process's `sendmsg` calls per cycle, by thread
(the loop's own or gRPC's event engine) and phase, from `-e
syscalls:sys_enter_sendmsg` in the same recording.

    .venv/bin/python bench/commit_cycle.py DIR [--window 12] [--perf PID DATA TID]
        [--sends PID DATA]
"""

from __future__ import annotations

import argparse
import bisect
import collections
import itertools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

BROKER = "MetadataFetchStream"
KEYS = ("ms", "parked", "answers", "answer_iterations", "on_arrival", "last_answer_ms",
        "requests", "request_iterations", "req_last_ms", "sleeps", "sleeps_in_answers")  # fmt: skip


def read(path: Path) -> list[list[Any]]:
    events = []
    for line in path.read_text().splitlines():
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:  # a line cut by the process's end
            break
    return events


def cycles(events: list[list[Any]], window_s: float) -> list[list[list[Any]]]:
    """The events from each commit to the next, for the commits of the
    `window_s` seconds in which the most broker answers left (the bench's
    window, not the start-up or the brokers' shutdown)."""
    starts = [i for i, e in enumerate(events) if e[2] == "commit"]
    answered = [e[0] for e in events if e[2] == "ans" and e[3] == BROKER]
    if len(starts) < 2 or not answered:
        return []
    span = int(window_s * 1e9)
    best, begin = -1, 0
    for i in starts:
        t = events[i][0]
        count = bisect.bisect_left(answered, t + span) - bisect.bisect_left(answered, t)
        if count > best:
            best, begin = count, t
    return [
        events[a:b] for a, b in itertools.pairwise(starts)
        if begin <= events[a][0] < begin + span
    ]  # fmt: skip


def summarise(cycle: list[list[Any]]) -> dict[str, Any]:
    t0 = cycle[0][0]
    answers = [e for e in cycle if e[2] == "ans" and e[3] == BROKER]
    requests = [e for e in cycle if e[2] == "req" and e[3] == BROKER]
    sleeps = [e for e in cycle if e[2] == "sleep"]
    read_in = collections.Counter(e[1] for e in requests)
    answered_in = collections.Counter(e[1] for e in answers)
    out: dict[str, Any] = {
        "ms": (cycle[-1][0] - t0) / 1e6,
        "parked": cycle[0][4],
        "answers": len(answers),
        "answer_iterations": len(answered_in),
        "on_arrival": sum(min(n, read_in[it]) for it, n in answered_in.items()),
        "requests": len(requests),
        "request_iterations": len(read_in),
        "sleeps": len(sleeps),
        "woke": collections.Counter(e[3] for e in sleeps),
        "sleeps_in_answers": 0,
    }
    if answers:
        first, last = answers[0][0], answers[-1][0]
        out["last_answer_ms"] = (last - t0) / 1e6
        out["sleeps_in_answers"] = sum(1 for e in sleeps if first < e[0] < last)
    if requests:
        out["req_last_ms"] = (requests[-1][0] - t0) / 1e6
    return out


def quantiles(values: list[float]) -> list[float]:
    values = sorted(values)
    return [round(values[int(len(values) * q)], 1) for q in (0.5, 0.9)] if values else []


def report(path: Path, window_s: float) -> dict[str, Any] | None:
    events = read(path)
    chosen = cycles(events, window_s)
    if not chosen:
        return None
    rows = [summarise(c) for c in chosen]
    if not any(r["answers"] for r in rows):
        return None  # a follower: its clock ticks, nobody parks on it
    woke: collections.Counter[str] = collections.Counter()
    for r in rows:
        woke.update(r["woke"])
    first, last = chosen[0][0], chosen[-1][-1]
    seconds = (last[0] - first[0]) / 1e9
    stretch = [e for c in chosen for e in c]
    answers = sum(r["answers"] for r in rows)
    kinds = collections.Counter(
        kind for e in stretch if e[2] == "applied" for kind in e[3].split(",")
    )
    return {
        "file": path.name, "cycles": len(rows), "seconds": round(seconds, 1),
        "commits_per_s": round(len(rows) / seconds, 1),
        "answers_per_s": round(answers / seconds),
        "loop_sleeps_per_s": round(sum(r["sleeps"] for r in rows) / seconds),
        "loop_sleeps_per_answer": round(sum(r["sleeps"] for r in rows) / max(answers, 1), 3),
        "loop_iterations_per_s": round((last[1] - first[1]) / seconds),
        "answered_on_arrival": round(sum(r["on_arrival"] for r in rows) / max(answers, 1), 3),
        "p50_p90": {k: quantiles([r[k] for r in rows if k in r]) for k in KEYS},
        "sleeps_per_cycle_by_waker": {k: round(v / len(rows), 2) for k, v in woke.most_common()},
        "records_applied_per_s": {k: round(v / seconds, 1) for k, v in kinds.most_common()},
    }  # fmt: skip


def thread_wakes(perf_data: Path, tid: int) -> list[int]:
    """When thread `tid` came back on the CPU after going to sleep (monotonic
    ns), from a `perf record -k mono -e sched:sched_switch` of its process."""
    out = subprocess.run(
        ["perf", "script", "-i", str(perf_data), "-F", "time,trace", "--ns"],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    wakes, asleep = [], False
    for line in out.splitlines():
        stamp, _, trace = line.partition(":")
        if f"prev_pid={tid} " in trace:
            asleep = " prev_state=S" in trace or " prev_state=D" in trace
        elif (
            trace.rstrip().endswith(f"next_pid={tid} next_prio=120") or f"next_pid={tid} " in trace
        ):
            if asleep:
                wakes.append(round(float(stamp.strip()) * 1e9))
            asleep = False
    return wakes


def wakes_by_phase(chosen: list[list[list[Any]]], wakes: list[int]) -> dict[str, Any]:
    """A thread's wake-ups per commit cycle: while the cycle's broker answers
    were leaving (from the commit to the last answer), and after."""
    during = after = 0
    offsets: list[float] = []
    for cycle in chosen:
        t0, t1 = cycle[0][0], cycle[-1][0]
        answers = [e[0] for e in cycle if e[2] == "ans" and e[3] == BROKER]
        burst_end = answers[-1] if answers else t0
        lo, hi = bisect.bisect_left(wakes, t0), bisect.bisect_left(wakes, t1)
        for w in wakes[lo:hi]:
            offsets.append((w - t0) / 1e6)
            if w <= burst_end:
                during += 1
            else:
                after += 1
    n = max(len(chosen), 1)
    offsets.sort()
    return {
        "wakes_per_cycle": round((during + after) / n, 1),
        "while_answering": round(during / n, 1), "after_last_answer": round(after / n, 1),
        "ms_after_commit_p10_p50_p90": [
            round(offsets[int(len(offsets) * q)], 1) for q in (0.1, 0.5, 0.9)
        ] if offsets else [],
    }  # fmt: skip


def sends(perf_data: Path, pid: int, chosen: list[list[list[Any]]]) -> dict[str, Any]:
    """`sendmsg` calls per commit cycle by the thread that made them (the event
    loop's own, `main`, or gRPC's event-engine threads), while the cycle's
    answers were leaving and after, from a `perf record -k mono -e
    syscalls:sys_enter_sendmsg` of the process."""
    out = subprocess.run(
        ["perf", "script", "-i", str(perf_data), "-F", "comm,tid,time,event", "--ns"],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    calls: list[tuple[int, str]] = []
    for line in out.splitlines():
        if "sys_enter_sendmsg" not in line:
            continue
        words = line.split()
        tid = int(words[-3])
        stamp = round(float(words[-2].rstrip(":")) * 1e9)
        calls.append((stamp, "main" if tid == pid else words[0]))
    calls.sort()
    stamps = [c[0] for c in calls]
    counts: collections.Counter[str] = collections.Counter()
    for cycle in chosen:
        t0, t1 = cycle[0][0], cycle[-1][0]
        answers = [e[0] for e in cycle if e[2] == "ans" and e[3] == BROKER]
        burst_end = answers[-1] if answers else t0
        for stamp, thread in calls[bisect.bisect_left(stamps, t0) : bisect.bisect_left(stamps, t1)]:
            counts[f"{thread} {'while answering' if stamp <= burst_end else 'after'}"] += 1
    n = max(len(chosen), 1)
    return {k: round(v / n, 1) for k, v in sorted(counts.items())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("directory")
    parser.add_argument("--window", type=float, default=12.0, help="seconds of commits read")
    parser.add_argument(
        "--perf", nargs=3, action="append", default=[], metavar=("PID", "PERF_DATA", "TID"),
        help="the process PID's thread TID: its wake-ups by phase of the commit cycle",
    )  # fmt: skip
    parser.add_argument(
        "--sends", nargs=2, action="append", default=[], metavar=("PID", "PERF_DATA"),
        help="the process PID's sendmsg calls per cycle, by thread",
    )  # fmt: skip
    args = parser.parse_args()
    sends_of = {int(pid): Path(data) for pid, data in args.sends}
    threads: dict[int, list[tuple[Path, int]]] = collections.defaultdict(list)
    for pid, data, tid in args.perf:
        threads[int(pid)].append((Path(data), int(tid)))
    for path in sorted(Path(args.directory).glob("cycle-*.jsonl")):
        result = report(path, args.window)
        if result is None:
            continue
        pid = int(path.stem.split("-")[1])
        for data, tid in threads.get(pid, []):
            chosen = cycles(read(path), args.window)
            result[f"thread_{tid}"] = wakes_by_phase(chosen, thread_wakes(data, tid))
        if pid in sends_of:
            result["sendmsg_per_cycle"] = sends(sends_of[pid], pid, cycles(read(path), args.window))
        json.dump(result, sys.stdout)
        sys.stdout.write("\n")


if __name__ == "__main__":
    main()
