"""The apply trace: one JSON line per applied record, for the convergence analytics.

Each line has the record's offset, epoch and type; the leader's append time and
the active controller's commit time (its clock); the broker's receive and apply
times (its clock); and the fetch's estimate of the controller-minus-broker clock
offset (NTP's round-trip formula over the four timestamps of one MetadataFetch),
so commit-to-apply lag can be computed as `apply + clock_offset - commit` even
when the clocks disagree. Append-only: written and flushed once per fetch.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from broker_agent.metadata_cache import Applied

TRACE_FILE = "apply-trace.jsonl"


def clock_offset_ms(
    send_ms: int, ctrl_receive_ms: int, ctrl_send_ms: int, receive_ms: int
) -> float:
    """Controller clock minus broker clock; the time the controller held the fetch
    (long poll) cancels out."""
    return ((ctrl_receive_ms - send_ms) + (ctrl_send_ms - receive_ms)) / 2


class ApplyTrace:
    def __init__(self, directory: Path, broker_id: int) -> None:
        self.path = directory / TRACE_FILE
        self.broker_id = broker_id
        self._file: IO[str] = self.path.open("a", encoding="utf-8")

    def write(
        self,
        applied: Sequence[Applied],
        commit_times: dict[int, int],
        receive_ms: int,
        apply_ms: int,
        offset_ms: float,
    ) -> None:
        """`commit_times` maps each record's batch base offset to its commit time."""
        lines = []
        for a in applied:
            lines.append(
                json.dumps(
                    {
                        "broker_id": self.broker_id,
                        "offset": a.offset,
                        "epoch": a.epoch,
                        "record_type": a.record_type,
                        "append_time_ms": a.append_time_ms,
                        "commit_time_ms": commit_times.get(a.batch_base, 0),
                        "receive_time_ms": receive_ms,
                        "apply_time_ms": apply_ms,
                        "clock_offset_ms": offset_ms,
                    },
                    separators=(",", ":"),
                )
            )
        if lines:
            self._file.write("\n".join(lines) + "\n")
            self._file.flush()

    def close(self) -> None:
        self._file.close()
