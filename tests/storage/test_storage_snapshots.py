"""Snapshot stores (RocksDB and in-memory): write, read, retention, transfer, policy."""

from __future__ import annotations

import io
import itertools
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from quorum.raft.records import SnapshotId
from snapshots.api import SnapshotStore
from snapshots.archive import HEADER_SIZE, TRAILER_SIZE, ArchiveHeader, read_archive, write_archive
from snapshots.errors import (
    SnapshotCorruptionError,
    SnapshotExistsError,
    SnapshotNotFoundError,
    SnapshotTransferError,
)
from snapshots.memory import MemorySnapshotStore
from snapshots.policy import SnapshotPolicy, SnapshotTrigger
from snapshots.records import Record
from snapshots.store import FileSnapshotStore

StoreFactory = Callable[[Path], SnapshotStore]
STORES: dict[str, StoreFactory] = {
    "file": lambda path: FileSnapshotStore(path),
    "file-archiving": lambda path: FileSnapshotStore(path, archive_on_write=True),
    "memory": lambda path: MemorySnapshotStore(),
}


def image(n: int, seed: int = 0) -> list[Record]:
    return [
        (f"partition/{seed}/{i:06d}".encode(), f"value-{seed}-{i}".encode() * 3) for i in range(n)
    ]


@pytest.fixture(params=sorted(STORES))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> SnapshotStore:
    return STORES[request.param](tmp_path / "snapshots")


def transfer(
    source: SnapshotStore, target: SnapshotStore, snapshot_id: SnapshotId, chunk: int
) -> list[bytes]:
    """Copy a snapshot chunk by chunk; returns the chunks sent."""
    first = source.read_chunk(snapshot_id, 0, chunk)
    receiver = target.begin_install(snapshot_id, first.total_size)
    sent = []
    piece = first
    while True:
        receiver.write_chunk(piece.position, piece.data)
        sent.append(piece.data)
        if piece.last:
            break
        piece = source.read_chunk(snapshot_id, receiver.received, chunk)
    receiver.complete()
    return sent


# ---------------------------------------------------------------- write / read


def test_records_come_back_in_key_order(store: SnapshotStore) -> None:
    records = image(3000)
    manifest = store.write(SnapshotId(120, 4), reversed(records))
    assert manifest.snapshot_id == SnapshotId(120, 4)
    assert manifest.record_count == 3000
    assert manifest.data_bytes == sum(len(k) + len(v) for k, v in records)
    assert list(store.read(SnapshotId(120, 4))) == sorted(records)
    assert store.manifest(SnapshotId(120, 4)) == manifest


def test_both_stores_compute_the_same_checksum(tmp_path: Path) -> None:
    records = image(500)
    a = FileSnapshotStore(tmp_path).write(SnapshotId(5, 1), records)
    b = MemorySnapshotStore().write(SnapshotId(5, 1), records)
    assert (a.checksum, a.record_count, a.data_bytes) == (b.checksum, b.record_count, b.data_bytes)


def test_empty_image(store: SnapshotStore) -> None:
    store.write(SnapshotId(0, 0), [])
    assert list(store.read(SnapshotId(0, 0))) == []


def test_duplicate_keys_and_existing_ids_are_refused(store: SnapshotStore) -> None:
    with pytest.raises(ValueError, match="duplicate"):
        store.write(SnapshotId(1, 1), [(b"a", b"1"), (b"a", b"2")])
    assert store.snapshot_ids() == []
    store.write(SnapshotId(1, 1), [(b"a", b"1")])
    with pytest.raises(SnapshotExistsError):
        store.write(SnapshotId(1, 1), [(b"a", b"1")])


def test_any_order_gives_the_same_snapshot_and_duplicates_in_any_order_are_refused(
    store: SnapshotStore,
) -> None:
    """The file store streams its records into the database a chunk at a time
    (never a list of them all): sorted input is checksummed as it goes, any other
    order from the database afterwards; the snapshot is the same either way."""
    records = image(25_000)  # three of the writer's chunks
    shuffled = records[1::2] + records[::2]
    store.write(SnapshotId(1, 1), iter(records))
    store.write(SnapshotId(2, 1), iter(shuffled))
    assert list(store.read(SnapshotId(2, 1))) == records
    assert store.manifest(SnapshotId(2, 1)).checksum == store.manifest(SnapshotId(1, 1)).checksum
    for duplicated in (records[:12_000] + records[11_999:], shuffled + records[-1:]):
        with pytest.raises(ValueError, match="duplicate"):
            store.write(SnapshotId(3, 1), iter(duplicated))
    assert store.snapshot_ids() == [SnapshotId(1, 1), SnapshotId(2, 1)]


