"""Are replicas' logs byte-identical below the high watermark?

Reads partition directories read-only (no lock: it works beside running
brokers, ignoring a tail still being written) and compares the stored Kafka
batches, offset by offset, below `upper_offset`. Usable from tests and by
operators: `python -m broker_agent.partitions.compare DIR DIR... --below HW`.

Compacted topics' replicas clean independently, so they may differ in which
superseded records they still hold: `--compacted` compares each key's latest
(offset, value) instead, a delete (tombstone) counting as no value.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

from broker_agent.partitions.record_codec import UnsupportedCompression, records_of, value_of
from quorum.log.errors import LogCorruptionError
from quorum.log.segment_reader import SegmentReader, segment_files


def stored_batches(directory: Path) -> Iterator[tuple[int, int, bytes]]:
    """(base offset, next offset, Kafka batch bytes) of every whole, valid batch,
    read by the log's one segment reader; each segment is read up to its first
    damaged or unfinished batch (a tail still being written is not an error here)."""
    for base, path in segment_files(directory):
        reader = SegmentReader(path, base, -1, is_tail=True, offset_gaps=True)
        try:
            for found in reader:
                if found.opaque:
                    header = found.header
                    yield header.base_offset, header.next_offset, found.decode().records[0]
        except LogCorruptionError:
            continue


def compare_replicas(directories: Sequence[Path], upper_offset: int) -> list[str]:
    """Differences below `upper_offset` between the first replica and each other
    (empty when they are byte-identical there)."""

    def below(directory: Path) -> dict[int, tuple[int, bytes]]:
        return {
            base: (end, data)
            for base, end, data in stored_batches(directory)
            if base < upper_offset
        }

    problems: list[str] = []
    reference = below(directories[0])
    for other in directories[1:]:
        theirs = below(other)
        for base in sorted(set(reference) | set(theirs)):
            mine, their = reference.get(base), theirs.get(base)
            if mine != their:
                what = "missing" if mine is None or their is None else "different bytes"
                problems.append(f"{directories[0]} vs {other}: batch at offset {base}: {what}")
    return problems


def latest_values(directory: Path, upper_offset: int) -> dict[bytes, tuple[int, bytes]]:
    """Every key's latest (offset, value) below `upper_offset`; deleted keys left out."""
    latest: dict[bytes, tuple[int, bytes | None]] = {}
    for base, _, data in stored_batches(directory):
        if base >= upper_offset:
            break
        try:
            _, records = records_of(data)
        except UnsupportedCompression:
            continue
        for record in records:
            if record.key is not None and record.offset < upper_offset:
                latest[record.key] = (record.offset, value_of(record))
    return {k: (o, v) for k, (o, v) in latest.items() if v is not None}


def compare_compacted(directories: Sequence[Path], upper_offset: int) -> list[str]:
    """Keys whose latest (offset, value) below `upper_offset` differs between the
    first replica and each other (empty when they agree)."""
    problems: list[str] = []
    reference = latest_values(directories[0], upper_offset)
    for other in directories[1:]:
        theirs = latest_values(other, upper_offset)
        for key in sorted(set(reference) | set(theirs)):
            mine, their = reference.get(key), theirs.get(key)
            if mine != their:
                problems.append(
                    f"{directories[0]} vs {other}: key {key!r}: "
                    f"latest {_show(mine)} vs {_show(their)}"
                )
    return problems


def _show(latest: tuple[int, bytes] | None) -> str:
    return "none" if latest is None else f"offset {latest[0]} ({len(latest[1])} bytes)"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directories", nargs="+", type=Path, help="replica directories (topic-N)")
    parser.add_argument("--below", type=int, required=True, help="the high watermark")
    parser.add_argument(
        "--compacted", action="store_true", help="compare each key's latest (offset, value)"
    )
    args = parser.parse_args(argv)
    compare = compare_compacted if args.compacted else compare_replicas
    problems = compare(args.directories, args.below)
    for line in problems:
        print(line)
    if not problems:
        same = "agree on every key's latest value" if args.compacted else "byte-identical"
        print(f"{len(args.directories)} replicas {same} below offset {args.below}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
