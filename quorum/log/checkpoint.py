"""The log-start checkpoint: which snapshot the log starts after.

Unlike the index and the epoch cache this cannot be rebuilt from the segments
(batches below the snapshot may already be gone), so a damaged file is an
error, not something to repair. `reset_pending` makes `reset_to_snapshot`
crash-safe: it is set before the old segments are deleted and cleared once the
fresh empty segment exists, and an open that finds it set finishes the reset.

File format (JSON, replaced atomically):
    {"version": 1, "snapshot_end_offset": 1234, "snapshot_epoch": 5, "reset_pending": false}
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from quorum.common.fsutil import write_atomically
from quorum.log.errors import LogCorruptionError
from quorum.raft.records import SnapshotId

VERSION = 1


@dataclass(frozen=True, slots=True)
class LogStartCheckpoint:
    snapshot_id: SnapshotId | None = None
    reset_pending: bool = False


def read_checkpoint(path: Path) -> LogStartCheckpoint:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return LogStartCheckpoint()
    try:
        return _decode(raw)
    except (ValueError, KeyError, TypeError) as exc:
        raise LogCorruptionError(path, f"unreadable log-start checkpoint ({exc})") from None


def _decode(raw: bytes) -> LogStartCheckpoint:
    doc = json.loads(raw)
    if doc["version"] != VERSION:
        raise ValueError(f"unsupported version {doc['version']!r}")
    end, epoch, reset = doc["snapshot_end_offset"], doc["snapshot_epoch"], doc["reset_pending"]
    if not isinstance(reset, bool):
        raise TypeError("reset_pending is not a boolean")
    if end is None:
        return LogStartCheckpoint(None, reset)
    if not isinstance(end, int) or not isinstance(epoch, int) or end < 0 or epoch < 0:
        raise TypeError("bad snapshot id")
    return LogStartCheckpoint(SnapshotId(end, epoch), reset)


def write_checkpoint(path: Path, checkpoint: LogStartCheckpoint) -> None:
    snapshot = checkpoint.snapshot_id
    doc = {
        "version": VERSION,
        "snapshot_end_offset": snapshot.end_offset if snapshot else None,
        "snapshot_epoch": snapshot.epoch if snapshot else None,
        "reset_pending": checkpoint.reset_pending,
    }
    write_atomically(path, json.dumps(doc).encode())
