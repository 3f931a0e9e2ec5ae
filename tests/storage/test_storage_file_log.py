"""FileLogStore behaviour: appends, flush, truncate, log start, reset, read, retention."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from storage_helpers import make_batch, make_batches

from quorum.log.errors import LogDirectoryLockedError
from quorum.log.file_log import FileLogStore
from quorum.log.recovery import CHECKPOINT_FILE
from quorum.log.retention import LogRetention
from quorum.raft.records import Batch, SnapshotId


def open_log(path: Path, **kwargs: object) -> FileLogStore:
    options: dict[str, object] = {"segment_bytes": 1024, "index_interval_bytes": 128}
    options.update(kwargs)
    return FileLogStore(path, **options)  # type: ignore[arg-type]


def reopen(log: FileLogStore, **kwargs: object) -> FileLogStore:
    log.close()
    return open_log(log.directory, **kwargs)


def fill(log: FileLogStore, batches: int, epoch: int = 1, count: int = 3) -> list[Batch]:
    appended = make_batches(log.end_offset, epoch, batches, count=count)
    log.append(appended)
    log.flush(log.end_offset)
    return appended


def test_empty_log_starts_at_zero(tmp_path: Path) -> None:
    with open_log(tmp_path) as log:
        assert (log.start_offset, log.end_offset) == (0, 0)
        assert log.recover() == (None, [])
        assert log.segment_paths == [tmp_path / "00000000000000000000.log"]


def test_appended_batches_survive_reopen_across_segments(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    appended = fill(log, 60)
    assert len(log.segment_paths) > 3, "1 KiB segments should have rolled"
    log = reopen(log)
    assert log.recover() == (None, appended)
    assert log.end_offset == appended[-1].next_offset
    names = sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".log")
    assert names == [p.name for p in log.segment_paths]
    assert all(int(p.stem) == log.read(int(p.stem), 1)[0].base_offset for p in log.segment_paths)
    log.close()


def test_one_append_call_is_one_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    writes: list[str] = []
    real_write, real_writev = os.write, os.writev

    def counting_write(fd: int, data: bytes) -> int:
        writes.append("write")
        return real_write(fd, data)

    def counting_writev(fd: int, buffers: list[bytes]) -> int:
        writes.append("writev")
        return real_writev(fd, buffers)

    with open_log(tmp_path, segment_bytes=1 << 20) as log:
        monkeypatch.setattr(os, "write", counting_write)
        monkeypatch.setattr(os, "writev", counting_writev)
        log.append(make_batches(0, 1, 10))
        assert writes == ["writev"]


def test_flush_is_one_fsync_and_skips_when_already_durable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    syncs: list[int] = []
    with open_log(tmp_path, segment_bytes=1 << 20) as log:
        log.append([make_batch(0, 1)])
        log.flush(log.end_offset)  # first flush persists the epoch cache too
        monkeypatch.setattr(os, "fdatasync", lambda fd: syncs.append(fd))
        monkeypatch.setattr(os, "fsync", lambda fd: syncs.append(fd))
        log.append(make_batches(3, 1, 100))
        log.flush(log.end_offset)
        assert len(syncs) == 1
        assert log.durable_end_offset == log.end_offset
        log.flush(log.end_offset)
        assert len(syncs) == 1


def test_append_rejects_gaps_empty_batches_and_epoch_regressions(tmp_path: Path) -> None:
    with open_log(tmp_path) as log:
        log.append([make_batch(0, 5)])
        with pytest.raises(ValueError, match="log end is 3"):
            log.append([make_batch(4, 5)])
        with pytest.raises(ValueError, match="no records"):
            log.append([Batch(3, 5, (), 0)])
        with pytest.raises(ValueError, match="below the last epoch"):
            log.append([make_batch(3, 4)])
        with pytest.raises(ValueError):
            # the whole call is refused: the valid first batch is not written either
            log.append([make_batch(3, 5), make_batch(7, 5)])
        assert log.end_offset == 3


def test_truncate_cuts_the_tail_durably(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    appended = fill(log, 60)
    segments_before = len(log.segment_paths)
    cut = appended[20].base_offset
    log.truncate(cut)
    assert log.end_offset == cut
    assert len(log.segment_paths) < segments_before
    assert all(p.exists() for p in log.segment_paths)
    log = reopen(log)
    assert log.recover() == (None, appended[:20])
    # appending after a truncation continues at the cut
    log.append([make_batch(cut, 2)])
    assert log.recover()[1][-1] == make_batch(cut, 2)
    log.close()


def test_truncate_inside_a_batch_drops_the_whole_batch(tmp_path: Path) -> None:
    with open_log(tmp_path) as log:
        appended = fill(log, 5)
        log.truncate(appended[2].base_offset + 1)
        assert log.recover()[1] == appended[:2]


def test_truncate_removes_epochs_from_the_cache(tmp_path: Path) -> None:
    with open_log(tmp_path) as log:
        fill(log, 5, epoch=1)
        fill(log, 5, epoch=3)
        assert [e.epoch for e in log.epoch_entries] == [1, 3]
        log.truncate(15)
        assert [e.epoch for e in log.epoch_entries] == [1]
    with open_log(tmp_path) as log:
        assert [e.epoch for e in log.epoch_entries] == [1]


def test_truncate_below_the_snapshot_is_refused(tmp_path: Path) -> None:
    with open_log(tmp_path) as log:
        fill(log, 10)
        log.advance_start(SnapshotId(13, 1))
        with pytest.raises(ValueError, match="snapshot"):
            log.truncate(9)
        with pytest.raises(ValueError, match="snapshot"):
            log.truncate(14)  # would drop batch [12, 15), which holds offset 12 < 13
        log.truncate(15)
        assert log.end_offset == 15


def test_advance_start_deletes_covered_segments_and_is_durable(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    appended = fill(log, 60)
    first_segments = log.segment_paths[:2]
    snapshot = SnapshotId(appended[40].base_offset, 1)
    log.advance_start(snapshot)
    assert log.start_offset == snapshot.end_offset
    assert not any(p.exists() for p in first_segments)
    assert all(int(p.stem) <= snapshot.end_offset for p in log.segment_paths[:1])
    log = reopen(log)
    assert log.recover() == (snapshot, appended[40:])
    assert log.start_offset == snapshot.end_offset
    log.close()


def test_advance_start_keeps_a_batch_straddling_the_snapshot(tmp_path: Path) -> None:
    with open_log(tmp_path) as log:
        appended = fill(log, 10)
        log.advance_start(SnapshotId(7, 1))  # batch [6, 9) holds offset 7
        assert log.start_offset == 6
        assert log.recover() == (SnapshotId(7, 1), appended[2:])


def test_advance_start_ignores_older_snapshots(tmp_path: Path) -> None:
    with open_log(tmp_path) as log:
        fill(log, 10)
        log.advance_start(SnapshotId(15, 1))
        log.advance_start(SnapshotId(9, 1))
        assert log.recover()[0] == SnapshotId(15, 1)


def test_advance_start_to_the_log_end_leaves_an_empty_log(tmp_path: Path) -> None:
    with open_log(tmp_path) as log:
        fill(log, 10)
        log.advance_start(SnapshotId(30, 1))
        assert (log.start_offset, log.end_offset) == (30, 30)
        assert log.recover() == (SnapshotId(30, 1), [])
        log.append([make_batch(30, 2)])
        log.flush(33)
    with open_log(tmp_path) as log:
        assert log.recover() == (SnapshotId(30, 1), [make_batch(30, 2)])


def test_advance_start_beyond_the_log_end_resets(tmp_path: Path) -> None:
    with open_log(tmp_path) as log:
        fill(log, 10)
        log.advance_start(SnapshotId(100, 4))
        assert (log.start_offset, log.end_offset) == (100, 100)
    with open_log(tmp_path) as log:
        assert log.recover() == (SnapshotId(100, 4), [])


def test_reset_to_snapshot_replaces_the_log(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 40)
    log.reset_to_snapshot(SnapshotId(17, 3))
    assert log.segment_paths == [tmp_path / "00000000000000000017.log"]
    assert (log.start_offset, log.end_offset) == (17, 17)
    log.append([make_batch(17, 3)])
    log.flush(20)
    log = reopen(log)
    assert log.recover() == (SnapshotId(17, 3), [make_batch(17, 3)])
    assert sorted(p.name for p in tmp_path.glob("*.log")) == ["00000000000000000017.log"]
    log.close()


def test_an_interrupted_reset_is_finished_on_open(tmp_path: Path) -> None:
    """A crash after the checkpoint said "resetting" but before the old
    segments were all deleted: opening finishes the reset."""
    with open_log(tmp_path) as log:
        fill(log, 40)
    checkpoint = tmp_path / CHECKPOINT_FILE
    checkpoint.write_text(
        '{"version": 1, "snapshot_end_offset": 50, "snapshot_epoch": 2, "reset_pending": true}'
    )
    with open_log(tmp_path) as log:
        assert log.recover() == (SnapshotId(50, 2), [])
        assert [p.name for p in log.segment_paths] == ["00000000000000000050.log"]
    assert '"reset_pending": false' in checkpoint.read_text()


def test_read_returns_whole_batches_within_max_bytes(tmp_path: Path) -> None:
    with open_log(tmp_path, segment_bytes=1 << 20, index_interval_bytes=64) as log:
        appended = fill(log, 50)
        size = 38 + 3 * 4 + 3 * 20  # header, lengths, records
        assert log.read(0, size * 3) == appended[:3]
        assert log.read(31, size * 2) == appended[10:12]  # from the batch holding 31
        assert log.read(31, 1) == appended[10:11]  # always at least one batch
        assert log.read(log.end_offset, 1000) == []
        log.advance_start(SnapshotId(30, 1))
        assert log.read(3, 1000) == []


def test_end_offset_for_epoch_follows_the_log(tmp_path: Path) -> None:
    with open_log(tmp_path) as log:
        fill(log, 2, epoch=1)  # [0, 6)
        fill(log, 2, epoch=4)  # [6, 12)
        fill(log, 1, epoch=6)  # [12, 15)
        lookup = log.end_offset_for_epoch
        assert (lookup(1).offset, lookup(1).epoch) == (6, 1)
        assert (lookup(3).offset, lookup(3).epoch) == (6, 1)
        assert (lookup(4).offset, lookup(4).epoch) == (12, 4)
        assert (lookup(9).offset, lookup(9).epoch) == (15, 6)
        assert (lookup(0).offset, lookup(0).epoch) == (0, 0)
        log.advance_start(SnapshotId(15, 6))
        assert (lookup(9).offset, lookup(9).epoch) == (15, 6)
        assert (lookup(5).offset, lookup(5).epoch) == (-1, -1)


def test_flush_on_another_thread_while_appending(tmp_path: Path) -> None:
    """The driver's flusher thread flushes while the owner keeps appending."""
    log = open_log(tmp_path, segment_bytes=4096)
    done = threading.Event()
    durable: list[int] = []
    errors: list[BaseException] = []

    def flusher() -> None:
        try:
            while not done.is_set():
                log.flush(log.end_offset)
                durable.append(log.durable_end_offset)
        except BaseException as exc:  # surfaced by the assertion below
            errors.append(exc)

    thread = threading.Thread(target=flusher)
    thread.start()
    appended = []
    for i in range(300):
        batch = make_batch(log.end_offset, 1 + i // 100, count=1 + i % 5)
        log.append([batch])
        appended.append(batch)
    done.set()
    thread.join()
    assert not errors
    assert durable == sorted(durable) and durable[-1] <= log.end_offset
    log.flush(log.end_offset)
    log = reopen(log)
    assert log.recover() == (None, appended)
    log.close()


def test_begin_flush_fixes_its_scope_and_holds_off_truncation(tmp_path: Path) -> None:
    with open_log(tmp_path, segment_bytes=1 << 20) as log:
        log.append(make_batches(0, 1, 2))  # [0, 6)
        pending = log.begin_flush(6)
        assert pending is not None and pending.end_offset == 6
        log.append([make_batch(6, 1)])  # appending goes on while the fsync is pending
        truncated = threading.Event()

        def truncate() -> None:
            log.truncate(6)
            truncated.set()

        worker = threading.Thread(target=truncate)
        worker.start()
        assert not truncated.wait(0.2), "truncate must wait for the flush in flight"
        pending.complete()
        worker.join(5)
        assert truncated.is_set()
        assert (log.durable_end_offset, log.end_offset) == (6, 6)
        assert log.begin_flush(6) is None
        with pytest.raises(RuntimeError):
            pending.complete()


def test_the_first_flush_makes_the_log_directory_entry_durable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new log's directory is an entry in its parent, durable only once the
    parent is synced: the first flush (or roll) after each open pays that, once;
    a sync that fails is owed again. Creating the log syncs nothing of it."""
    from quorum.log import file_log

    synced: list[Path] = []
    failing: set[Path] = set()

    def recording_fsync_dir(directory: Path) -> None:
        if directory in failing:
            failing.discard(directory)
            raise OSError(5, "injected")
        synced.append(directory)

    monkeypatch.setattr(file_log, "fsync_dir", recording_fsync_dir)
    directory = tmp_path / "topic-0"
    log = open_log(directory, segment_bytes=1 << 20)
    assert tmp_path not in synced
    log.append([make_batch(0, 1)])
    failing.add(tmp_path)
    with pytest.raises(OSError):
        log.flush(log.end_offset)
    assert tmp_path not in synced and log.durable_end_offset == 0
    log.flush(log.end_offset)
    assert synced.count(tmp_path) == 1 and log.durable_end_offset == log.end_offset
    log.append([make_batch(log.end_offset, 1)])
    log.flush(log.end_offset)
    assert synced.count(tmp_path) == 1

    log = reopen(log, segment_bytes=1 << 20)
    log.append([make_batch(log.end_offset, 1)])
    assert log.roll()
    assert synced.count(tmp_path) == 2
    log.append([make_batch(log.end_offset, 1)])
    log.flush(log.end_offset)
    assert synced.count(tmp_path) == 2
    log.close()


def test_a_flush_says_how_many_bytes_it_syncs(tmp_path: Path) -> None:
    """The driver chooses where to fsync by this size (small ones on its loop)."""
    with open_log(tmp_path, segment_bytes=1 << 20) as log:
        segment = log.segment_paths[0]
        log.append(make_batches(0, 1, 2))
        first = segment.stat().st_size
        pending = log.begin_flush(log.end_offset)
        assert pending is not None and pending.size == first
        pending.complete()
        log.append([make_batch(log.end_offset, 3)])
        pending = log.begin_flush(log.end_offset)
        assert pending is not None and pending.size == segment.stat().st_size - first
        pending.complete()


def test_second_process_cannot_open_the_same_directory(tmp_path: Path) -> None:
    with open_log(tmp_path), pytest.raises(LogDirectoryLockedError):
        open_log(tmp_path)
    open_log(tmp_path).close()  # released on close


def test_retention_by_bytes_keeps_segments_below_the_start_until_over_the_limit(
    tmp_path: Path,
) -> None:
    with open_log(tmp_path, retention=LogRetention(max_bytes=4096, max_ms=-1)) as log:
        fill(log, 80)  # about 9 KiB in 1 KiB segments
        before = list(log.segment_paths)
        log.advance_start(SnapshotId(180, 1))
        kept = log.segment_paths
        assert kept != before and kept == before[-len(kept) :]
        total = sum(p.stat().st_size for p in kept)
        assert total <= 4096 + 1024
        # the oldest kept segment is still below the start: retained, not visible
        assert int(kept[0].stem) < 180 and log.start_offset == 180
        assert log.recover()[1][0].base_offset == 180


def test_retention_by_time_uses_the_newest_batch_in_each_segment(tmp_path: Path) -> None:
    now = [0]
    with open_log(
        tmp_path, retention=LogRetention(max_bytes=-1, max_ms=5_000), clock=lambda: now[0]
    ) as log:
        offset = 0
        for t in range(0, 20_000, 500):
            batch = make_batch(offset, 1, append_time_ms=t)
            log.append([batch])
            offset = batch.next_offset
        log.flush(offset)
        segments = log.segment_paths
        log.advance_start(SnapshotId(offset, 1))
        assert log.segment_paths == segments, "nothing is older than 5 s at t=0"
        now[0] = 22_000
        deleted = log.enforce_retention()
        assert deleted and deleted == segments[: len(deleted)]
        assert len(deleted) < len(segments) - 1, "segments written after t=17 s stay"
        now[0] = 40_000
        deleted += log.enforce_retention()
        assert deleted == segments[:-1]  # the active segment always stays
        assert log.recover() == (SnapshotId(offset, 1), [])


def test_default_retention_deletes_covered_segments_at_once(tmp_path: Path) -> None:
    with open_log(tmp_path) as log:
        fill(log, 60)
        log.advance_start(SnapshotId(log.end_offset - 3, 1))
        assert len(log.segment_paths) == 1
