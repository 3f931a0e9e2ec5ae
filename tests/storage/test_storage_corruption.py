"""Damaged files: a torn tail is repaired, anything else is a clear error that
names the file (and byte position / offset) and leaves every byte as it was."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from rocksdict import Options, Rdict
from storage_helpers import directory_state, flip_byte, make_batches

from quorum.log.batch_format import HEADER_SIZE
from quorum.log.errors import (
    InconsistentClusterIdError,
    InconsistentNodeIdError,
    LogCorruptionError,
    QuorumStateCorruptionError,
    StorageCorruptionError,
)
from quorum.log.file_log import FileLogStore
from quorum.log.quorum_state import FileQuorumStateStore
from quorum.log.recovery import CHECKPOINT_FILE, EPOCH_CACHE_FILE
from quorum.raft.config import QuorumStateData
from quorum.raft.records import Batch, SnapshotId
from snapshots.errors import SnapshotCorruptionError
from snapshots.store import FileSnapshotStore

BATCH_SIZE = HEADER_SIZE + 3 * 4 + 3 * 20  # make_batches' default batches: 110 bytes


def write_log(directory: Path, batches: int = 30, segment_bytes: int = 1100) -> list[Batch]:
    """10 batches of 3 records per segment: segments start at offsets 0, 30, 60..."""
    appended = make_batches(0, 1, batches)
    with FileLogStore(directory, segment_bytes=segment_bytes, index_interval_bytes=200) as log:
        log.append(appended)
        log.flush(log.end_offset)
    return appended


def open_log(directory: Path) -> FileLogStore:
    return FileLogStore(directory, segment_bytes=1100, index_interval_bytes=200)


def segment(directory: Path, base: int, suffix: str = ".log") -> Path:
    return directory / f"{base:020d}{suffix}"


def assert_refused_unchanged(directory: Path, match: str) -> LogCorruptionError:
    before = directory_state(directory)
    with pytest.raises(LogCorruptionError, match=match) as caught:
        open_log(directory)
    assert directory_state(directory) == before, "a refused open must not touch the disk"
    return caught.value


# ------------------------------------------------------------------ log segments


def test_flipped_byte_in_the_middle_of_a_segment_is_an_error(tmp_path: Path) -> None:
    write_log(tmp_path)
    damaged = segment(tmp_path, 30)
    flip_byte(damaged, 3 * BATCH_SIZE + HEADER_SIZE + 20)  # a record of the 4th batch
    error = assert_refused_unchanged(tmp_path, "CRC mismatch")
    assert error.path == damaged
    assert error.position == 3 * BATCH_SIZE
    assert error.offset == 30 + 3 * 3
    assert str(damaged) in str(error) and "byte position 330" in str(error)


def test_flipped_byte_in_the_tail_segment_followed_by_data_is_an_error(tmp_path: Path) -> None:
    write_log(tmp_path)
    flip_byte(segment(tmp_path, 60), 5 * BATCH_SIZE + 50)
    error = assert_refused_unchanged(tmp_path, "CRC mismatch")
    assert error.path == segment(tmp_path, 60)


def test_damaged_length_field_is_not_mistaken_for_a_torn_tail(tmp_path: Path) -> None:
    write_log(tmp_path)
    flip_byte(segment(tmp_path, 60), 2 * BATCH_SIZE + 9)  # payload_length of the 3rd batch
    assert_refused_unchanged(tmp_path, "header checksum")


def test_torn_non_tail_segment_is_an_error(tmp_path: Path) -> None:
    write_log(tmp_path)
    damaged = segment(tmp_path, 30)
    with damaged.open("r+b") as f:
        f.truncate(damaged.stat().st_size - 7)
    error = assert_refused_unchanged(tmp_path, "not the last one but is torn")
    assert error.path == damaged


def test_missing_segment_in_the_middle_is_an_error(tmp_path: Path) -> None:
    write_log(tmp_path, batches=40)
    segment(tmp_path, 60).unlink()
    segment(tmp_path, 60, ".index").unlink()
    error = assert_refused_unchanged(tmp_path, "a segment is missing")
    assert error.path == segment(tmp_path, 90)
    assert error.offset == 90


def test_missing_first_segment_is_an_error(tmp_path: Path) -> None:
    write_log(tmp_path)
    segment(tmp_path, 0).unlink()
    assert_refused_unchanged(tmp_path, "segments are missing")


def test_unreadable_log_start_checkpoint_is_an_error(tmp_path: Path) -> None:
    write_log(tmp_path)
    (tmp_path / CHECKPOINT_FILE).write_text('{"version": 1, "snapshot_end_offset": ')
    error = assert_refused_unchanged(tmp_path, "checkpoint")
    assert error.path == tmp_path / CHECKPOINT_FILE


@pytest.mark.parametrize("cut", [1, HEADER_SIZE - 1, HEADER_SIZE, HEADER_SIZE + 5, BATCH_SIZE - 1])
def test_torn_tail_is_cut_and_acknowledged_batches_kept(
    tmp_path: Path, cut: int, caplog: pytest.LogCaptureFixture
) -> None:
    appended = write_log(tmp_path, batches=25)
    tail = segment(tmp_path, 60)
    with tail.open("r+b") as f:
        f.truncate(4 * BATCH_SIZE + cut)  # the 5th batch of the tail is torn
    with caplog.at_level("WARNING", logger="quorum.log.file_log"), open_log(tmp_path) as log:
        assert log.recover() == (None, appended[:24])
        assert log.end_offset == appended[23].next_offset
    # An operator sees what was dropped, where.
    assert f"{tail}: cut a torn tail of {cut} bytes at byte {4 * BATCH_SIZE}" in caplog.text
    assert tail.stat().st_size == 4 * BATCH_SIZE
    with open_log(tmp_path) as log:  # and appends continue cleanly
        log.append(make_batches(72, 2, 1))
        assert log.recover()[1][-1].base_offset == 72


def test_zero_filled_tail_is_cut(tmp_path: Path) -> None:
    """A power loss can leave allocated but never written (zero) blocks."""
    appended = write_log(tmp_path, batches=25)
    tail = segment(tmp_path, 60)
    with tail.open("ab") as f:
        f.write(bytes(3000))
    with open_log(tmp_path) as log:
        assert log.recover() == (None, appended)
    assert tail.stat().st_size == 5 * BATCH_SIZE


def test_last_batch_failing_its_crc_is_cut(tmp_path: Path) -> None:
    appended = write_log(tmp_path, batches=25)
    flip_byte(segment(tmp_path, 60), 5 * BATCH_SIZE - 3)
    with open_log(tmp_path) as log:
        assert log.recover() == (None, appended[:24])


def test_damaged_index_is_rebuilt(tmp_path: Path) -> None:
    appended = write_log(tmp_path)
    index = segment(tmp_path, 30, ".index")
    good = index.read_bytes()
    assert len(good) >= 16, "the test needs an index with entries"
    index.write_bytes(b"\xff" * len(good))
    with open_log(tmp_path) as log:
        assert index.read_bytes() == good
        assert log.read(appended[17].base_offset, 1) == [appended[17]]


def test_deleted_index_is_rebuilt(tmp_path: Path) -> None:
    appended = write_log(tmp_path)
    index = segment(tmp_path, 30, ".index")
    good = index.read_bytes()
    index.unlink()
    with open_log(tmp_path) as log:
        assert index.read_bytes() == good
        assert log.read(appended[15].base_offset, 1) == [appended[15]]


def test_missing_or_damaged_epoch_cache_is_rebuilt_from_the_log(tmp_path: Path) -> None:
    with FileLogStore(tmp_path) as log:
        log.append(make_batches(0, 1, 3) + make_batches(9, 4, 2))
        log.flush(log.end_offset)
        entries = log.epoch_entries
    cache = tmp_path / EPOCH_CACHE_FILE
    good = cache.read_bytes()
    for damage in (lambda: cache.unlink(), lambda: cache.write_text("{not json")):
        damage()
        with FileLogStore(tmp_path) as log:
            assert log.epoch_entries == entries
        assert cache.read_bytes() == good
    # stale (claims an epoch the log does not have): also rebuilt
    cache.write_text(json.dumps({"version": 1, "entries": [[1, 0], [4, 9], [7, 15]]}))
    with FileLogStore(tmp_path) as log:
        assert log.epoch_entries == entries


# --------------------------------------------------------------- quorum state


def test_unparsable_quorum_state_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "quorum-state"
    FileQuorumStateStore(path, "cluster-a", 1).write(QuorumStateData(4, 2, None))
    path.write_bytes(path.read_bytes()[:-10])
    before = path.read_bytes()
    with pytest.raises(QuorumStateCorruptionError, match="quorum-state") as caught:
        FileQuorumStateStore(path, "cluster-a", 1)
    assert caught.value.path == path
    assert path.read_bytes() == before


def test_quorum_state_of_another_cluster_or_node_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "quorum-state"
    FileQuorumStateStore(path, "cluster-a", 1).write(QuorumStateData(4, 2, None))
    with pytest.raises(InconsistentClusterIdError, match="cluster-a"):
        FileQuorumStateStore(path, "cluster-b", 1)
    with pytest.raises(InconsistentNodeIdError, match="node id is 1"):
        FileQuorumStateStore(path, "cluster-a", 2)


# ------------------------------------------------------------------ snapshots


def make_snapshot(root: Path) -> tuple[FileSnapshotStore, SnapshotId]:
    store = FileSnapshotStore(root)
    snapshot_id = SnapshotId(500, 3)
    store.write(snapshot_id, [(f"key-{i:05d}".encode(), os.urandom(50)) for i in range(5000)])
    return store, snapshot_id


def test_snapshot_with_a_flipped_byte_fails_to_load(tmp_path: Path) -> None:
    store, snapshot_id = make_snapshot(tmp_path)
    sst = next((store.path(snapshot_id) / "db").glob("*.sst"))
    flip_byte(sst, sst.stat().st_size // 3)
    with pytest.raises(SnapshotCorruptionError) as caught:
        list(store.read(snapshot_id))
    assert store.path(snapshot_id).name in str(caught.value)


def test_snapshot_with_a_changed_value_fails_its_checksum(tmp_path: Path) -> None:
    """RocksDB itself is consistent here; only our checksum can notice."""
    store, snapshot_id = make_snapshot(tmp_path)
    db = Rdict(str(store.path(snapshot_id) / "db"), Options(raw_mode=True))
    db[b"key-00042"] = b"tampered"
    db.close()
    with pytest.raises(SnapshotCorruptionError, match="checksum") as caught:
        list(store.read(snapshot_id))
    assert caught.value.path == store.path(snapshot_id)


def test_snapshot_with_a_damaged_manifest_fails_to_load(tmp_path: Path) -> None:
    store, snapshot_id = make_snapshot(tmp_path)
    manifest = store.path(snapshot_id) / "manifest.json"
    manifest.write_text(
        manifest.read_text().replace('"record_count": 5000', '"record_count": 4999')
    )
    with pytest.raises(SnapshotCorruptionError, match="4999"):
        list(store.read(snapshot_id))
    manifest.write_text("{")
    with pytest.raises(StorageCorruptionError, match="manifest"):
        list(store.read(snapshot_id))
