"""The leader's view of each replica's replication progress (etcd's tracker)."""

from __future__ import annotations

from dataclasses import dataclass

from quorum.raft.messages import FetchRequest


@dataclass(slots=True)
class ReplicaProgress:
    """`end_offset` is the replica's durable log end as its last valid fetch told us."""

    end_offset: int = 0
    last_fetch_ms: int | None = None
    last_caught_up_ms: int | None = None
    fetched_this_epoch: bool = False
    directory_id: str = ""  # of the replica whose fetches these are (KIP-853)


@dataclass(slots=True)
class ParkedFetch:
    """A long-polling fetch the leader answers when it has news, or at `deadline`."""

    source: int
    request: FetchRequest
    deadline: int
