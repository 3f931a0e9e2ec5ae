"""The cleaner's fast paths agree with the full record reader: `scan_keys` reads
the same offsets, keys and tombstones as `records_of` for any batch (long keys,
null keys, empty keys, multi-byte varints), and refuses the same broken
ones; the offset map keeps long keys as digests and short ones as they are."""

from __future__ import annotations

import pytest
from cleaner_helpers import make_batch
from hypothesis import given, settings
from hypothesis import strategies as st

from broker_agent.partitions.offset_map import ENTRY_BYTES, MAX_KEY_BYTES, OffsetMap
from broker_agent.partitions.record_batch import InvalidRecordBatch
from broker_agent.partitions.record_codec import records_of, scan_keys

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
