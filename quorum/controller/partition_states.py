"""One `PartitionState` object per distinct partition state, shared by every
partition in that state.

A state says nothing of which partition it is (its topic and partition ids are
the image's dict keys), and a million partitions over a few brokers are in a
few hundred distinct states: sharing them is most of a large image's memory
(a state and its snapshot record were ~220 of the ~270 bytes each partition
cost). The table is forgotten whole past `STATES_KEPT` entries, so states of
epochs long gone do not pile up; a state built after that is simply a new,
equal object."""

from __future__ import annotations

from collections.abc import Sequence

from google.protobuf.message import DecodeError

from quorum.controller.image_entities import PartitionState
from quorum.gen import metadata_pb2 as md

# A PartitionState's fields, in its dataclass's order: the key it is shared by.
StateKey = tuple[tuple[int, ...], tuple[int, ...], int, int, int, tuple[int, ...], tuple[int, ...]]
STATES_KEPT = 1 << 16


class PartitionStates:
    def __init__(self) -> None:
        # One tuple per distinct replica list, and one state per distinct state.
        self._ids: dict[tuple[int, ...], tuple[int, ...]] = {}
        self._states: dict[StateKey, PartitionState] = {}

    def of(self, key: StateKey) -> PartitionState:
        """The one PartitionState with these fields."""
        state = self._states.get(key)
        if state is None:
            if len(self._states) >= STATES_KEPT:
                self._states.clear()
            state = self._states[key] = PartitionState(*key)
        return state

    def of_record(self, r: md.PartitionRecord) -> PartitionState:
        ids = self.ids
        removing, adding = r.removing_replicas, r.adding_replicas
        return self.of(
            (
                ids(r.replicas),
                ids(r.isr),
                r.leader,
                r.leader_epoch,
                r.partition_epoch,
                ids(removing) if len(removing) else (),
                ids(adding) if len(adding) else (),
            )
        )

    def of_fields(self, fields: bytes) -> PartitionState | None:
        """The state a PartitionRecord's fields 3-9 say (`PartitionValues.split`);
        None when the bytes hold anything else (a partition or topic id)."""
        try:
            r = md.PartitionRecord.FromString(fields)
        except DecodeError:
            return None
        if r.partition_id or r.topic_id:
            return None
        return self.of_record(r)

    def ids(self, repeated: Sequence[int]) -> tuple[int, ...]:
        ids = tuple(repeated[:])  # slicing first: twice as fast as iterating upb's container
        return self._ids.setdefault(ids, ids)


__all__ = ["STATES_KEPT", "PartitionStates", "StateKey"]
