"""The state machine seam: what the controller applies committed records to.

The driver feeds every committed data record, in offset order, to a
`StateMachine`, snapshots it into RocksDB, and replaces it from a snapshot when a
follower is too far behind. The metadata image (`quorum.controller.metadata_image`)
is the one state machine; its `digest()` is equal on replicas that applied the
same committed prefix, which tests compare across processes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from snapshots.records import Record


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
