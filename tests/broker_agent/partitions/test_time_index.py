"""Lookups by timestamp read each segment once (time_index.py): later ones read
only the segment holding the answer and what was appended since, and answer
the same as a full read after appends, truncations and retention."""

from __future__ import annotations

from pathlib import Path

from kio.schema.errors import ErrorCode
from partitions_cluster import make_batch

from broker_agent.partitions import offset_lookups
from broker_agent.partitions.partition_log import LogConfig, PartitionLog
from broker_agent.partitions.record_batch import parse_header

T0 = 1_700_000_000_000


class Counted:
    """A PartitionLog whose store counts the batches its reads return."""

    def __init__(self, plog: PartitionLog) -> None:
        self.batches = 0
        read = plog.store.read

        def counting(offset: int, max_bytes: int) -> list[object]:
            out = read(offset, max_bytes)
            self.batches += len(out)
            return out

        plog.store.read = counting  # type: ignore[method-assign]


def append(plog: PartitionLog, *times: int) -> None:
    """One batch of one record per time."""
    for t in times:
        batch = make_batch(b"v" * 100, timestamps_ms=[t])
        plog.append_as_leader([(parse_header(batch), batch)], 0, 0)


def lookup(plog: PartitionLog, timestamp: int) -> tuple[int, int]:
    """(offset, timestamp) of ListOffsets over the whole log, through the index."""
    if timestamp == -3:
        found = offset_lookups._max_timestamp_record(plog)
    else:
        found = offset_lookups._first_record_at_or_after(plog, timestamp, plog.log_end_offset)
    assert found is None or found.error == ErrorCode.none
    return (-1, -1) if found is None else (found.offset, found.timestamp)


def model(times: list[int | None], timestamp: int) -> tuple[int, int]:
    """The same answers from the list of each offset's timestamp (None: gone)."""
    live = [(o, t) for o, t in enumerate(times) if t is not None]
    if timestamp == -3:
        if not live:
            return (-1, -1)
        best = max(t for _, t in live)
        return next((o, t) for o, t in live if t == best)
    return next(((o, t) for o, t in live if t >= timestamp), (-1, -1))


def test_segments_are_read_once_and_answers_match_a_full_read(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0", LogConfig(segment_bytes=2000), 0)
    counted = Counted(plog)
    times: list[int | None] = []
    stamps = [T0 + (i * 37) % 101 for i in range(60)]  # out of order, repeats
    append(plog, *stamps)
    times += stamps
    assert len(plog.store.segments) >= 5
    asked = [-3, T0, T0 + 50, T0 + 100, T0 + 101]
    for t in asked:
        assert lookup(plog, t) == model(times, t), t
    counted.batches = 0
    for t in asked:
        assert lookup(plog, t) == model(times, t), t
    # Again: no summary is rebuilt; each lookup reads about one segment (11 batches
    # here; 33 in all), where reading the log took all 60 batches per lookup.
    assert counted.batches <= len(asked) * 12, counted.batches

    append(plog, T0 + 500, T0 + 3)  # a new largest timestamp
    times += [T0 + 500, T0 + 3]
    counted.batches = 0
    assert lookup(plog, -3) == (60, T0 + 500)
    assert counted.batches <= 2 + 12  # the appended batches, then the one answering

    plog.truncate_to(30)  # a follower cutting its log: everything read before may be gone
    times = times[:30]
    append(plog, T0 + 7, T0 + 99)
    times += [T0 + 7, T0 + 99]
    for t in asked:
        assert lookup(plog, t) == model(times, t), t

    plog.advance_log_start(20)  # DeleteRecords / retention: below 20 is gone
    times = [None] * 20 + times[20:]
    plog.store.enforce_retention()
    for t in [*asked, T0 + 7]:
        assert lookup(plog, t) == model(times, t), t