def test_missing_snapshot(store: SnapshotStore) -> None:
    with pytest.raises(SnapshotNotFoundError):
        store.read(SnapshotId(9, 9))
    with pytest.raises(SnapshotNotFoundError):
        store.delete(SnapshotId(9, 9))


def test_published_directory_layout(tmp_path: Path) -> None:
    store = FileSnapshotStore(tmp_path)
    store.write(SnapshotId(1234, 5), image(10))
    published = tmp_path / "00000000000000001234-0000000005.snapshot"
    assert published.is_dir()
    assert (published / "manifest.json").is_file()
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".tmp")]


def test_a_crashed_write_is_invisible_and_cleaned_up(tmp_path: Path) -> None:
    store = FileSnapshotStore(tmp_path)
    store.write(SnapshotId(10, 1), image(10))
    leftover = tmp_path / ".tmp-00000000000000000020-0000000001.snapshot-abcd1234"
    (leftover / "db").mkdir(parents=True)
    assert store.snapshot_ids() == [SnapshotId(10, 1)]
    FileSnapshotStore(tmp_path)
    assert not leftover.exists()


# ------------------------------------------------------------------ retention


def test_listing_latest_retention_and_delete(store: SnapshotStore) -> None:
    ids = [SnapshotId(100, 1), SnapshotId(50, 1), SnapshotId(300, 2), SnapshotId(200, 2)]
    for i, snapshot_id in enumerate(ids):
        store.write(snapshot_id, image(20, seed=i))
    ordered = sorted(ids, key=lambda s: s.end_offset)
    assert store.snapshot_ids() == ordered
    assert store.latest() == SnapshotId(300, 2)
    assert store.retain_latest(2) == ordered[:2]
    assert store.snapshot_ids() == ordered[2:]
    assert store.retain_latest(5) == []
    store.delete(SnapshotId(300, 2))
    assert store.snapshot_ids() == [SnapshotId(200, 2)]
    assert list(store.read(SnapshotId(200, 2))) == image(20, seed=3)


# ------------------------------------------------------------------- transfer


@pytest.mark.parametrize(
    ("source_kind", "target_kind"), [("file", "file"), ("file", "memory"), ("memory", "file")]
)
def test_chunked_transfer_round_trip(tmp_path: Path, source_kind: str, target_kind: str) -> None:
    source = STORES[source_kind](tmp_path / "leader")
    target = STORES[target_kind](tmp_path / "follower")
    records = image(4000)
    source.write(SnapshotId(777, 3), records)
    chunks = transfer(source, target, SnapshotId(777, 3), chunk=10_000)
    assert len(chunks) > 5
    assert target.snapshot_ids() == [SnapshotId(777, 3)]
    assert list(target.read(SnapshotId(777, 3))) == records
    assert (
        target.manifest(SnapshotId(777, 3)).checksum == source.manifest(SnapshotId(777, 3)).checksum
    )


def test_both_stores_serve_identical_archives(tmp_path: Path) -> None:
    records = image(1000)
    stores: list[SnapshotStore] = [
        FileSnapshotStore(tmp_path / "a"),
        FileSnapshotStore(tmp_path / "b", archive_on_write=True),
        MemorySnapshotStore(),
    ]
    archives = []
    for store in stores:
        store.write(SnapshotId(5, 1), records)
        chunk = store.read_chunk(SnapshotId(5, 1), 0, 1 << 30)
        assert chunk.last
        archives.append(chunk.data)
    assert archives[0] == archives[1] == archives[2]


def test_an_archiving_store_writes_the_archive_with_the_snapshot(tmp_path: Path) -> None:
    """A controller's store: the archive is published with the snapshot when the
    records come in key order (an image's), so no fetch waits for it to be built;
    in any other order it is built on first use, the same bytes either way."""
    ordered = FileSnapshotStore(tmp_path / "ordered", archive_on_write=True)
    ordered.write(SnapshotId(5, 1), image(25_000))
    archives = os.listdir(tmp_path / "ordered" / ".archives")
    assert len(archives) == 1
    assert sorted(os.listdir(ordered.path(SnapshotId(5, 1)))) == ["db", "manifest.json"]
    served = ordered.read_chunk(SnapshotId(5, 1), 0, 1 << 30).data
    assert (tmp_path / "ordered" / ".archives" / archives[0]).read_bytes() == served

    shuffled = FileSnapshotStore(tmp_path / "shuffled", archive_on_write=True)
    shuffled.write(SnapshotId(5, 1), list(reversed(image(25_000))))
    assert os.listdir(tmp_path / "shuffled" / ".archives") == []
    assert shuffled.read_chunk(SnapshotId(5, 1), 0, 1 << 30).data == served
    assert len(os.listdir(tmp_path / "shuffled" / ".archives")) == 1

    with pytest.raises(ValueError, match="duplicate"):
        ordered.write(SnapshotId(6, 1), image(3) + image(3))
    assert os.listdir(tmp_path / "ordered" / ".archives") == archives
    assert sorted(os.listdir(tmp_path / "ordered")) == [
        ".archives",
        ordered.path(SnapshotId(5, 1)).name,
    ]
    ordered.delete(SnapshotId(5, 1))
    assert os.listdir(tmp_path / "ordered" / ".archives") == []


