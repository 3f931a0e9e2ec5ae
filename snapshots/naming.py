"""Snapshot directory names: `<end offset:020d>-<epoch:010d>.snapshot`, as
Kafka names its `.checkpoint` files, so a listing sorts by end offset."""

from __future__ import annotations

import re

from quorum.raft.records import SnapshotId

SUFFIX = ".snapshot"
_NAME = re.compile(r"^(\d{20})-(\d{10})\.snapshot$")


def snapshot_name(snapshot_id: SnapshotId) -> str:
    if snapshot_id.end_offset < 0 or snapshot_id.epoch < 0:
        raise ValueError(f"invalid snapshot id {snapshot_id}")
    return f"{snapshot_id.end_offset:020d}-{snapshot_id.epoch:010d}{SUFFIX}"


def parse_snapshot_name(name: str) -> SnapshotId | None:
    match = _NAME.match(name)
    return SnapshotId(int(match.group(1)), int(match.group(2))) if match else None
