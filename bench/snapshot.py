"""Writing and loading a snapshot of a large metadata image.

The image has --records partition-like records (key
`partition/<topic uuid>/<n>`, a 60-100 byte value), held in a dict in
insertion order, which is not key order, so the writer's sort is measured too.

* snapshot_write_s: sort, write through 10k-record write batches into a new
  RocksDB database (WAL off), flush, fsync every file, publish by rename.
* snapshot_load_s: open read-only, iterate every record, verify the checksum.
* snapshot_bytes: size of the published snapshot directory.
* snapshot_archive_s / snapshot_install_s: build the transfer archive on the
  leader; receive it in 1 MiB chunks, validate and install on a follower.

Prints one JSON object per line on stdout and nothing else. Example:

    .venv/bin/python bench/snapshot.py --records 1000000
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from quorum.raft.records import SnapshotId
from snapshots.store import FileSnapshotStore

REPO = Path(__file__).resolve().parents[1]
PARTITIONS_PER_TOPIC = 50
CHUNK_BYTES = 1 << 20


def build_image(records: int, seed: int) -> dict[bytes, bytes]:
    rng = random.Random(seed)
    values = []
    for i in range(997):  # a prime, so topics do not line up with value templates
        replicas = rng.sample(range(1, 100), 3)
        value = (
            f'{{"leader":{replicas[0]},"replicas":{replicas},"isr":{replicas},'
            f'"leader_epoch":{rng.randrange(1000)},"partition_epoch":{i}}}'
        ).encode()
        values.append(value.ljust(rng.randint(60, 100), b" "))
    image: dict[bytes, bytes] = {}
    topics = -(-records // PARTITIONS_PER_TOPIC)
    for t in range(topics):
        topic = uuid.UUID(int=rng.getrandbits(128)).hex
        for n in range(min(PARTITIONS_PER_TOPIC, records - len(image))):
            image[f"partition/{topic}/{n}".encode()] = values[(t + n) % len(values)]
    return image


def directory_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def emit(metric: str, value: float, **fields: object) -> None:
    print(json.dumps({"metric": metric, **fields, "value": round(value, 3)}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--skip-transfer", action="store_true")
    parser.add_argument("--dir", type=Path, default=REPO / "data" / "bench-tmp")
    args = parser.parse_args()

    image = build_image(args.records, args.seed)
    args.dir.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="snapshot-", dir=args.dir))
    snapshot_id = SnapshotId(end_offset=args.records, epoch=7)
    try:
        leader = FileSnapshotStore(workdir / "leader")
        start = time.perf_counter()
        manifest = leader.write(snapshot_id, image.items())
        emit("snapshot_write_s", time.perf_counter() - start, records=manifest.record_count)

        start = time.perf_counter()
        loaded = sum(1 for _ in leader.read(snapshot_id))
        emit("snapshot_load_s", time.perf_counter() - start, records=loaded)
        assert loaded == len(image)
        emit("snapshot_bytes", directory_bytes(leader.path(snapshot_id)), records=loaded)

        if not args.skip_transfer:
            start = time.perf_counter()
            size = leader.archive_size(snapshot_id)
            emit("snapshot_archive_s", time.perf_counter() - start, archive_bytes=size)
            follower = FileSnapshotStore(workdir / "follower")
            start = time.perf_counter()
            receiver = follower.begin_install(snapshot_id, size)
            while receiver.received < size:
                chunk = leader.read_chunk(snapshot_id, receiver.received, CHUNK_BYTES)
                receiver.write_chunk(chunk.position, chunk.data)
            installed = receiver.complete()
            emit("snapshot_install_s", time.perf_counter() - start, chunk_bytes=CHUNK_BYTES)
            assert installed.checksum == manifest.checksum
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