@pytest.mark.parametrize("take", [None, 7])
def test_an_install_hands_its_records_to_a_loader_in_one_pass(
    store: SnapshotStore, tmp_path: Path, take: int | None
) -> None:
    """A broker builds its image from the records as they are installed: the
    loader sees every record in key order; one that stops early still leaves
    the whole snapshot installed and checked."""
    source = FileSnapshotStore(tmp_path / "source")
    records = image(25_000)
    source.write(SnapshotId(40, 2), records)
    size = source.archive_size(SnapshotId(40, 2))
    receiver = store.begin_install(SnapshotId(40, 2), size)
    receiver.write_chunk(0, source.read_chunk(SnapshotId(40, 2), 0, size).data)
    seen: list[Record] = []
    receiver.complete(lambda got: seen.extend(itertools.islice(got, take)))
    assert seen == (records if take is None else records[:take])
    assert list(store.read(SnapshotId(40, 2))) == records


def test_a_loader_fed_a_corrupt_transfer_fails_and_nothing_is_installed(
    store: SnapshotStore, tmp_path: Path
) -> None:
    source = FileSnapshotStore(tmp_path / "source")
    source.write(SnapshotId(40, 2), image(25_000))
    size = source.archive_size(SnapshotId(40, 2))
    archive = bytearray(source.read_chunk(SnapshotId(40, 2), 0, size).data)
    archive[size - TRAILER_SIZE - 3] ^= 0x01  # the last record's value
    receiver = store.begin_install(SnapshotId(40, 2), size)
    receiver.write_chunk(0, bytes(archive))
    loaded: list[Record] = []
    with pytest.raises(SnapshotCorruptionError):
        receiver.complete(loaded.extend)
    assert store.snapshot_ids() == []


