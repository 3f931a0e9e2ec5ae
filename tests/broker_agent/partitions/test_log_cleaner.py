"""The log cleaner on real segment files: what a round keeps and removes."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from cleaner_helpers import (
    BASE_TIME_MS,
    batch_headers,
    compact_config,
    latest_per_key,
    make_batch,
    open_log,
    produce,
    producers_of,
    read_all,
)

from broker_agent.partitions.compare import compare_compacted
from broker_agent.partitions.log_cleaner import (
    CleanerConfig,
    LogCleaner,
    RoundResult,
    cleanable_range,
    should_clean,
)
from broker_agent.partitions.offset_map import ENTRY_BYTES
from broker_agent.partitions.partition_log import PartitionLog
from broker_agent.partitions.record_batch import split_batches
from broker_agent.partitions.record_codec import records_of, rewrite_batch

NOW = BASE_TIME_MS + 1_000


def fill(plog: PartitionLog, rounds: int, keys: int, value_size: int = 20) -> None:
    """`rounds` updates of every key, one record per batch, then one batch more so
    the last update is below the active segment."""
    for r in range(rounds):
        for k in range(keys):
            produce(plog, make_batch([(b"k%d" % k, b"v%d-" % r + b"x" * value_size)]))
    plog.store.roll()


def clean(plog: PartitionLog, cleaner: LogCleaner | None = None, now: int = NOW) -> LogCleaner:
    cleaner = cleaner or LogCleaner()
    cleaner.clean(plog, plog.log_end_offset, now, producers_of(plog))
    return cleaner


def test_keeps_the_latest_value_of_every_key_at_its_offset(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0")
    fill(plog, rounds=10, keys=7)
    before = read_all(plog)
    assert len(plog.store.segments) > 3
    result = LogCleaner().clean(plog, plog.log_end_offset, NOW, producers_of(plog))
    assert result.cleaned and result.records_removed == 63
    after = read_all(plog)
    assert after == sorted(latest_per_key(before).values(), key=lambda r: r.offset)
    offsets = [r.offset for r in after]
    assert offsets == list(range(63, 70))  # offsets kept, the gap before them is normal
    assert plog.log_end_offset == 70
    # A consumer fetching from inside the gap gets the next surviving record.
    assert read_all(plog, 5)[0].offset == 63
    # Reopening finds the same log (gaps and all).
    plog.close()
    reopened = open_log(tmp_path / "t-0")
    assert read_all(reopened) == after
    assert reopened.log_end_offset == 70


def test_the_active_segment_is_never_cleaned(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", compact_config(segment_bytes=1 << 20))
    for r in range(5):
        produce(plog, make_batch([(b"k", b"v%d" % r)]))
    assert len(plog.store.segments) == 1
    result = LogCleaner().clean(plog, plog.log_end_offset, NOW, producers_of(plog))
    assert not result.cleaned
    assert [r.value for r in read_all(plog)] == [b"v0", b"v1", b"v2", b"v3", b"v4"]


def test_records_above_the_high_watermark_are_not_cleaned(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0")
    fill(plog, rounds=10, keys=7)
    hw = plog.store.segments[2].base_offset
    LogCleaner().clean(plog, hw, NOW, producers_of(plog))
    after = read_all(plog)
    assert [r.offset for r in after if r.offset >= hw] == list(range(hw, 70))


def test_tombstones_live_for_delete_retention_ms_after_cleaning(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", compact_config(delete_retention_ms=60_000))
    fill(plog, rounds=3, keys=4)
    produce(plog, make_batch([(b"k1", None)]))
    produce(plog, make_batch([(b"k2", None), (b"k3", b"last")]))
    plog.store.roll()
    cleaner = clean(plog)
    kept = {r.key: r.value for r in read_all(plog)}
    assert kept[b"k1"] is None and kept[b"k2"] is None and kept[b"k3"] == b"last"
    assert cleaner.horizons[plog.directory] == NOW + 60_000
    # Before the horizon another round keeps them; after it they go.
    clean(plog, cleaner, NOW + 59_999)
    assert {r.key for r in read_all(plog)} == {b"k0", b"k1", b"k2", b"k3"}
    range_ = cleanable_range(plog, plog.log_end_offset, NOW + 60_000)
    assert should_clean(plog, range_, NOW + 60_000, cleaner.horizons.get(plog.directory))
    clean(plog, cleaner, NOW + 60_000)
    assert {r.key: r.value for r in read_all(plog)} == {b"k0": b"v2-" + b"x" * 20, b"k3": b"last"}
    assert plog.directory not in cleaner.horizons


def test_producer_ids_sequences_and_last_offsets_survive(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0")
    produce(plog, make_batch([(b"a", b"1"), (b"b", b"1"), (b"c", b"1")],
                             producer_id=7, producer_epoch=2, base_sequence=0))  # fmt: skip
    produce(plog, make_batch([(b"a", b"2"), (b"b", b"2")],
                             producer_id=7, producer_epoch=2, base_sequence=3))  # fmt: skip
    produce(plog, make_batch([(b"a", b"3"), (b"b", b"3")],
                             producer_id=9, producer_epoch=0, base_sequence=0))  # fmt: skip
    plog.store.roll()
    clean(plog)
    # Producer 7's first batch keeps only c (its base offset and last offset delta
    # stay, so its last sequence does too); its second and last batch is emptied
    # but kept, so the producer's sequence survives a restart.
    assert batch_headers(plog) == [(0, 2, 7, 2, 0), (3, 1, 7, 2, 3), (5, 1, 9, 0, 0)]
    assert [(r.offset, r.key) for r in read_all(plog)] == [(2, b"c"), (5, b"a"), (6, b"b")]
    table = producers_of(plog)
    assert table.last_batch_offset(7) == 3 and table.last_batch_offset(9) == 5


def test_a_full_map_cleans_in_several_passes(tmp_path: Path) -> None:
    big = open_log(tmp_path / "big")
    small = open_log(tmp_path / "small")
    fill(big, rounds=3, keys=100)
    fill(small, rounds=3, keys=100)
    clean(big)
    # Room for 50 entries: 45 at the 0.9 load factor.
    cleaner = LogCleaner(CleanerConfig(dedupe_buffer_size=50 * ENTRY_BYTES))
    ends = []
    for _ in range(30):
        result = cleaner.clean(small, small.log_end_offset, NOW, producers_of(small))
        ends.append(result.map_end)
        if result.map_end == small.store.segments[-1].base_offset:
            break
    assert len(ends) >= 300 // 45, ends  # the map filled several times
    assert ends == sorted(ends)
    assert read_all(small) == read_all(big)


def test_min_compaction_lag_keeps_recent_segments_dirty(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", compact_config(min_compaction_lag_ms=10_000))
    fill(plog, rounds=4, keys=5)
    before = read_all(plog)
    range_ = cleanable_range(plog, plog.log_end_offset, BASE_TIME_MS + 9_999)
    assert range_.dirty_bytes == 0
    clean(plog, now=BASE_TIME_MS + 9_999)
    assert read_all(plog) == before
    clean(plog, now=BASE_TIME_MS + 10_001)
    assert len(read_all(plog)) == 5


def test_dirty_ratio_and_max_compaction_lag(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", compact_config(min_cleanable_dirty_ratio=0.5))
    fill(plog, rounds=6, keys=20)
    range_ = cleanable_range(plog, plog.log_end_offset, NOW)
    assert range_.dirty_ratio == 1.0 and should_clean(plog, range_, NOW, None)
    clean(plog)
    range_ = cleanable_range(plog, plog.log_end_offset, NOW)
    assert range_.dirty_bytes == 0 and not should_clean(plog, range_, NOW, None)
    # A little new dirt: below the ratio, until max.compaction.lag.ms forces it.
    produce(plog, make_batch([(b"k1", b"new")]))
    plog.store.roll()
    range_ = cleanable_range(plog, plog.log_end_offset, NOW)
    assert 0 < range_.dirty_ratio < 0.5 and not should_clean(plog, range_, NOW, None)
    lagged = open_log(tmp_path / "t-1", compact_config(max_compaction_lag_ms=5_000))
    fill(lagged, rounds=1, keys=3)
    lagged_range = cleanable_range(lagged, lagged.log_end_offset, NOW)
    assert should_clean(lagged, lagged_range, BASE_TIME_MS + 5_001, None)


def test_rewritten_batches_pass_the_followers_checks(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0")
    fill(plog, rounds=5, keys=5)
    produce(plog, make_batch([(b"k1", None)]))
    plog.store.roll()
    clean(plog)
    data = plog.read(0, 1 << 30, plog.log_end_offset)
    batches = split_batches(data, allow_empty=True)  # framing and CRC-32C of each
    follower = open_log(tmp_path / "follower")
    assert follower.append_as_follower(data, NOW) == len(batches)
    assert read_all(follower) == read_all(plog)
    assert follower.log_end_offset == plog.store.segments[-1].base_offset


def test_policy_delete_is_not_cleaned_and_compact_is_not_retained(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", compact_config(cleanup_policy="delete"))
    range_ = cleanable_range(plog, 0, NOW)
    assert not should_clean(plog, range_, NOW, None)
    compacted = open_log(tmp_path / "t-1", compact_config(retention_ms=1, retention_bytes=1))
    fill(compacted, rounds=2, keys=3)
    start = compacted.apply_retention(NOW + 10**9, compacted.log_end_offset)
    assert start == 0 and len(read_all(compacted)) == 6
    both = open_log(tmp_path / "t-2", compact_config(cleanup_policy="compact,delete"))
    assert both.config.compact and both.config.delete


def test_a_round_whose_log_changed_is_dropped(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0")
    fill(plog, rounds=10, keys=7)
    before = read_all(plog)
    for while_writing in (False, True):  # while mapping keys; while rewriting a group
        copy = tmp_path / f"copy-{while_writing}"
        shutil.copytree(plog.directory, copy)
        log = open_log(copy)
        result = RoundResult()
        steps = LogCleaner().clean_steps(log, log.log_end_offset, NOW, producers_of(log), result)
        next(steps)
        while while_writing and result.bytes_read == 0:
            next(steps)
        log.reset_to(log.log_end_offset)  # a follower far behind its leader's log start
        for _ in steps:
            pass
        assert result.aborted and not result.cleaned
        assert not [p for p in copy.iterdir() if p.suffix in (".cleaned", ".swap")]
        assert read_all(log) == [] and log.log_start_offset == len(before)
        log.close()
    # And a truncation below the cleaner's checkpoint makes what follows dirty again.
    other = open_log(tmp_path / "t-1")
    fill(other, rounds=4, keys=5)
    clean(other)
    assert other.cleaner_checkpoint() == other.store.segments[-1].base_offset
    other.truncate_to(17)
    assert other.cleaner_checkpoint() == 17


def test_leader_epochs_survive_cleaning_and_reopening(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0")
    for epoch in range(4):  # every key rewritten in each epoch: epochs 0-2 vanish
        for k in range(6):
            plog.append_as_leader(
                split_batches(make_batch([(b"k%d" % k, b"e%d" % epoch)])), epoch, NOW
            )
    produce(plog, make_batch([(b"tail", b"x")]), epoch=3)
    plog.store.roll()
    entries = plog.epoch_entries
    clean(plog)
    assert [r.value for r in read_all(plog)] == [b"e3"] * 6 + [b"x"]
    assert plog.epoch_entries == entries
    plog.close()
    reopened = open_log(tmp_path / "t-0")
    assert reopened.epoch_entries == entries  # epochs 0-2 have no batch left
    assert reopened.end_offset_for_epoch(1).end_offset == 12


def test_segment_ms_rolls_the_active_segment(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", compact_config(segment_bytes=1 << 20, segment_ms=60_000))
    produce(plog, make_batch([(b"k", b"1")]))
    # As in Kafka, by the timestamps of the batches appended, not the wall clock.
    produce(plog, make_batch([(b"k", b"2")], timestamp_ms=BASE_TIME_MS + 59_999))
    assert len(plog.store.segments) == 1
    produce(plog, make_batch([(b"k", b"3")], timestamp_ms=BASE_TIME_MS + 60_000))
    assert [s.base_offset for s in plog.store.segments] == [0, 2]
    assert not plog.maybe_roll(BASE_TIME_MS + 119_999)  # the new segment is young
    assert plog.maybe_roll(BASE_TIME_MS + 120_000)
    assert not plog.maybe_roll(BASE_TIME_MS + 10**9)  # an empty active segment stays
    # A follower rolls by the same rule, per append (one fetch answer), as in Kafka.
    follower = open_log(tmp_path / "f-0", compact_config(segment_bytes=1 << 20, segment_ms=60_000))
    for _, raw in split_batches(plog.read(0, 1 << 20, plog.log_end_offset)):
        follower.append_as_follower(raw, NOW)
    assert [s.base_offset for s in follower.store.segments] == [0, 2]


@pytest.mark.parametrize("codec", [1, 2, 3, 4], ids=["gzip", "snappy", "lz4", "zstd"])
def test_compressed_batches_are_rewritten_in_their_codec(tmp_path: Path, codec: int) -> None:
    plog = open_log(tmp_path / "t-0")
    for r in range(5):
        records = [(b"k%d" % k, b"r%d" % r * 30) for k in range(8)]
        produce(plog, compressed_batch(make_batch(records), codec))
    plog.store.roll()
    clean(plog)
    data = plog.read(0, 1 << 30, plog.log_end_offset)
    headers = [h for h, _ in split_batches(data, allow_empty=True)]
    assert all(h.attributes & 0x07 == codec for h in headers)
    _, records = records_of(data)
    assert {(r.key, r.offset) for r in records} == {(b"k%d" % k, 32 + k) for k in range(8)}


def test_a_batch_over_the_decompression_bound_is_kept_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A zstd batch whose records would decompress past the bound (a bomb) is
    neither read nor cleaned; the batches around it are."""
    from broker_agent.partitions import compression

    plog = open_log(tmp_path / "t-0")
    produce(plog, make_batch([(b"k", b"old")]))
    produce(plog, compressed_batch(make_batch([(b"k", bytes(200_000))]), 4))
    produce(plog, make_batch([(b"k", b"new")]))
    plog.store.roll()
    monkeypatch.setattr(compression, "MAX_DECOMPRESSED_BYTES", 100_000)
    clean(plog)
    data = plog.read(0, 1 << 30, plog.log_end_offset)
    assert [h.base_offset for h, _ in split_batches(data, allow_empty=True)] == [1, 2]


def compressed_batch(batch: bytes, codec: int) -> bytes:
    """The same records, compressed with `codec` (attributes bits 0-2), CRC recomputed."""
    header, records = records_of(batch)
    packed = replace(header, attributes=header.attributes | codec)
    return rewrite_batch(packed, records, None)


def test_compare_compacted_reports_a_different_latest_value(tmp_path: Path) -> None:
    logs = [open_log(tmp_path / name) for name in ("a-0", "b-0")]
    for plog in logs:
        fill(plog, rounds=3, keys=4)
    clean(logs[0])  # cleaning alone changes no key's latest value
    produce(logs[1], make_batch([(b"k2", None)]))  # a delete only one replica has
    produce(logs[0], make_batch([(b"k2", b"other")]))
    end = logs[0].log_end_offset
    dirs = [plog.directory for plog in logs]
    assert compare_compacted(dirs, end - 1) == []
    problems = compare_compacted(dirs, end)
    assert len(problems) == 1 and "b'k2'" in problems[0] and "vs none" in problems[0]
