"""Hand-built exports whose true lags and clock offsets are known exactly.

Written with the exporter's own writer, so they are exports like any other.
One controller (id 1) keeps the reference clock; each broker's clock is
`true - offset`, so its estimated offset (controller minus broker) should come
out as `offset`. Record i commits at `T0 + 50 ms * i`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from analytics.schema import schema_document
from quorum.cli.export_writer import TableWriter, write_schema

T0 = 1_800_000_000_000
STEP_MS = 50
CONTROLLER = 1


@dataclass
class Handmade:
    records: int
    true_lags: dict[int, list[float]] = field(default_factory=dict)  # broker -> per offset
    types: list[str] = field(default_factory=list)
    log: list[tuple[Any, ...]] = field(default_factory=list)
    applies: list[tuple[Any, ...]] = field(default_factory=list)
    fetches: list[tuple[Any, ...]] = field(default_factory=list)
    lifecycle: list[tuple[Any, ...]] = field(default_factory=list)

    def commit(self, offset: int) -> int:
        return T0 + STEP_MS * offset


def build(records: int = 200) -> Handmade:
    h = Handmade(records)
    h.types = ["topic" if i % 4 == 0 else "partition" for i in range(records)]
    for i in range(records):
        entity = ("topic", f"t{i}", f"t{i}", None, None)
        if h.types[i] == "partition":
            entity = ("partition", f"t{i - i % 4}:{i % 4}", f"t{i - i % 4}", i % 4, None)
        h.log.append((i, 3, i, h.types[i], False, *entity, h.commit(i) - 2, h.commit(i)))
    return h


def add_broker(
    h: Handmade,
    broker_id: int,
    offset_ms: int,
    lags: list[int],
    delays: random.Random | None = None,
) -> None:
    """Broker `broker_id` applies record i `lags[i]` ms after its commit (true time).

    Each record comes with its own fetch exchange. Without `delays` the two legs
    take the same 2 ms, so the estimate is exact; with it, the legs are random
    and unequal and one exchange in ten is an outlier of up to 300 ms."""
    h.true_lags[broker_id] = [float(x) for x in lags]
    for i, lag in enumerate(lags):
        commit = h.commit(i)
        if delays is None:
            there = back = 2
        else:
            there, back = delays.randint(0, 4), delays.randint(0, 4)
            if delays.random() < 0.1:
                there += delays.randint(50, 300)
            if delays.random() < 0.1:
                back += delays.randint(50, 300)
        # The answer leaves when the record commits (a parked fetch); it must
        # arrive before the apply, so the apply lag bounds the way back.
        back = min(back, max(lag - 1, 0))
        sent_true = commit - there - 1
        t1, t2, t3 = sent_true - offset_ms, sent_true + there, commit
        t4 = commit + back - offset_ms
        apply_ = commit + lag - offset_ms
        h.applies.append((
            broker_id, i, 3, h.types[i], "ONLINE", apply_, commit, t1, t2, t3, t4, CONTROLLER,
            float(((t2 - t1) + (t3 - t4)) / 2),
            False,
        ))  # fmt: skip
        h.fetches.append((broker_id, t1, t2, t3, t4, CONTROLLER, i + 1, 1))
    h.lifecycle.append((broker_id, "registered", "controller", "controller", T0 - 1000, 0, 0))


def write(h: Handmade, out: Path, format_: str = "parquet", version: int | None = None) -> Path:
    out.mkdir(parents=True)
    counts = {}
    for name, rows in (("log", h.log), ("apply", h.applies), ("fetches", h.fetches),
                       ("lifecycle", h.lifecycle)):  # fmt: skip
        writer = TableWriter(out, name, format_)
        for row in rows:
            writer.add(row)
        writer.close()
        counts[name] = writer.rows
    document = schema_document(format_, cluster_id="handmade", rows=counts, source="handmade")
    if version is not None:
        document["schema_version"] = version
    write_schema(out, document)
    return out
