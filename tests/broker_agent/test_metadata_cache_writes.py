"""The broker's metadata cache writes fetched batches to its log file in groups:
what it applied survives a clean close and a snapshot, and a batch the log would
refuse is refused before anything is applied. Real files in a temporary directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker_agent.metadata_cache import WRITE_EVERY_BATCHES, MetadataCache
from quorum.controller.image_records import config_record
from quorum.gen import admin_pb2 as api
from quorum.raft.records import Batch, SnapshotId
from snapshots.policy import SnapshotPolicy

NEVER = SnapshotPolicy(1 << 30, 3_600_000)


def batch(offset: int, epoch: int = 1) -> Batch:
    record = config_record(api.TOPIC, "t", "retention.ms", str(offset)).SerializeToString()
    return Batch(offset, epoch, (record,), 1)


def open_cache(directory: Path) -> MetadataCache:
    return MetadataCache(directory, NEVER, 1 << 20, 0)


def test_every_applied_batch_survives_a_clean_close(tmp_path: Path) -> None:
    cache = open_cache(tmp_path)
    count = WRITE_EVERY_BATCHES + 5  # one group written on the way, five left over
    for offset in range(count):
        assert [a.offset for a in cache.append([batch(offset)])] == [offset]
    assert cache.next_offset == count
    cache.close()
    reopened = open_cache(tmp_path)
    try:
        assert reopened.next_offset == count
        assert reopened.image.configs[(api.TOPIC, "t")]["retention.ms"] == str(count - 1)
    finally:
        reopened.close()


def test_a_batch_the_log_would_refuse_is_refused_before_it_is_applied(tmp_path: Path) -> None:
    cache = open_cache(tmp_path)
    try:
        cache.append([batch(0, epoch=2)])
        with pytest.raises(ValueError, match="log end is 1"):
            cache.append([batch(2, epoch=2)])  # a gap
        with pytest.raises(ValueError, match="below the last epoch"):
            cache.append([batch(1, epoch=1)])
        with pytest.raises(ValueError, match="no records"):
            cache.append([Batch(1, 2, (), 1)])
        with pytest.raises(ValueError, match="log end is 2"):
            cache.append([batch(1, epoch=2), batch(3, epoch=2)])  # refused whole
        assert cache.next_offset == 1
        cache.append([batch(1, epoch=2)])
        assert cache.next_offset == 2
    finally:
        cache.close()


def test_a_snapshot_taken_with_batches_not_yet_written_restarts_at_its_end(
    tmp_path: Path,
) -> None:
    cache = open_cache(tmp_path)
    for offset in range(5):
        cache.append([batch(offset)])
    snapshot_id = SnapshotId(cache.next_offset, cache.last_epoch)  # taken by hand
    cache.write_snapshot(snapshot_id, cache.capture())
    cache.append([batch(5)])
    cache.close()
    reopened = open_cache(tmp_path)
    try:
        assert reopened.next_offset == 6
        assert reopened.snapshot_end_offset == 5
    finally:
        reopened.close()
