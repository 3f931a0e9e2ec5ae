"""The state machine seam: what the controller applies committed records to.

The driver feeds every committed data record, in offset order, to a
`StateMachine`, snapshots it into RocksDB, and replaces it from a snapshot when a
follower is too far behind. The metadata image (topics, brokers, ...) plugs in
here; until then `LogDigestImage` is the image: a running digest over every
applied (offset, record), so replicas that applied the same committed prefix
hold the same digest, which tests compare across processes.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable
from typing import Protocol

from snapshots.records import Record

_OFFSET = struct.Struct(">q")


class StateMachine(Protocol):
    @property
    def applied_offset(self) -> int:
        """The next offset to apply: everything below it has been applied."""
        ...

    def apply(self, offset: int, record: bytes) -> None: ...

    def advance_to(self, offset: int) -> None:
        """Move past offsets that hold no data record (Raft's control batches)."""
        ...

    def load_snapshot(self, records: Iterable[Record], end_offset: int) -> None:
        """Replace the whole state with a snapshot's records taken at `end_offset`."""
        ...

    def snapshot_records(self) -> Iterable[Record]:
        """The whole state as (key, value) pairs; the snapshot store sorts them.

        Called on the event loop; the result may be consumed later in a worker
        thread, so it must not see applies made after the call."""
        ...

    def digest(self) -> str:
        """A short fingerprint of the state, equal on replicas at the same offset."""
        ...


class LogDigestImage:
    """Counts records and chains SHA-256 over them; skips offsets already applied."""

    def __init__(self) -> None:
        self._applied_offset = 0
        self._count = 0
        self._digest = hashlib.sha256().digest()

    @property
    def applied_offset(self) -> int:
        return self._applied_offset

    @property
    def record_count(self) -> int:
        return self._count

    def apply(self, offset: int, record: bytes) -> None:
        if offset < self._applied_offset:
            return
        chain = hashlib.sha256(self._digest)
        chain.update(_OFFSET.pack(offset))
        chain.update(record)
        self._digest = chain.digest()
        self._count += 1
        self._applied_offset = offset + 1

    def advance_to(self, offset: int) -> None:
        """Control records occupy offsets too; the image moves past them."""
        self._applied_offset = max(self._applied_offset, offset)

    def load_snapshot(self, records: Iterable[Record], end_offset: int) -> None:
        state = dict(records)
        self._count = int(state[b"count"])
        self._digest = state[b"digest"]
        self._applied_offset = end_offset

    def snapshot_records(self) -> Iterable[Record]:
        return [(b"count", str(self._count).encode()), (b"digest", self._digest)]

    def digest(self) -> str:
        return self._digest.hex()[:16]
