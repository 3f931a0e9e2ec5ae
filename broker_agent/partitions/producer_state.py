"""Idempotent producers' state for one partition (Kafka's ProducerStateManager,
without transactions): per producer id its epoch and its last five batches'
sequence ranges and offsets.

The leader checks every batch of an idempotent producer against it: a batch it
already stored (a retry after a lost answer) is answered with the original
offset and not appended again; a sequence gap is OUT_OF_ORDER_SEQUENCE_NUMBER;
an older producer epoch is INVALID_PRODUCER_EPOCH. Followers keep the same
table from the batches they append, and a restart rebuilds it from the log, so
it survives both leader changes and crashes.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum

from broker_agent.partitions.record_batch import NO_PRODUCER_ID, RecordBatchHeader

BATCHES_KEPT = 5  # Kafka's NUM_BATCHES_TO_RETAIN (and max.in.flight for idempotence)
SEQUENCE_MODULUS = 2**31


class SequenceCheck(Enum):
    OK = "OK"
    DUPLICATE = "DUPLICATE_SEQUENCE_NUMBER"
    OUT_OF_ORDER = "OUT_OF_ORDER_SEQUENCE_NUMBER"
    INVALID_EPOCH = "INVALID_PRODUCER_EPOCH"


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int


@dataclass
class ProducerEntry:
    producer_epoch: int
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=BATCHES_KEPT))

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_sequence if self.batches else -1


class ProducerStateTable:
    def __init__(self) -> None:
        self._producers: dict[int, ProducerEntry] = {}

    def __len__(self) -> int:
        return len(self._producers)

    def check(self, header: RecordBatchHeader) -> tuple[SequenceCheck, BatchMetadata | None]:
        """The leader's verdict on a batch before appending it; for a duplicate,
        the stored batch it repeats."""
        if header.producer_id == NO_PRODUCER_ID:
            return SequenceCheck.OK, None
        entry = self._producers.get(header.producer_id)
        first, last = header.base_sequence, header.last_sequence
        if entry is None or header.producer_epoch > entry.producer_epoch:
            ok = first == 0
            return (SequenceCheck.OK if ok else SequenceCheck.OUT_OF_ORDER), None
        if header.producer_epoch < entry.producer_epoch:
            return SequenceCheck.INVALID_EPOCH, None
        for stored in entry.batches:
            if stored.first_sequence == first and stored.last_sequence == last:
                return SequenceCheck.DUPLICATE, stored
        if first != (entry.last_sequence + 1) % SEQUENCE_MODULUS:
            return SequenceCheck.OUT_OF_ORDER, None
        return SequenceCheck.OK, None

    def update(self, header: RecordBatchHeader, first_offset: int) -> None:
        """A batch was appended at `first_offset` (on the leader or a follower)."""
        if header.producer_id == NO_PRODUCER_ID or header.is_control:
            return
        entry = self._producers.get(header.producer_id)
        if entry is None or header.producer_epoch != entry.producer_epoch:
            entry = ProducerEntry(header.producer_epoch)
            self._producers[header.producer_id] = entry
        entry.batches.append(
            BatchMetadata(
                header.base_sequence,
                header.last_sequence,
                first_offset,
                first_offset + header.last_offset_delta,
            )
        )

    def last_batch_offset(self, producer_id: int) -> int | None:
        """Base offset of the producer's last batch in the log: the cleaner keeps
        that batch (empty if need be) so its sequence survives, as Kafka does."""
        entry = self._producers.get(producer_id)
        return entry.batches[-1].first_offset if entry and entry.batches else None

    def rebuild(self, headers: Iterable[RecordBatchHeader]) -> None:
        """From the stored batches (on open, and after a truncation)."""
        self._producers.clear()
        for header in headers:
            self.update(header, header.base_offset)
