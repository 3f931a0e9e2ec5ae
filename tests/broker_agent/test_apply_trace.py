"""The apply trace's lines are one JSON object per applied record, byte for byte
what `json.dumps` makes of the record's fields followed by the fetch's (the
convergence analytics read them)."""

from __future__ import annotations

import json
from pathlib import Path

from broker_agent.apply_trace import ApplyTrace, FetchExchange
from broker_agent.metadata_cache import Applied


def expected_line(
    broker_id: int, a: Applied, commit_ms: int, extra: dict[str, object], offset_ms: float
) -> str:
    return json.dumps(
        {
            "broker_id": broker_id,
            "offset": a.offset,
            "epoch": a.epoch,
            "record_type": a.record_type,
            "append_time_ms": a.append_time_ms,
            "commit_time_ms": commit_ms,
            "receive_time_ms": 1_700_000_000_050,
            "apply_time_ms": 1_700_000_000_051,
            "clock_offset_ms": offset_ms,
            **extra,
        },
        separators=(",", ":"),
    )


def test_lines_are_the_records_and_fetch_fields_as_json(tmp_path: Path) -> None:
    trace = ApplyTrace(tmp_path, 101, "cluster-x")
    applied = [
        Applied(40, 3, "topic", 1_700_000_000_000, 40),
        Applied(41, 3, "partition", 1_700_000_000_000, 40),
        Applied(42, 4, "partition_change", 1_700_000_000_010, 42),  # no commit time known
        Applied(43, 4, 'odd "type"\n', -1, 43),
    ]
    commits = {40: 1_700_000_000_020, 43: 0}
    exchange = FetchExchange(1_700_000_000_000, 1_700_000_000_030, 1_700_000_000_040,
                             1_700_000_000_050, 2)  # fmt: skip
    trace.write(applied, commits, 1_700_000_000_050, 1_700_000_000_051, -2.5, exchange, "ONLINE")
    trace.write(applied[:1], commits, 1_700_000_000_050, 1_700_000_000_051, 0.0)
    trace.write([], commits, 1_700_000_000_050, 1_700_000_000_051, 0.0)
    trace.close()
    lines = (tmp_path / "apply-trace.jsonl").read_text().splitlines()
    with_exchange = {"state": "ONLINE", **exchange.fields()}
    assert lines == [
        *(
            expected_line(101, a, commits.get(a.batch_base, 0), with_exchange, -2.5)
            for a in applied
        ),
        expected_line(101, applied[0], commits[40], {"state": ""}, 0.0),
    ]
