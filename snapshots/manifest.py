"""The manifest published with every snapshot: what the reader must find."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from quorum.raft.records import SnapshotId
from snapshots.errors import SnapshotCorruptionError

FORMAT_VERSION = 1
MANIFEST_FILE = "manifest.json"


@dataclass(frozen=True, slots=True)
class SnapshotManifest:
    snapshot_id: SnapshotId
    record_count: int
    data_bytes: int  # keys plus values, without framing
    checksum: int  # CRC32C, see records.py
    created_time_ms: int
    format_version: int = FORMAT_VERSION

    def to_json(self) -> bytes:
        doc = {
            "format_version": self.format_version,
            "end_offset": self.snapshot_id.end_offset,
            "epoch": self.snapshot_id.epoch,
            "record_count": self.record_count,
            "data_bytes": self.data_bytes,
            "checksum_crc32c": self.checksum,
            "created_time_ms": self.created_time_ms,
        }
        return json.dumps(doc, indent=1).encode() + b"\n"

    @classmethod
    def load(cls, path: Path) -> SnapshotManifest:
        try:
            doc = json.loads(path.read_bytes())
            if doc["format_version"] != FORMAT_VERSION:
                raise ValueError(f"unsupported format version {doc['format_version']!r}")
            fields = [
                doc[k]
                for k in (
                    "end_offset",
                    "epoch",
                    "record_count",
                    "data_bytes",
                    "checksum_crc32c",
                    "created_time_ms",
                )
            ]
            if not all(isinstance(v, int) and not isinstance(v, bool) for v in fields):
                raise TypeError("manifest fields must be integers")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise SnapshotCorruptionError(path, f"unreadable snapshot manifest ({exc})") from None
        end, epoch, count, data_bytes, checksum, created = fields
        return cls(SnapshotId(end, epoch), count, data_bytes, checksum, created)
