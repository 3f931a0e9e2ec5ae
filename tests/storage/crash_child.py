"""Child process for the crash-loop test: appends to a FileLogStore forever.

After every flush returns it prints `acked <base> <next> <digest>` for each
batch the flush covered; the parent kills it with SIGKILL at a random moment
and checks that every acknowledged batch survived. A real kill rarely lands
inside a `write`, so some runs end by writing a prefix of one more batch
themselves and waiting to be killed: the torn write a crash mid-append leaves.
Usage:

    python crash_child.py <log dir> <seed>
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from quorum.log.batch_format import encode_batch
from quorum.log.file_log import FileLogStore
from quorum.raft.records import Batch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from storage_helpers import batch_digest, record_bytes

SEGMENT_BYTES = 64 * 1024
INDEX_INTERVAL_BYTES = 1024


def random_batch(rng: random.Random, base: int, epoch: int) -> Batch:
    if rng.random() < 0.02:
        count, max_size = rng.randint(50, 120), 2000  # bigger than a segment
    else:
        count, max_size = rng.randint(1, 20), 300
    records = tuple(record_bytes(base + i, epoch, rng.randint(0, max_size)) for i in range(count))
    return Batch(base, epoch, records, append_time_ms=base, control=rng.random() < 0.05)


def main() -> None:
    directory, seed = Path(sys.argv[1]), int(sys.argv[2])
    rng = random.Random(seed)
    log = FileLogStore(
        directory, segment_bytes=SEGMENT_BYTES, index_interval_bytes=INDEX_INTERVAL_BYTES
    )
    snapshot, batches = log.recover()
    epoch = max([b.epoch for b in batches] + [snapshot.epoch if snapshot else 0]) + 1
    out = sys.stdout
    out.write(f"ready {log.end_offset}\n")
    out.flush()
    tear_after = rng.randint(0, 30) if rng.random() < 0.3 else -1
    for step in range(10**9):
        roll = rng.random()
        end = log.end_offset
        if step == tear_after:
            tear(log, random_batch(rng, end, epoch), rng)
        if roll < 0.05:
            # Append without flushing, then cut it away: never acknowledged.
            doomed = [random_batch(rng, end, epoch)]
            log.append(doomed)
            log.truncate(end)
            epoch += 1
            continue
        if roll < 0.08:
            epoch += 1
        appended = []
        offset = end
        for _ in range(rng.randint(1, 4)):
            batch = random_batch(rng, offset, epoch)
            appended.append(batch)
            offset = batch.next_offset
        log.append(appended)
        log.flush(offset)
        out.write(
            "".join(f"acked {b.base_offset} {b.next_offset} {batch_digest(b)}\n" for b in appended)
        )
        out.flush()


def tear(log: FileLogStore, batch: Batch, rng: random.Random) -> None:
    """Leave part of a batch at the end of the active segment, then hang."""
    data = encode_batch(batch)
    with open(log.segment_paths[-1], "ab") as segment:
        segment.write(data[: rng.randint(1, len(data) - 1)])
    time.sleep(3600)


if __name__ == "__main__":
    main()
