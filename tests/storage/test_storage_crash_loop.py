"""Kill -9 a process appending to the log, many times, and lose nothing acknowledged.

The child (crash_child.py) prints a line for every batch after the flush that
covered it returned. The parent kills it at random moments (sometimes while it
is still recovering), reopens the log, and checks that every acknowledged
batch is there byte for byte, that everything visible is a whole, well-formed
batch, and that the epoch cache agrees with the log. It also moves the log
start now and then, so segment deletion is crashed into as well.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from crash_child import INDEX_INTERVAL_BYTES, SEGMENT_BYTES
from storage_helpers import batch_digest, record_bytes

from quorum.log.file_log import FileLogStore
from quorum.raft.records import Batch, OffsetAndEpoch, SnapshotId

CHILD = Path(__file__).with_name("crash_child.py")
KILLS = 60
SEED = 20_240_611


def test_acknowledged_batches_survive_kill_9(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    log_dir = tmp_path / "log"
    acked: dict[int, tuple[int, str]] = {}
    total_acked = 0
    for kill in range(KILLS):
        lines = run_and_kill(log_dir, rng)
        for line in lines:
            if line.endswith(b"\n") and line.startswith(b"acked "):
                _, base, next_offset, digest = line.decode().split()
                acked[int(base)] = (int(next_offset), digest)
                total_acked += 1
        try:
            verify_log(log_dir, acked, rng)
        except AssertionError as exc:
            raise AssertionError(f"after kill {kill} (seed {SEED}): {exc}") from exc
    assert total_acked > KILLS, "the child hardly ever got to acknowledge anything"


def run_and_kill(log_dir: Path, rng: random.Random) -> list[bytes]:
    child = subprocess.Popen(
        [sys.executable, str(CHILD), str(log_dir), str(rng.getrandbits(32))],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert child.stdout is not None and child.stderr is not None
    lines: list[bytes] = []
    reader = threading.Thread(target=lambda: lines.extend(child.stdout or ()))
    reader.start()
    if rng.random() < 0.1:
        time.sleep(rng.uniform(0, 0.1))  # often still opening / recovering the log
    else:
        deadline = time.monotonic() + 20
        while not lines and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.002)
        time.sleep(rng.uniform(0, 0.1))
    child.send_signal(signal.SIGKILL)
    child.wait()
    reader.join()
    stderr = child.stderr.read().decode(errors="replace")
    child.stdout.close()
    child.stderr.close()
    assert child.returncode == -signal.SIGKILL, f"child died on its own:\n{stderr}"
    return lines


def verify_log(log_dir: Path, acked: dict[int, tuple[int, str]], rng: random.Random) -> None:
    with FileLogStore(
        log_dir, segment_bytes=SEGMENT_BYTES, index_interval_bytes=INDEX_INTERVAL_BYTES
    ) as log:
        snapshot, batches = log.recover()
        start = snapshot.end_offset if snapshot else 0
        check_well_formed(batches, start)
        by_base = {batch.base_offset: batch for batch in batches}
        for base, (next_offset, digest) in sorted(acked.items()):
            if next_offset <= start:
                continue  # covered by a snapshot we declared
            batch = by_base.get(base)
            assert batch is not None, f"acknowledged batch at offset {base} is gone"
            assert batch.next_offset == next_offset, f"batch at {base} changed length"
            assert batch_digest(batch) == digest, f"batch at {base} changed content"
        check_epoch_cache(log, batches)
        if batches and rng.random() < 0.4:
            cut = batches[len(batches) // 2]
            log.advance_start(SnapshotId(cut.next_offset, cut.epoch))
            for base in [b for b, (n, _) in acked.items() if n <= cut.next_offset]:
                del acked[base]


def check_well_formed(batches: list[Batch], start: int) -> None:
    if not batches:
        return
    assert (
        batches[0].base_offset <= start < batches[0].next_offset or batches[0].base_offset == start
    )
    expected = batches[0].base_offset
    for batch in batches:
        assert batch.base_offset == expected, f"gap or overlap at offset {expected}"
        for i, record in enumerate(batch.records):
            offset = batch.base_offset + i
            assert record == record_bytes(offset, batch.epoch, len(record)), (
                f"record at offset {offset} is not what was written"
            )
        expected = batch.next_offset


def check_epoch_cache(log: FileLogStore, batches: list[Batch]) -> None:
    ends: dict[int, int] = {}
    for batch in batches:
        ends[batch.epoch] = batch.next_offset
    epochs = sorted(ends)
    for i, epoch in enumerate(epochs):
        expected_end = log.end_offset if i == len(epochs) - 1 else ends[epoch]
        assert log.end_offset_for_epoch(epoch) == OffsetAndEpoch(expected_end, epoch)
