"""The quorum-state file: the epoch, vote and leader a node must never forget.

A voter that forgot its vote after a restart could vote twice in one epoch, so
every write is atomic and durable (temp file, fsync, rename, fsync of the
directory) and is done before the vote is sent. The file also names the
cluster and node it belongs to: a data directory copied to the wrong node or
cluster is refused rather than trusted. A missing file means a fresh node.

A CRC32C over the other fields guards against an edited or bit-flipped file: a
`voted_for` changed from 1 to 2, or an epoch lowered, would otherwise be trusted
and let this node vote twice in one epoch. A version-1 file (no checksum, written
by earlier releases) is not read at start-up: setting the version field of a
version-2 file to 1 would otherwise skip the checksum. It is upgraded once, by
an operator's explicit `quorumctl storage upgrade-quorum-state` (`upgrade`), and a
"version 1" file that carries a checksum (an edited version-2 file) is refused
even there. An epoch above `MAX_EPOCH` is refused: no election could follow it.

File format (JSON):
    {"version": 2, "cluster_id": "...", "node_id": 1, "epoch": 5,
     "voted_for": 2, "leader_id": null, "crc32c": 1234567890}
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import google_crc32c

from quorum.common.fsutil import fsync_dir, write_atomically
from quorum.log.errors import (
    InconsistentClusterIdError,
    InconsistentNodeIdError,
    QuorumStateCorruptionError,
)
from quorum.raft.config import QuorumStateData
from quorum.raft.messages import MAX_EPOCH

VERSION = 2
UNCHECKED_VERSION = 1
FILE_NAME = "quorum-state"


class FileQuorumStateStore:
    def __init__(
        self, path: str | Path, cluster_id: str, node_id: int, *, upgrading: bool = False
    ) -> None:
        self.path = Path(path)
        self.cluster_id = cluster_id
        self.node_id = node_id
        self._state = self._load(upgrading)

    @classmethod
    def upgrade(cls, path: str | Path, cluster_id: str, node_id: int) -> QuorumStateData | None:
        """Read a version-1 file once and rewrite it as version 2 (the operator's
        explicit upgrade); None when the file is already version 2 or absent."""
        store = cls(path, cluster_id, node_id, upgrading=True)
        if not store._was_unchecked:
            return None
        store.write(store.read())
        return store.read()

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
        doc["crc32c"] = _checksum(doc)
        if not self.path.parent.exists():
            self.path.parent.mkdir(parents=True)
            fsync_dir(self.path.parent.parent)
        write_atomically(self.path, json.dumps(doc, indent=1).encode() + b"\n")
        self._state = state

    def _load(self, upgrading: bool) -> QuorumStateData:
        self._was_unchecked = False
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return QuorumStateData()
        try:
            doc = json.loads(raw)
            if not isinstance(doc, dict):
                raise TypeError("not a JSON object")
            version = doc["version"]
            if version not in (VERSION, UNCHECKED_VERSION):
                raise ValueError(f"unsupported version {version!r}")
            if version == UNCHECKED_VERSION:
                self._check_unchecked(doc, upgrading)
            if version == VERSION:
                fields = {k: v for k, v in doc.items() if k != "crc32c"}
                stored = _int(doc, "crc32c")
                if stored != _checksum(fields):
                    raise ValueError(
                        f"checksum mismatch (stored {stored}, computed {_checksum(fields)}): "
                        "the file was changed outside this node"
                    )
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
            raise InconsistentClusterIdError(
                self.path,
                self.cluster_id,
                str(cluster_id),
                f"{self.path}: this node wrote its votes here for cluster {cluster_id!r}, "
                f"but meta.properties says cluster {self.cluster_id!r}: meta.properties "
                "was changed, or the directory holds files of two clusters "
                "(restore meta.properties, or format an empty directory)",
            )
        if node_id != self.node_id:
            raise InconsistentNodeIdError(self.path, self.node_id, node_id)
        if not 0 <= state.epoch <= MAX_EPOCH:
            raise QuorumStateCorruptionError(
                self.path, f"epoch {state.epoch} is outside 0..{MAX_EPOCH}"
            )
        return state

    def _check_unchecked(self, doc: dict[str, Any], upgrading: bool) -> None:
        if "crc32c" in doc:
            raise ValueError(
                "version 1 never had a checksum, but this file has one: a version-2 "
                "file whose version was edited, refused so its checksum cannot be skipped"
            )
        if not upgrading:
            raise ValueError(
                "version 1 (written before the checksum existed) is not read at "
                "start-up; run `quorumctl storage upgrade-quorum-state --config FILE` "
                "once to upgrade it"
            )
        self._was_unchecked = True


def _checksum(fields: dict[str, Any]) -> int:
    """CRC32C of the fields' canonical JSON (sorted keys, no spaces)."""
    canonical = json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()
    return int(google_crc32c.value(canonical))


def _int(doc: dict[str, Any], key: str) -> int:
    value = doc[key]
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{key} is not an integer: {value!r}")
    return value


def _optional_int(doc: dict[str, Any], key: str) -> int | None:
    return None if doc[key] is None else _int(doc, key)
