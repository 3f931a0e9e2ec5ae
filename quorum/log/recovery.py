"""Deciding, without touching the disk, what opening a log directory involves.

Opening is two steps so that corruption never leads to a half-repaired
directory: `plan_recovery` reads everything and either raises (naming the
file, byte position and offset) or returns a plan; only then does the log
apply the plan's repairs (cut a torn tail, rewrite stale indexes and epoch
cache, remove temp files, finish an interrupted reset).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from quorum.log.checkpoint import LogStartCheckpoint, read_checkpoint
from quorum.log.errors import LogCorruptionError
from quorum.log.offset_index import OffsetIndex
from quorum.log.scan import SegmentScan, scan_segment
from quorum.log.segment import INDEX_SUFFIX, index_file_name, log_file_name, parse_log_file_name
from quorum.log.segment_reader import check_follows

CHECKPOINT_FILE = "log-start-offset.checkpoint"
EPOCH_CACHE_FILE = "leader-epoch-checkpoint"


@dataclass(frozen=True, slots=True)
class RecoveryPlan:
    checkpoint: LogStartCheckpoint
    segment_bases: tuple[int, ...]
    scans: tuple[SegmentScan, ...]  # empty when a reset is pending: nothing will be kept
    stale_indexes: tuple[int, ...]  # bases of segments whose index file must be rewritten
    leftover_files: tuple[Path, ...]  # temp files and indexes without a segment

    @property
    def torn_tail(self) -> SegmentScan | None:
        return self.scans[-1] if self.scans and self.scans[-1].torn else None

    @property
    def epoch_starts(self) -> list[tuple[int, int]]:
        """(epoch, first offset) for every epoch change in the whole directory."""
        starts: list[tuple[int, int]] = []
        for scan in self.scans:
            starts.extend(scan.epoch_starts)
        return starts


def plan_recovery(
    directory: Path, index_interval_bytes: int, *, offset_gaps: bool = False
) -> RecoveryPlan:
    """`offset_gaps`: a compacted log, where segments and batches may start past
    the previous one's end (never before it), and the first segment past the log start."""
    checkpoint = read_checkpoint(directory / CHECKPOINT_FILE)
    names = set(os.listdir(directory))
    bases = sorted(b for b in (parse_log_file_name(n) for n in names) if b is not None)
    leftovers = [directory / n for n in names if n.endswith(".tmp")]
    segment_indexes = {index_file_name(b) for b in bases}
    leftovers += [
        directory / n for n in names if n.endswith(INDEX_SUFFIX) and n not in segment_indexes
    ]
    if checkpoint.reset_pending:
        return RecoveryPlan(checkpoint, tuple(bases), (), (), tuple(sorted(leftovers)))

    scans: list[SegmentScan] = []
    previous_epoch = -1
    for i, base in enumerate(bases):
        path = directory / log_file_name(base)
        check_follows(scans[-1] if scans else None, path, base, offset_gaps)
        scan = scan_segment(
            path,
            base,
            previous_epoch,
            index_interval_bytes,
            is_tail=i == len(bases) - 1,
            offset_gaps=offset_gaps,
        )
        scans.append(scan)
        previous_epoch = scan.last_epoch
    _check_against_snapshot(directory, checkpoint, scans, offset_gaps)
    stale = [scan.base_offset for scan in scans if _index_is_stale(scan, index_interval_bytes)]
    return RecoveryPlan(
        checkpoint, tuple(bases), tuple(scans), tuple(stale), tuple(sorted(leftovers))
    )


def _check_against_snapshot(
    directory: Path, checkpoint: LogStartCheckpoint, scans: list[SegmentScan], offset_gaps: bool
) -> None:
    if not scans:
        return
    snapshot = checkpoint.snapshot_id
    start = snapshot.end_offset if snapshot else 0
    first = scans[0]
    if first.base_offset > start and not offset_gaps:
        raise LogCorruptionError(
            first.path,
            f"the log should start at or before offset {start} but its first segment "
            f"starts at {first.base_offset}: segments are missing",
            offset=first.base_offset,
        )
    last = scans[-1]
    if snapshot and last.next_offset < snapshot.end_offset:
        raise LogCorruptionError(
            directory / CHECKPOINT_FILE,
            f"the log ends at offset {last.next_offset}, before the end of snapshot "
            f"{snapshot} it is supposed to continue",
            offset=last.next_offset,
        )


def _index_is_stale(scan: SegmentScan, index_interval_bytes: int) -> bool:
    # Entries past a torn tail are rewritten after the cut anyway.
    expected = OffsetIndex(scan.base_offset, index_interval_bytes, scan.index_entries).encode()
    try:
        actual = (scan.path.parent / index_file_name(scan.base_offset)).read_bytes()
    except FileNotFoundError:
        return True
    return actual != expected
