"""Killing the cleaner (a real child process, SIGKILL) at every step of a
segment swap, and at random moments: reopening the log finds, for every group
of segments the round rewrites, either the old records or the new ones, never
a mix; no key loses its latest value; and the next round finishes the job."""

from __future__ import annotations

import random
import shutil
import signal
import subprocess
import sys
import time
from itertools import pairwise
from pathlib import Path

import pytest
from cleaner_helpers import (
    BASE_TIME_MS,
    Stored,
    latest_per_key,
    make_batch,
    open_log,
    produce,
    producers_of,
    read_all,
)

from broker_agent.partitions.log_cleaner import LogCleaner
from quorum.log.segment import parse_log_file_name

CHILD = Path(__file__).with_name("cleaner_crash_child.py")
NOW = BASE_TIME_MS + 1_000


def build(directory: Path) -> None:
    """A log cleaned once, then dirtied again: the next round merges several
    small cleaned segments per group, so every swap step happens."""
    plog = open_log(directory)
    for r in range(8):
        for k in range(30):
            produce(plog, make_batch([(b"k%d" % k, b"v%d-%d-" % (r, k) + b"x" * 40)]))
    plog.store.roll()
    LogCleaner().clean(plog, plog.log_end_offset, NOW, producers_of(plog))
    for r in range(8, 12):
        for k in range(0, 30, 2):
            value = None if k % 6 == 0 and r == 11 else b"v%d-%d-" % (r, k) + b"y" * 40
            produce(plog, make_batch([(b"k%d" % k, value)]))
    plog.store.roll()
    plog.close()


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Stored], list[Stored]]:
    """The prepared log, its records, and its records after an uninterrupted round."""
    root = tmp_path_factory.mktemp("cleaner-crash")
    build(root / "template")
    before = read_all(reopened := open_log(root / "template"))
    reopened.close()
    shutil.copytree(root / "template", root / "reference")
    reference = open_log(root / "reference")
    LogCleaner().clean(reference, reference.log_end_offset, NOW, producers_of(reference))
    after = read_all(reference)
    reference.close()
    assert len(after) < len(before)
    return root, before, after


def segment_bases(directory: Path) -> list[int]:
    return sorted(
        b for b in map(parse_log_file_name, (p.name for p in directory.iterdir())) if b is not None
    )


def check_recovered(root: Path, directory: Path, before: list[Stored], after: list[Stored]) -> None:
    plog = open_log(directory)
    leftovers = [p.name for p in directory.iterdir() if p.suffix in (".cleaned", ".swap")]
    assert not leftovers
    recovered = read_all(plog)
    offsets = [r.offset for r in recovered]
    assert offsets == sorted(set(offsets))
    # Never a lost latest value.
    latest = latest_per_key(recovered)
    for key, record in latest_per_key(before).items():
        assert latest[key] == record, key
    # Every group the round rewrites is wholly old or wholly new.
    bounds = segment_bases(root / "reference")
    for low, high in pairwise(bounds):
        part = [r for r in recovered if low <= r.offset < high]
        old = [r for r in before if low <= r.offset < high]
        new = [r for r in after if low <= r.offset < high]
        assert part in (old, new), (low, high)
    # The next round finishes the job.
    LogCleaner().clean(plog, plog.log_end_offset, NOW, producers_of(plog))
    assert read_all(plog) == after
    plog.close()
    plog = open_log(directory)
    assert read_all(plog) == after
    plog.close()


def run_child(directory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(CHILD), str(directory), str(NOW), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


STEPS = [
    ("writing", 1),
    ("cleaned", 1),
    ("committed", 1),
    ("deleted-old", 1),
    ("renamed", 1),
    ("swapped", 1),
    ("writing", 3),
    ("committed", 2),
    ("deleted-old", 3),
    ("renamed", 2),
]


@pytest.mark.parametrize(("step", "n"), STEPS)
def test_kill_at_each_swap_step(
    scenario: tuple[Path, list[Stored], list[Stored]], step: str, n: int
) -> None:
    root, before, after = scenario
    directory = root / f"crash-{step}-{n}"
    shutil.copytree(root / "template", directory)
    child = run_child(directory, "step", step, str(n))
    assert child.returncode == -signal.SIGKILL, child.stderr
    check_recovered(root, directory, before, after)


def test_every_step_is_reached(scenario: tuple[Path, list[Stored], list[Stored]]) -> None:
    root, _, _ = scenario
    directory = root / "uninterrupted"
    shutil.copytree(root / "template", directory)
    child = run_child(directory, "step", "none", "1")
    assert child.returncode == 0, child.stderr
    calls = dict(item.split("=") for item in child.stdout.split("done", 1)[1].split())
    for step, n in STEPS:
        assert int(calls[step]) >= n, (step, calls)


def test_kill_at_random_moments(scenario: tuple[Path, list[Stored], list[Stored]]) -> None:
    root, before, after = scenario
    rng = random.Random(34)
    for run in range(12):
        directory = root / f"random-{run}"
        shutil.copytree(root / "template", directory)
        child = subprocess.Popen(
            [sys.executable, str(CHILD), str(directory), str(NOW), "slow"],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "ready"
            time.sleep(rng.uniform(0.0, 0.15))  # the round takes ~0.1-0.2 s
            child.send_signal(signal.SIGKILL)
        finally:
            child.wait(timeout=60)
            if child.stdout is not None:
                child.stdout.close()
        check_recovered(root, directory, before, after)
