"""The on-disk batch encoding round-trips and its checksums catch damage."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from quorum.log.batch_format import (
    HEADER_SIZE,
    HeaderChecksumError,
    decode_batch,
    encode_batch,
    parse_header,
    payload_crc_ok,
)
from quorum.raft.records import Batch

batches = st.builds(
    Batch,
    base_offset=st.integers(0, 2**62),
    epoch=st.integers(0, 2**31 - 1),
    records=st.lists(st.binary(max_size=300), min_size=1, max_size=20).map(tuple),
    append_time_ms=st.integers(-(2**62), 2**62),
    control=st.booleans(),
)


@given(batches)
def test_round_trip(batch: Batch) -> None:
    data = encode_batch(batch)
    header = parse_header(data, 0)
    assert header.size == len(data)
    assert header.next_offset == batch.next_offset
    assert payload_crc_ok(data, 0, header)
    assert decode_batch(data, 0, header) == batch


@given(batches, st.data())
def test_any_flipped_bit_is_detected(batch: Batch, data: st.DataObject) -> None:
    encoded = bytearray(encode_batch(batch))
    position = data.draw(st.integers(0, len(encoded) - 1))
    encoded[position] ^= 1 << data.draw(st.integers(0, 7))
    damaged = bytes(encoded)
    if position < HEADER_SIZE:
        with pytest.raises(HeaderChecksumError):
            parse_header(damaged, 0)
    else:
        assert not payload_crc_ok(damaged, 0, parse_header(damaged, 0))


def test_empty_batches_cannot_be_encoded() -> None:
    with pytest.raises(ValueError, match="no records"):
        encode_batch(Batch(0, 1, (), 0))
