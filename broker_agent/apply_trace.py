"""The apply trace: one JSON line per applied record, for the convergence analytics.

Each line has the record's offset, epoch and type; the leader's append time and
the active controller's commit time (its clock); the broker's receive and apply
times (its clock); and the fetch's estimate of the controller-minus-broker clock
offset (NTP's round-trip formula over the four timestamps of one MetadataFetch),
so commit-to-apply lag can be computed as `apply + clock_offset - commit` even
when the clocks disagree. Append-only: written and flushed once per fetch.

Each line also carries the broker's state when it applied the record and the
four raw timestamps of the MetadataFetch exchange that brought it, so the
analytics can estimate the clock offset robustly over many exchanges instead
of trusting any single one. Beside it, `broker-events.jsonl` holds the broker's
lifecycle (started or restarted, registered, fenced, unfenced, controlled
shutdown, snapshot loads) and every fetch exchange, records or not, so idle
brokers keep giving clock-offset samples.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from broker_agent.metadata_cache import Applied

TRACE_FILE = "apply-trace.jsonl"
EVENTS_FILE = "broker-events.jsonl"


def clock_offset_ms(
    send_ms: int, ctrl_receive_ms: int, ctrl_send_ms: int, receive_ms: int
) -> float:
    """Controller clock minus broker clock; the time the controller held the fetch
    (long poll) cancels out."""
    return ((ctrl_receive_ms - send_ms) + (ctrl_send_ms - receive_ms)) / 2


@dataclass(frozen=True, slots=True)
class FetchExchange:
    """The four clocks of one MetadataFetch: broker send and receive (broker clock),
    controller receive and send (the answering controller's clock)."""

    send_ms: int
    controller_receive_ms: int
    controller_send_ms: int
    receive_ms: int
    controller_id: int

    def fields(self) -> dict[str, int]:
        return {
            "fetch_send_time_ms": self.send_ms,
            "controller_receive_time_ms": self.controller_receive_ms,
            "controller_send_time_ms": self.controller_send_ms,
            "receive_time_ms": self.receive_ms,
            "controller_id": self.controller_id,
        }


class ApplyTrace:
    def __init__(self, directory: Path, broker_id: int, cluster_id: str = "") -> None:
        self.path = directory / TRACE_FILE
        self.broker_id = broker_id
        self.cluster_id = cluster_id
        self._file: IO[str] = self.path.open("a", encoding="utf-8")
        self._events: IO[str] = (directory / EVENTS_FILE).open("a", encoding="utf-8")
        self._type_names: dict[str, str] = {}  # record type -> its JSON string

    def event(self, kind: str, time_ms: int, **fields: object) -> None:
        """One lifecycle event or fetch exchange (`kind`), flushed at once."""
        line = {"broker_id": self.broker_id, "cluster_id": self.cluster_id, "event": kind,
                "time_ms": time_ms, **fields}  # fmt: skip
        self._events.write(json.dumps(line, separators=(",", ":")) + "\n")
        self._events.flush()

    def write(
        self,
        applied: Sequence[Applied],
        commit_times: dict[int, int],
        receive_ms: int,
        apply_ms: int,
        offset_ms: float,
        exchange: FetchExchange | None = None,
        state: str = "",
    ) -> None:
        """`commit_times` maps each record's batch base offset to its commit time.

        The fields every line of one fetch shares are encoded once, and each
        line's own (all integers but the record type) formatted in front of
        them: the same bytes as one `json.dumps` per record, which was a third
        of a broker's metadata apply at 200 records a fetch (issue 36)."""
        if not applied:
            return
        shared = json.dumps(
            {
                "receive_time_ms": receive_ms,
                "apply_time_ms": apply_ms,
                "clock_offset_ms": offset_ms,
                "state": state,
                **(exchange.fields() if exchange else {}),
            },
            separators=(",", ":"),
        )[1:]
        head = f'{{"broker_id":{self.broker_id:d},"offset":'
        names = self._type_names
        lines = []
        for a in applied:
            name = names.get(a.record_type)
            if name is None:
                name = names[a.record_type] = json.dumps(a.record_type)
            lines.append(
                f'{head}{a.offset:d},"epoch":{a.epoch:d},"record_type":{name},'
                f'"append_time_ms":{a.append_time_ms:d},'
                f'"commit_time_ms":{commit_times.get(a.batch_base, 0):d},{shared}'
            )
        self._file.write("\n".join(lines) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()
        self._events.close()