@pytest.mark.parametrize("where", ["header", "record", "trailer"])
def test_corrupted_chunk_is_rejected_and_nothing_installed(
    tmp_path: Path, store: SnapshotStore, where: str
) -> None:
    leader = FileSnapshotStore(tmp_path / "leader")
    leader.write(SnapshotId(40, 2), image(2000))
    store.write(SnapshotId(10, 1), image(5))  # the follower's existing state
    size = leader.read_chunk(SnapshotId(40, 2), 0, 1).total_size
    archive = bytearray(leader.read_chunk(SnapshotId(40, 2), 0, size).data)
    position = {"header": 12, "record": size // 2, "trailer": size - 2}[where]
    archive[position] ^= 0x01
    receiver = store.begin_install(SnapshotId(40, 2), size)
    for start in range(0, size, 7000):
        receiver.write_chunk(start, bytes(archive[start : start + 7000]))
    with pytest.raises(SnapshotCorruptionError):
        receiver.complete()
    assert store.snapshot_ids() == [SnapshotId(10, 1)]
    if isinstance(store, FileSnapshotStore):
        assert sorted(os.listdir(store.root)) == [
            ".archives",
            "00000000000000000010-0000000001.snapshot",
        ]


def test_transfer_rejects_out_of_order_oversized_and_short_transfers(store: SnapshotStore) -> None:
    leader = MemorySnapshotStore()
    leader.write(SnapshotId(40, 2), image(100))
    size = leader.read_chunk(SnapshotId(40, 2), 0, 1).total_size
    data = leader.read_chunk(SnapshotId(40, 2), 0, size).data

    receiver = store.begin_install(SnapshotId(40, 2), size)
    with pytest.raises(SnapshotTransferError, match="expected 0"):
        receiver.write_chunk(100, data[100:200])
    with pytest.raises(SnapshotTransferError, match="past the size"):
        receiver.write_chunk(0, data + b"x")
    receiver.write_chunk(0, data[:-1])
    with pytest.raises(SnapshotTransferError, match="received"):
        receiver.complete()
    with pytest.raises(SnapshotTransferError, match="finished"):
        receiver.write_chunk(size - 1, data[-1:])
    assert store.snapshot_ids() == []


def test_archive_for_another_snapshot_is_rejected(store: SnapshotStore) -> None:
    leader = MemorySnapshotStore()
    leader.write(SnapshotId(40, 2), image(10))
    chunk = leader.read_chunk(SnapshotId(40, 2), 0, 1 << 20)
    receiver = store.begin_install(SnapshotId(41, 2), chunk.total_size)
    receiver.write_chunk(0, chunk.data)
    with pytest.raises(SnapshotCorruptionError, match="holds snapshot"):
        receiver.complete()
    assert store.snapshot_ids() == []


@given(
    records=st.dictionaries(st.binary(max_size=30), st.binary(max_size=60), max_size=40),
    read_block=st.integers(1, 200),
)
def test_archive_round_trip_whatever_the_read_block(
    records: dict[bytes, bytes], read_block: int
) -> None:
    """Records straddling the parser's read blocks come back intact."""
    ordered = sorted(records.items())
    out = io.BytesIO()
    data_bytes = sum(len(k) + len(v) for k, v in ordered)
    written = write_archive(out, ArchiveHeader(SnapshotId(9, 2), len(ordered), data_bytes), ordered)
    header, checksum, parsed = read_archive(out, len(out.getvalue()), "test", read_block=read_block)
    assert header == ArchiveHeader(SnapshotId(9, 2), len(ordered), data_bytes)
    assert checksum == written.value
    assert list(parsed) == ordered


def test_archive_size_matches_its_layout(tmp_path: Path) -> None:
    store = FileSnapshotStore(tmp_path)
    manifest = store.write(SnapshotId(3, 1), image(50))
    expected = HEADER_SIZE + manifest.data_bytes + 8 * manifest.record_count + TRAILER_SIZE
    assert store.archive_size(SnapshotId(3, 1)) == expected


def test_a_damaged_snapshot_is_never_served(tmp_path: Path) -> None:
    from rocksdict import Options, Rdict

    store = FileSnapshotStore(tmp_path)
    store.write(SnapshotId(3, 1), image(50))
    db = Rdict(str(store.path(SnapshotId(3, 1)) / "db"), Options(raw_mode=True))
    db[image(50)[7][0]] = b"changed"
    db.close()
    with pytest.raises(SnapshotCorruptionError, match="checksum"):
        store.read_chunk(SnapshotId(3, 1), 0, 100)
    assert os.listdir(tmp_path / ".archives") == []


# --------------------------------------------------------------------- policy


def test_policy_triggers_on_new_bytes_or_interval() -> None:
    policy = SnapshotPolicy(max_new_record_bytes=1000, max_interval_ms=60_000)
    assert not policy.is_due(999, last_snapshot_ms=0, now_ms=1)
    assert policy.is_due(1000, last_snapshot_ms=0, now_ms=1)
    assert policy.is_due(1, last_snapshot_ms=0, now_ms=60_000)
    assert not policy.is_due(1, last_snapshot_ms=0, now_ms=59_999)
    assert not policy.is_due(0, last_snapshot_ms=0, now_ms=10**9), "nothing new: no snapshot"
    assert not SnapshotPolicy(1000, 0).is_due(1, last_snapshot_ms=0, now_ms=10**9)


def test_policy_reads_kafka_properties_and_defaults() -> None:
    assert SnapshotPolicy.from_properties({}) == SnapshotPolicy(20 * 1024 * 1024, 3_600_000)
    policy = SnapshotPolicy.from_properties(
        {
            "metadata.snapshot.max.new.record.bytes": "4096",
            "metadata.snapshot.max.interval.ms": "500",
        }
    )
    assert policy == SnapshotPolicy(4096, 500)


def test_trigger_counts_committed_bytes_since_the_last_snapshot() -> None:
    trigger = SnapshotTrigger(SnapshotPolicy(100, 0), now_ms=0)
    trigger.on_committed([b"x" * 60])
    assert not trigger.due(now_ms=5)
    trigger.on_committed([b"y" * 30, b"z" * 10])
    assert trigger.due(now_ms=5)
    covered = trigger.new_record_bytes
    trigger.on_committed([b"w" * 7])  # committed while the snapshot is written
    trigger.on_snapshot_taken(now_ms=6, covered_bytes=covered)
    assert not trigger.due(now_ms=7)
    assert trigger.new_record_bytes == 7  # not in that snapshot: counts for the next


def test_writes_during_a_snapshot_make_the_next_one_due_on_a_quiet_log() -> None:
    """The last writes before a quiet spell landed while a snapshot was being
    written: the interval must still bring a snapshot that covers them."""
    trigger = SnapshotTrigger(SnapshotPolicy(1 << 20, 500), now_ms=0)
    trigger.on_committed([b"a" * 10])
    assert trigger.due(now_ms=600)
    covered = trigger.new_record_bytes
    trigger.on_committed([b"b" * 10])
    trigger.on_snapshot_taken(now_ms=700, covered_bytes=covered)
    assert not trigger.due(now_ms=1000)
    assert trigger.due(now_ms=1200)
