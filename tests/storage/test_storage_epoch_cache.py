"""The leader-epoch cache on its own, and kept in step with the log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from storage_helpers import make_batches

from quorum.log.epoch_cache import EpochEntry, LeaderEpochCache
from quorum.log.file_log import FileLogStore
from quorum.log.recovery import EPOCH_CACHE_FILE
from quorum.raft.records import OffsetAndEpoch, SnapshotId


def cache_with(tmp_path: Path, *entries: tuple[int, int]) -> LeaderEpochCache:
    cache = LeaderEpochCache(tmp_path / "cache")
    for epoch, start in entries:
        cache.assign(epoch, start)
    return cache


def test_assign_records_only_epoch_changes(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, (1, 0), (1, 5), (3, 10), (3, 12))
    assert cache.entries == (EpochEntry(1, 0), EpochEntry(3, 10))
    with pytest.raises(ValueError):
        cache.assign(2, 20)
    with pytest.raises(ValueError):
        cache.assign(4, 9)


def test_end_offset_for_epoch(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, (1, 0), (3, 10), (6, 25))
    assert cache.end_offset_for_epoch(1, 40) == OffsetAndEpoch(10, 1)
    assert cache.end_offset_for_epoch(2, 40) == OffsetAndEpoch(10, 1)
    assert cache.end_offset_for_epoch(3, 40) == OffsetAndEpoch(25, 3)
    assert cache.end_offset_for_epoch(9, 40) == OffsetAndEpoch(40, 6)
    assert cache.end_offset_for_epoch(0, 40) == OffsetAndEpoch(-1, -1)


def test_truncate_from_end_and_start(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, (1, 0), (3, 10), (6, 25))
    cache.truncate_from_end(25)
    assert list(cache.entries) == [EpochEntry(1, 0), EpochEntry(3, 10)]
    cache.truncate_from_start(12, 30)
    assert list(cache.entries) == [EpochEntry(3, 12)]
    cache.truncate_from_start(30, 30)
    assert list(cache.entries) == []


def test_persist_and_load_round_trip(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, (1, 0), (3, 10))
    assert cache.dirty
    cache.persist()
    assert not cache.dirty
    assert json.loads((tmp_path / "cache").read_text()) == {
        "version": 1,
        "entries": [[1, 0], [3, 10]],
    }
    loaded = LeaderEpochCache.load(tmp_path / "cache")
    assert loaded is not None and loaded.entries == cache.entries
    assert not list(tmp_path.glob("*.tmp"))


def test_load_returns_none_for_missing_or_damaged_files(tmp_path: Path) -> None:
    path = tmp_path / "cache"
    assert LeaderEpochCache.load(path) is None
    path.write_text('{"version": 1, "entries": [[1, "x"]]}')
    assert LeaderEpochCache.load(path) is None
    path.write_text('{"version": 99, "entries": []}')
    assert LeaderEpochCache.load(path) is None


def test_log_truncation_and_start_moves_are_persisted(tmp_path: Path) -> None:
    with FileLogStore(tmp_path) as log:
        log.append(make_batches(0, 1, 3) + make_batches(9, 2, 3) + make_batches(18, 5, 3))
        log.flush(log.end_offset)
        log.truncate(21)
        log.advance_start(SnapshotId(12, 2))
        expected = [[2, 12], [5, 18]]
        assert [[e.epoch, e.start_offset] for e in log.epoch_entries] == expected
    on_disk = json.loads((tmp_path / EPOCH_CACHE_FILE).read_text())
    assert on_disk["entries"] == expected


def test_a_data_plane_log_opens_without_writing_its_cache(tmp_path: Path) -> None:
    """`sync_on_open=False` (partition replicas): the cache is rebuilt from the
    batches at open and kept in memory; the file is written, synced, before a
    truncation changes the batches. The Raft log writes it at open."""
    batches = make_batches(0, 1, 3) + make_batches(9, 2, 3)
    expected = [[1, 0], [2, 9]]
    for raft_log in (False, True):
        directory = tmp_path / ("raft" if raft_log else "replica")
        with FileLogStore(directory, offset_gaps=not raft_log) as log:
            log.append(batches)  # never flushed: the cache was never written
        assert not (directory / EPOCH_CACHE_FILE).exists()
        with FileLogStore(directory, offset_gaps=not raft_log, sync_on_open=raft_log) as log:
            assert [[e.epoch, e.start_offset] for e in log.epoch_entries] == expected
            assert (directory / EPOCH_CACHE_FILE).exists() is raft_log
            log.truncate(12)
            on_disk = json.loads((directory / EPOCH_CACHE_FILE).read_text())
            assert on_disk["entries"] == expected
            log.truncate(9)
            on_disk = json.loads((directory / EPOCH_CACHE_FILE).read_text())
            assert on_disk["entries"] == expected[:1]
