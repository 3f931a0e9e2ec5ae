"""The leader-epoch lookup (KIP-101/KIP-320), as a pure function over
(epoch, start offset) pairs: the same question `quorum.log`'s epoch cache
answers from disk, asked here of plain tuples so the rules stay I/O-free."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from typing import NamedTuple

UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


class EpochEndOffset(NamedTuple):
    """OffsetsForLeaderEpoch's answer: the largest epoch <= the one asked for, and
    the offset where it ends (the start of the next epoch, or the log end)."""

    epoch: int
    end_offset: int


UNDEFINED = EpochEndOffset(UNDEFINED_EPOCH, UNDEFINED_OFFSET)


def end_offset_for_epoch(
    entries: Sequence[EpochEntry], epoch: int, log_end_offset: int
) -> EpochEndOffset:
    """Where `epoch` (or the largest epoch below it in the log) ends.

    Asked for an epoch older than every entry, the answer is that epoch ending
    where the oldest known one starts, as Kafka's epoch cache answers: the
    records before it are gone (cleaned away by compaction, or never copied by
    a replica that joined after the cleaning), and a follower holding them must
    still be able to fetch on from there. UNDEFINED only for an undefined epoch
    or an empty cache (the follower then falls back to its HW).
    """
    if epoch < 0 or not entries:
        return UNDEFINED
    i = bisect_right([e.epoch for e in entries], epoch) - 1
    if i < 0:
        return EpochEndOffset(epoch, entries[0].start_offset)
    if i + 1 < len(entries):
        return EpochEndOffset(entries[i].epoch, entries[i + 1].start_offset)
    return EpochEndOffset(entries[i].epoch, log_end_offset)


def assign_epoch(entries: Sequence[EpochEntry], epoch: int, start_offset: int) -> list[EpochEntry]:
    """The entries after a batch of `epoch` was appended at `start_offset`."""
    out = list(entries)
    if out and out[-1].epoch == epoch:
        return out
    if out and (epoch < out[-1].epoch or start_offset < out[-1].start_offset):
        raise ValueError(f"epoch {epoch} at {start_offset} does not follow {out[-1]}")
    out.append(EpochEntry(epoch, start_offset))
    return out


def truncate_epochs_from_end(entries: Sequence[EpochEntry], end_offset: int) -> list[EpochEntry]:
    """The entries once the log is cut to end at `end_offset`."""
    return [e for e in entries if e.start_offset < end_offset]
