"""Shared helpers for the storage tests (imported by module name: pytest puts
this directory on sys.path because it has no __init__.py)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from quorum.raft.records import Batch


def record_bytes(offset: int, epoch: int, size: int) -> bytes:
    """Deterministic content for the record at `offset`, so a reader can tell
    a correct record from garbage knowing only its offset, epoch and size."""
    seed = hashlib.sha256(f"{offset}:{epoch}".encode()).digest()
    return (seed * (size // len(seed) + 1))[:size]


def make_batch(
    base_offset: int,
    epoch: int,
    count: int = 3,
    size: int = 20,
    *,
    append_time_ms: int = 1_000,
    control: bool = False,
) -> Batch:
    records = tuple(record_bytes(base_offset + i, epoch, size) for i in range(count))
    return Batch(base_offset, epoch, records, append_time_ms, control)


def make_batches(
    start: int, epoch: int, batches: int, count: int = 3, size: int = 20
) -> list[Batch]:
    out = []
    offset = start
    for _ in range(batches):
        batch = make_batch(offset, epoch, count, size)
        out.append(batch)
        offset = batch.next_offset
    return out


def batch_digest(batch: Batch) -> str:
    h = hashlib.sha256()
    h.update(f"{batch.base_offset}:{batch.epoch}:{batch.control}:{batch.append_time_ms}".encode())
    for record in batch.records:
        h.update(len(record).to_bytes(4, "big"))
        h.update(record)
    return h.hexdigest()


def directory_state(root: Path) -> dict[str, bytes]:
    """Every file under `root` with its bytes: compare before and after an
    operation that must not change anything."""
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def flip_byte(path: Path, position: int) -> None:
    data = bytearray(path.read_bytes())
    data[position] ^= 0xFF
    path.write_bytes(bytes(data))
