"""The quorum-state file: the epoch, vote and leader a node must never forget.

A voter that forgot its vote after a restart could vote twice in one epoch, so
every write is atomic and durable (temp file, fsync, rename, fsync of the
directory) and is done before the vote is sent. The file also names the
cluster and node it belongs to: a data directory copied to the wrong node or
cluster is refused rather than trusted. A missing file means a fresh node.

File format (JSON):
    {"version": 1, "cluster_id": "...", "node_id": 1, "epoch": 5,
     "voted_for": 2, "leader_id": null}
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from quorum.log.errors import (
    InconsistentClusterIdError,
    InconsistentNodeIdError,
    QuorumStateCorruptionError,
)
from quorum.log.fsutil import fsync_dir, write_atomically
from quorum.raft.config import QuorumStateData

VERSION = 1
FILE_NAME = "quorum-state"


class FileQuorumStateStore:
    def __init__(self, path: str | Path, cluster_id: str, node_id: int) -> None:
        self.path = Path(path)
        self.cluster_id = cluster_id
        self.node_id = node_id
        self._state = self._load()

    def read(self) -> QuorumStateData:
        return self._state

    def write(self, state: QuorumStateData) -> None:
        """Atomically and durably replace the stored state."""
        doc = {
            "version": VERSION,
            "cluster_id": self.cluster_id,
            "node_id": self.node_id,
            "epoch": state.epoch,
            "voted_for": state.voted_for,
            "leader_id": state.leader_id,
        }
        if not self.path.parent.exists():
            self.path.parent.mkdir(parents=True)
            fsync_dir(self.path.parent.parent)
        write_atomically(self.path, json.dumps(doc, indent=1).encode() + b"\n")
        self._state = state

    def _load(self) -> QuorumStateData:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return QuorumStateData()
        try:
            doc = json.loads(raw)
            if not isinstance(doc, dict):
                raise TypeError("not a JSON object")
            version = doc["version"]
            if version != VERSION:
                raise ValueError(f"unsupported version {version!r}")
            cluster_id = doc["cluster_id"]
            node_id = _int(doc, "node_id")
            state = QuorumStateData(
                epoch=_int(doc, "epoch"),
                voted_for=_optional_int(doc, "voted_for"),
                leader_id=_optional_int(doc, "leader_id"),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise QuorumStateCorruptionError(
                self.path, f"unreadable quorum-state file ({exc})"
            ) from None
        if cluster_id != self.cluster_id:
            raise InconsistentClusterIdError(self.path, self.cluster_id, str(cluster_id))
        if node_id != self.node_id:
            raise InconsistentNodeIdError(self.path, self.node_id, node_id)
        if state.epoch < 0:
            raise QuorumStateCorruptionError(self.path, f"negative epoch {state.epoch}")
        return state


def _int(doc: dict[str, Any], key: str) -> int:
    value = doc[key]
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{key} is not an integer: {value!r}")
    return value


def _optional_int(doc: dict[str, Any], key: str) -> int | None:
    return None if doc[key] is None else _int(doc, key)
