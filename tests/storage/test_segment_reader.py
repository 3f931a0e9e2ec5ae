"""The one segment reader: recovery, the offline tools and the export judge a
directory the same way (torn tail reported, a missing segment refused)."""

from __future__ import annotations

from pathlib import Path

import pytest
from storage_helpers import make_batches

from quorum.cli.data_dir import OfflineError, segments
from quorum.cli.export_sources import LogReadReport, stream_log
from quorum.cli.export_writer import ExportFailed
from quorum.log.batch_format import encode_batch
from quorum.log.errors import LogCorruptionError
from quorum.log.recovery import plan_recovery
from quorum.log.segment import log_file_name
from quorum.log.segment_reader import CHUNK_BYTES, read_log


def write_log(directory: Path, segments_of: list[int]) -> list[int]:
    """Segments of `segments_of[i]` batches each, contiguous; their base offsets."""
    bases, offset = [], 0
    for count in segments_of:
        batches = make_batches(offset, 1, count)
        (directory / log_file_name(offset)).write_bytes(b"".join(map(encode_batch, batches)))
        bases.append(offset)
        offset = batches[-1].next_offset
    return bases


def test_every_reader_reports_the_same_torn_tail(tmp_path: Path) -> None:
    bases = write_log(tmp_path, [4, 5])
    with (tmp_path / log_file_name(bases[-1])).open("ab") as f:
        f.write(b"\x00\x00\x00\x01")  # a header cut short by a crash
    plan = plan_recovery(tmp_path, 4096)
    assert plan.torn_tail is not None
    assert plan.torn_tail.torn_reason == "file ends inside a batch header"
    offline = list(segments(tmp_path))
    assert offline[-1].torn_reason == "file ends inside a batch header"
    report = LogReadReport()
    exported = list(stream_log(tmp_path, report))
    assert report.torn_reason == f"{log_file_name(bases[-1])}: file ends inside a batch header"
    assert [b.base_offset for b in exported] == [
        b.base_offset for s in offline for _, b in s.batches
    ]
    assert report.end_offset == plan.scans[-1].next_offset == 27


def test_every_reader_refuses_a_missing_middle_segment(tmp_path: Path) -> None:
    bases = write_log(tmp_path, [2, 2, 2])
    (tmp_path / log_file_name(bases[1])).unlink()
    with pytest.raises(LogCorruptionError, match="a segment is missing"):
        plan_recovery(tmp_path, 4096)
    with pytest.raises(OfflineError, match="a segment is missing"):
        list(segments(tmp_path))
    with pytest.raises(ExportFailed, match=r"damaged segment .* a segment is missing"):
        list(stream_log(tmp_path, LogReadReport()))


def test_a_segment_larger_than_a_chunk_is_read_whole(tmp_path: Path) -> None:
    """Batches straddling the reader's chunks come back intact, headers only or not."""
    batches = make_batches(0, 3, 400, count=4, size=1200)
    (tmp_path / log_file_name(0)).write_bytes(b"".join(map(encode_batch, batches)))
    assert (tmp_path / log_file_name(0)).stat().st_size > 3 * CHUNK_BYTES // 2
    (reader,) = read_log(tmp_path)
    assert [b.decode() for b in reader] == batches
    assert reader.torn_reason is None and reader.last_epoch == 3
    (headers,) = read_log(tmp_path, payloads=False)
    assert [b.header_only().base_offset for b in headers] == [b.base_offset for b in batches]
