"""`quorumctl log export`: the committed log and the brokers' traces, for analytics.

Writes the tables of `analytics/schema.py` (log, apply, fetches, lifecycle) as
Parquet or JSON Lines, with `schema.json` beside them. The log comes from a
controller's directory (offline) or from the leader over the wire
(`--bootstrap-controller`); the traces come from the brokers' directories.

Offline the high watermark is unknown, so the export keeps the log up to the
highest offset any broker applied or cached (brokers only ever get committed
records) and says how much of the tail it left out. Online it stops at the high
watermark the leader reported when the export began.

Memory stays flat: the log is read batch by batch, the traces line by line and
merged by offset, and every table is written in bounded row groups.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from analytics.schema import FORMATS, SCHEMA_VERSION, schema_document
from quorum.cli.bootstrap import parse_bootstrap
from quorum.cli.data_dir import OfflineError, partition_dir, snapshot_store
from quorum.cli.export_sources import (
    EVENTS_FILE,
    TRACE_FILE,
    ApplyRow,
    LogReadReport,
    TraceRun,
    broker_id_of,
    cluster_id_of,
    describe_leader,
    entity_of,
    fetch_committed,
    lifecycle_of,
    merged_applies,
    read_events,
    scan_trace,
    stream_log,
)
from quorum.cli.export_writer import ExportFailed, TableWriter, export_directory, write_schema
from quorum.controller.record_codec import MetadataRecordError, decode, record_type
from quorum.raft.records import Batch


class ExportError(click.ClickException):
    exit_code = 1


@dataclass
class Brokers:
    """What the broker directories hold, learned before the log is read."""

    runs: list[TraceRun] = field(default_factory=list)
    events: list[Path] = field(default_factory=list)
    # Brokers without an events file: their fetch exchanges come from the apply rows.
    exchanges_from_applies: set[int] = field(default_factory=set)
    committed_end: int = 0  # every offset below it reached some broker: committed
    notes: list[str] = field(default_factory=list)


def survey_brokers(broker_dirs: list[Path], cluster_id: str) -> Brokers:
    found = Brokers()
    for directory in broker_dirs:
        theirs = cluster_id_of(directory)
        if theirs != cluster_id:
            raise ExportFailed(
                f"broker directory {directory} belongs to cluster {theirs!r}, the log to "
                f"{cluster_id!r}; nothing was exported"
            )
        trace = directory / TRACE_FILE
        if trace.is_file():
            scan = scan_trace(trace)
            found.runs += scan.runs
            found.committed_end = max(found.committed_end, scan.max_offset + 1)
            if scan.torn_tail:
                found.notes.append(f"{trace}: torn last line left out")
        else:
            found.notes.append(f"{directory}: no {TRACE_FILE}")
        if (directory / EVENTS_FILE).is_file():
            found.events.append(directory / EVENTS_FILE)
        else:
            found.exchanges_from_applies.add(broker_id_of(directory))
        cache = directory / "__cluster_metadata-0"
        if cache.is_dir():
            report = LogReadReport()
            for _ in stream_log(cache, report, headers_only=True):
                pass
            found.committed_end = max(found.committed_end, report.end_offset)
    return found


@dataclass
class Totals:
    log: int = 0
    apply: int = 0
    fetches: int = 0
    lifecycle: int = 0
    left_out: int = 0


def export(
    out: Path,
    format_: str,
    cluster_id: str,
    batches: Iterator[Batch],
    committed_end: int | None,
    brokers: Brokers,
    facts: dict[str, Any],
) -> Totals:
    """Write every table into `out` (all or nothing); `committed_end` None: no cut."""
    totals = Totals()
    with export_directory(out) as scratch:
        log = TableWriter(scratch, "log", format_)
        apply = TableWriter(scratch, "apply", format_)
        fetches = TableWriter(scratch, "fetches", format_)
        lifecycle = TableWriter(scratch, "lifecycle", format_)
        applies = mark_replays(merged_applies(brokers.runs))
        pending: ApplyRow | None = next(applies, None)
        exchanges = ExchangesFromApplies(fetches, brokers.exchanges_from_applies)
        topics: dict[str, str] = {}
        end = committed_end if committed_end is not None else 1 << 62
        for batch in batches:
            for offset, data in enumerate(batch.records, start=batch.base_offset):
                if offset >= end:
                    totals.left_out += 1
                    continue
                commit: int | None = None
                while pending is not None and pending[1] <= offset:
                    apply.add(pending)
                    exchanges.note(pending)
                    if pending[1] == offset and pending[6]:
                        commit = pending[6] if commit is None else min(commit, pending[6])
                    pending = next(applies, None)
                log.add(_log_row(batch, offset, data, commit, topics, lifecycle))
        while pending is not None:
            apply.add(pending)
            exchanges.note(pending)
            pending = next(applies, None)
        for path in brokers.events:
            for event in read_events(path, cluster_id):
                if event["event"] == "fetch":
                    fetches.add(_fetch_row(event))
                else:
                    lifecycle.add(
                        (
                            int(event["broker_id"]),
                            str(event["event"]),
                            "broker",
                            "broker",
                            int(event["time_ms"]),
                            event.get("offset"),
                            event.get("broker_epoch"),
                        )
                    )
        for writer in (log, apply, fetches, lifecycle):
            writer.close()
        totals.log, totals.apply = log.rows, apply.rows
        totals.fetches, totals.lifecycle = fetches.rows, lifecycle.rows
        write_schema(
            scratch,
            schema_document(
                format_,
                cluster_id=cluster_id,
                exported_at_ms=int(time.time() * 1000),
                committed_end_offset=committed_end,
                rows={
                    "log": log.rows,
                    "apply": apply.rows,
                    "fetches": fetches.rows,
                    "lifecycle": lifecycle.rows,
                },
                **facts,
            ),
        )
    return totals


def mark_replays(applies: Iterator[ApplyRow]) -> Iterator[ApplyRow]:
    """Each apply row with `replay` appended: whether its broker applied that offset
    before. The merge puts all applies of one offset together, a broker's earlier
    runs (earlier in its trace) first, so one small set per offset suffices."""
    current, seen = -1, set()
    for row in applies:
        if row[1] != current:
            current, seen = row[1], set()
        yield (*row, row[0] in seen)
        seen.add(row[0])


class ExchangesFromApplies:
    """Fetch rows for brokers that kept no events file (an older agent): each
    exchange their apply rows name, once per run of rows that share it."""

    def __init__(self, fetches: TableWriter, brokers: set[int]) -> None:
        self.fetches = fetches
        self.brokers = brokers
        self.last: dict[int, tuple[Any, ...]] = {}

    def note(self, row: ApplyRow) -> None:
        broker = row[0]
        if broker not in self.brokers or row[7] is None:
            return
        exchange = (row[7], row[8], row[9], row[10], row[11])
        if self.last.get(broker) != exchange:
            self.last[broker] = exchange
            controller = row[11] if row[11] is not None else -1
            self.fetches.add((broker, row[7], row[8], row[9], row[10], controller, -1, 0))


def _log_row(
    batch: Batch,
    offset: int,
    data: bytes,
    commit: int | None,
    topics: dict[str, str],
    lifecycle: TableWriter,
) -> tuple[Any, ...]:
    if batch.control:
        kind, entity = "leader_change", ("quorum", "", None, None, None)
    else:
        try:
            record = decode(data, offset)
        except MetadataRecordError as err:
            raise ExportFailed(f"{err}; nothing was exported") from err
        kind = record_type(record)
        entity = entity_of(record, kind, topics)
        when = commit if commit is not None else batch.append_time_ms
        for broker_id, event, broker_epoch in lifecycle_of(record, kind):
            lifecycle.add(
                (broker_id, event, "controller", "controller", when, offset, broker_epoch)
            )
    return (
        offset,
        batch.epoch,
        batch.base_offset,
        kind,
        batch.control,
        *entity,
        batch.append_time_ms,
        commit,
    )


def _fetch_row(event: dict[str, Any]) -> tuple[Any, ...]:
    return (
        int(event["broker_id"]),
        int(event["fetch_send_time_ms"]),
        int(event["controller_receive_time_ms"]),
        int(event["controller_send_time_ms"]),
        int(event["receive_time_ms"]),
        int(event.get("controller_id", -1)),
        int(event.get("high_watermark", 0)),
        int(event.get("records", 0)),
    )


@click.command("export")
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    help="A controller's metadata.log.dir to read the log from (offline).",
)
@click.option(
    "--bootstrap-controller",
    "bootstrap",
    metavar="HOST:PORT[,HOST:PORT...]",
    help="Read the committed log from the running cluster's leader instead.",
)
@click.option(
    "--cluster-id",
    default="",
    help="With --bootstrap-controller: the cluster's id (default: the brokers').",
)
@click.option(
    "--broker-dir",
    "broker_dirs",
    multiple=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="A broker's metadata.log.dir: its apply trace and events (repeatable).",
)
@click.option(
    "--out",
    required=True,
    type=click.Path(path_type=Path),
    help="The export directory to create (must not exist or be empty).",
)
@click.option(
    "--format",
    "format_",
    type=click.Choice(FORMATS),
    default="parquet",
    show_default=True,
    help="Parquet (pyarrow) or JSON Lines.",
)
def export_command(
    directory: Path | None,
    bootstrap: str | None,
    cluster_id: str,
    broker_dirs: tuple[Path, ...],
    out: Path,
    format_: str,
) -> None:
    """Export the committed metadata log with the brokers' apply traces and lifecycle
    events, in a versioned schema, for `python -m analytics.convergence`.

    \b
    Examples:
      quorumctl log export --dir data/controller-1 --broker-dir data/broker-101 \\
          --broker-dir data/broker-102 --out export/
      quorumctl log export --bootstrap-controller 127.0.0.1:9093 \\
          --broker-dir data/broker-101 --out export/ --format jsonl
    """
    if (directory is None) == (bootstrap is None):
        raise click.UsageError("give exactly one of --dir (offline) and --bootstrap-controller")
    for d in [*broker_dirs, *([directory] if directory else [])]:
        if not d.is_dir():
            raise ExportError(f"{d}: no such directory")
    try:
        totals = _run(directory, bootstrap, cluster_id, list(broker_dirs), out, format_)
    except (ExportFailed, OfflineError) as err:
        raise ExportError(str(err.message if isinstance(err, OfflineError) else err)) from err
    click.echo(
        f"exported {totals.log} committed records, {totals.apply} applies, "
        f"{totals.fetches} fetch exchanges and {totals.lifecycle} lifecycle events "
        f"to {out} ({format_}, schema version {SCHEMA_VERSION})"
    )


def _run(
    directory: Path | None,
    bootstrap: str | None,
    cluster_id: str,
    broker_dirs: list[Path],
    out: Path,
    format_: str,
) -> Totals:
    if directory is not None:
        cluster_id = cluster_id_of(directory)
        brokers = survey_brokers(broker_dirs, cluster_id)
        partition = partition_dir(directory)
        report = LogReadReport()
        committed_end: int | None = brokers.committed_end
        store = snapshot_store(partition)
        if store is not None and store.snapshot_ids():
            committed_end = max(brokers.committed_end, store.snapshot_ids()[-1].end_offset)
        elif not broker_dirs:
            committed_end = None
            click.echo(
                "note: offline and without --broker-dir the high watermark is unknown: "
                "the whole log on disk is exported, its tail may not be committed",
                err=True,
            )
        facts = {"source": "offline", "controller_dir": str(directory)}
        totals = export(
            out, format_, cluster_id, stream_log(partition, report), committed_end, brokers, facts
        )
        if report.torn_reason:
            click.echo(f"note: torn tail left out ({report.torn_reason})", err=True)
        if totals.left_out:
            click.echo(
                f"note: offline the high watermark is unknown; {totals.left_out} records "
                f"from offset {committed_end} on reached no broker and were left out",
                err=True,
            )
    else:
        addresses = parse_bootstrap(bootstrap)
        if not cluster_id:
            if not broker_dirs:
                raise ExportFailed("--cluster-id is needed when no --broker-dir is given")
            cluster_id = cluster_id_of(broker_dirs[0])
        brokers = survey_brokers(broker_dirs, cluster_id)
        leader = describe_leader(addresses, cluster_id)
        facts = {
            "source": "online",
            "leader_id": leader.leader_id,
            "high_watermark": leader.high_watermark,
        }
        batches = fetch_committed(addresses, cluster_id, leader)
        totals = export(out, format_, cluster_id, batches, leader.high_watermark, brokers, facts)
    for note in brokers.notes:
        click.echo(f"note: {note}", err=True)
    return totals
