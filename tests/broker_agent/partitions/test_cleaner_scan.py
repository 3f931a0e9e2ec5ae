"""The cleaner's fast paths agree with the full record reader: `scan_keys` reads
the same offsets, keys and tombstones as `records_of` for any batch (long keys,
null keys, empty keys, multi-byte varints), and refuses the same broken
ones; the offset map keeps long keys as digests and short ones as they are."""

from __future__ import annotations

from pathlib import Path

import pytest
from cleaner_helpers import (
    BASE_TIME_MS,
    Stored,
    compact_config,
    make_batch,
    open_log,
    produce,
    producers_of,
    read_all,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from broker_agent.partitions.log_cleaner import CleanerConfig, LogCleaner
from broker_agent.partitions.offset_map import ENTRY_BYTES, MAX_KEY_BYTES, OffsetMap
from broker_agent.partitions.record_batch import InvalidRecordBatch
from broker_agent.partitions.record_codec import records_of, scan_keys

NOW = BASE_TIME_MS + 1_000
keys = st.one_of(st.none(), st.binary(max_size=3 * MAX_KEY_BYTES))
values = st.one_of(st.none(), st.binary(max_size=20_000))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(keys, values), min_size=1, max_size=12))
def test_scan_keys_reads_what_records_of_reads(
    records: list[tuple[bytes | None, bytes | None]],
) -> None:
    batch = make_batch(records)
    header, full = records_of(batch)
    scan = scan_keys(batch)
    assert scan.header == header
    assert scan.offsets == [r.offset for r in full]
    assert scan.keys == [r.key for r in full]
    assert scan.tombstones == [r.tombstone for r in full]


def test_scan_keys_refuses_a_record_cut_short() -> None:
    batch = make_batch([(b"k", b"v" * 300), (b"k2", b"v")])
    cut = bytearray(batch)
    cut[61] = 0x7E  # the first record's length: 63, past where its fields end
    for reader in (records_of, scan_keys):
        with pytest.raises(InvalidRecordBatch):
            reader(bytes(cut))


def test_offset_map_long_keys_and_capacity() -> None:
    offsets = OffsetMap(10 * ENTRY_BYTES)
    assert offsets.max_entries == 9
    long_key = b"x" * (MAX_KEY_BYTES + 1)
    offsets.put_all([b"a", long_key, b"a"], [1, 2, 3])
    assert offsets.get(b"a") == 3 and offsets.get(long_key) == 2 and offsets.size == 2
    assert offsets.get(b"x" * (MAX_KEY_BYTES + 2)) == -1
    for i in range(7):
        offsets.put(b"k%d" % i, 10 + i)
    assert offsets.full
    with pytest.raises(OverflowError):
        offsets.put(b"one more", 20)
    offsets.put(b"a", 21)  # a key already mapped still moves
    assert offsets.get(b"a") == 21


batches_of_updates = st.lists(
    st.lists(
        st.tuples(
            st.one_of(st.none(), st.sampled_from([b"k%d" % i for i in range(10)] + [b"k" * 40])),
            st.one_of(st.none(), st.binary(min_size=1, max_size=30)),
        ),
        min_size=1,
        max_size=6,
    ),
    min_size=1,
    max_size=40,
)


@settings(max_examples=40, deadline=None)
@given(batches_of_updates, st.sampled_from([6, 8, 1000]), st.data())
def test_cleaning_in_passes_keeps_what_a_model_keeps(
    tmp_path_factory: pytest.TempPathFactory,
    batches: list[list[tuple[bytes | None, bytes | None]]],
    map_entries: int,
    data: st.DataObject,
) -> None:
    """Batches mixing superseded, latest, keyless and tombstone records, cleaned
    in rounds whose map holds 6 (the largest batch), 8 or many keys, with new batches between
    rounds: what stays is every key's latest record (tombstones too, younger
    than delete.retention.ms), at its offset, and nothing else below the
    active segment."""
    directory = tmp_path_factory.mktemp("model") / "t-0"
    plog = open_log(directory, compact_config(segment_bytes=300))
    cleaner = LogCleaner(CleanerConfig(dedupe_buffer_size=int((map_entries + 1) * ENTRY_BYTES)))
    written: list[Stored] = []
    for i, records in enumerate(batches):
        base = produce(plog, make_batch(records))
        written += [Stored(base + j, k, v) for j, (k, v) in enumerate(records)]
        if data.draw(st.booleans(), label=f"clean after batch {i}"):
            plog.store.roll()
            cleaner.clean(plog, plog.log_end_offset, NOW, producers_of(plog))
    plog.store.roll()
    for _ in range(len(written) + 1):  # until every dirty record was mapped once
        result = cleaner.clean(plog, plog.log_end_offset, NOW, producers_of(plog))
        if result.map_end >= plog.store.segments[-1].base_offset:
            break
    latest: dict[bytes, Stored] = {}
    for record in written:
        if record.key is not None:
            latest[record.key] = record
    assert read_all(plog) == sorted(latest.values(), key=lambda r: r.offset)
    plog.close()


def test_a_batch_counts_in_the_map_by_its_distinct_keys(tmp_path: Path) -> None:
    """librdkafka sends batches of thousands of records over few keys: the map
    needs room for the keys, not the records (a small buffer still cleans)."""
    offsets = OffsetMap(4 * ENTRY_BYTES)  # 3 entries at the 0.9 load factor
    assert offsets.new_keys([b"a"] * 100 + [None, b"b"]) == 2
    offsets.put_all([b"a", b"b"], [0, 1])
    assert offsets.new_keys([b"a", b"c"] * 50) == 1  # near full: counted exactly
    plog = open_log(tmp_path / "t-0")
    records = [(b"k%d" % (i % 3), b"v%d" % i) for i in range(50)]
    produce(plog, make_batch(records))
    produce(plog, make_batch(records))
    plog.store.roll()
    cleaner = LogCleaner(CleanerConfig(dedupe_buffer_size=5 * ENTRY_BYTES))
    result = cleaner.clean(plog, plog.log_end_offset, NOW, producers_of(plog))
    assert result.cleaned and result.map_end == 100
    assert [(r.offset, r.key) for r in read_all(plog)] == [(97, b"k2"), (98, b"k0"), (99, b"k1")]
