"""Loading a snapshot and applying the log after it gives exactly the image that
applying the whole log gives, whatever the records and wherever snapshots are
taken (including inside a batch). Real FileLogStore, real RocksDB snapshots."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quorum.log.file_log import FileLogStore
from quorum.raft.records import Batch, SnapshotId
from snapshots.records import Record
from snapshots.replay import apply_batches, restore
from snapshots.store import FileSnapshotStore

KEYS = [f"topic-{i}".encode() for i in range(8)]


def put(key: bytes, value: bytes) -> bytes:
    return b"P" + bytes([len(key)]) + key + value


def delete(key: bytes) -> bytes:
    return b"D" + key


class KeyValueImage:
    """A toy metadata image: records are put/delete operations on a map."""

    def __init__(self) -> None:
        self.data: dict[bytes, bytes] = {}
        self.applied: list[int] = []

    def load_snapshot(self, records: Iterable[Record]) -> None:
        self.data = dict(records)

    def apply(self, offset: int, record: bytes) -> None:
        self.applied.append(offset)
        if record[:1] == b"P":
            size = record[1]
            self.data[record[2 : 2 + size]] = record[2 + size :]
        elif record[:1] == b"D":
            self.data.pop(record[1:], None)
        else:
            raise AssertionError(f"unknown record {record!r}")

    def snapshot_records(self) -> list[Record]:
        return sorted(self.data.items())


operations = st.one_of(
    st.builds(put, st.sampled_from(KEYS), st.binary(max_size=40)),
    st.builds(delete, st.sampled_from(KEYS)),
)
batch_plans = st.lists(
    st.tuples(
        st.lists(operations, min_size=1, max_size=6),
        st.integers(0, 2),  # epoch increase before this batch
        st.booleans(),  # a control batch (LeaderChange) goes first
    ),
    min_size=1,
    max_size=25,
)


def build_batches(plans: list[tuple[list[bytes], int, bool]]) -> list[Batch]:
    batches: list[Batch] = []
    offset, epoch = 0, 1
    for records, bump, control in plans:
        epoch += bump
        if control:
            batches.append(Batch(offset, epoch, (b"LC1leader-change",), offset, control=True))
            offset += 1
        batches.append(Batch(offset, epoch, tuple(records), offset))
        offset = batches[-1].next_offset
    return batches


def image_of_prefix(batches: list[Batch], end: int) -> KeyValueImage:
    """The reference: apply every record below `end`, from the start."""
    image = KeyValueImage()
    for batch in batches:
        if batch.control:
            continue
        for i, record in enumerate(batch.records):
            if batch.base_offset + i < end:
                image.apply(batch.base_offset + i, record)
    return image


def epoch_at(batches: list[Batch], offset: int) -> int:
    return next(b.epoch for b in batches if b.base_offset <= offset < b.next_offset)


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    plans=batch_plans,
    snapshot_fractions=st.lists(st.floats(0, 1), max_size=4),
    reopen_midway=st.booleans(),
)
def test_snapshot_plus_tail_equals_full_replay(
    tmp_path: Path,
    plans: list[tuple[list[bytes], int, bool]],
    snapshot_fractions: list[float],
    reopen_midway: bool,
) -> None:
    batches = build_batches(plans)
    total = batches[-1].next_offset
    points = sorted({int(f * total) for f in snapshot_fractions})
    workdir = Path(tempfile.mkdtemp(dir=tmp_path))
    try:
        log_dir = workdir / "log"
        store = FileSnapshotStore(workdir / "snapshots")
        log = FileLogStore(log_dir, segment_bytes=400, index_interval_bytes=64)
        for i, batch in enumerate(batches):
            log.append([batch])
            log.flush(batch.next_offset)
            while points and points[0] <= log.end_offset:
                point = points.pop(0)
                snapshot_id = SnapshotId(point, epoch_at(batches, point - 1) if point else 0)
                store.write(snapshot_id, image_of_prefix(batches, point).snapshot_records())
                log.advance_start(snapshot_id)
                store.retain_latest(2)
            if reopen_midway and i == len(batches) // 2:
                log.close()
                log = FileLogStore(log_dir, segment_bytes=400, index_interval_bytes=64)
        log.close()

        with FileLogStore(log_dir, segment_bytes=400, index_interval_bytes=64) as reopened:
            restored = KeyValueImage()
            loaded = restore(restored, reopened, store)
        expected = image_of_prefix(batches, total)
        assert restored.data == expected.data
        start = loaded.end_offset if loaded else 0
        data_offsets = [
            b.base_offset + i
            for b in batches
            if not b.control
            for i in range(len(b.records))
            if b.base_offset + i >= start
        ]
        assert restored.applied == data_offsets, "each tail record applied exactly once"
    finally:
        shutil.rmtree(workdir)


def test_apply_batches_starts_inside_a_straddling_batch() -> None:
    image = KeyValueImage()
    batches = [
        Batch(0, 1, (put(b"a", b"1"), put(b"b", b"1")), 0),
        Batch(2, 1, (put(b"a", b"2"), put(b"c", b"2"), delete(b"b")), 0),
    ]
    image.load_snapshot([(b"a", b"1"), (b"b", b"1"), (b"c", b"x")])
    assert apply_batches(image, batches, from_offset=3) == 5
    assert image.applied == [3, 4]
    assert image.data == {b"a": b"1", b"c": b"2"}
