"""The export's schema: the contract between `quorumctl log export` and the Spark job.

An export directory holds one sub-directory per table (Parquet parts or JSON
Lines parts) and `schema.json` beside them, written from `TABLES` below. Every
row carries `schema_version`; a reader refuses a version it does not know
rather than guess at renamed or re-typed columns. Adding a column is a new
version. Times are Unix milliseconds on the clock named in the column's doc:
`controller` clocks (the leader's append time, the active controller's commit
time) or the `broker`'s own clock, which may be skewed; the job estimates each
broker's offset from the fetch exchanges and corrects for it.

Nothing here imports the quorum: this module is read by the exporter and by the
analytics alike, and the analytics read exports only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1
SCHEMA_FILE = "schema.json"
FORMATS = ("parquet", "jsonl")


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    type: str  # int32, int64, double, string, bool
    nullable: bool
    doc: str


def _c(name: str, type_: str, doc: str, nullable: bool = False) -> Column:
    return Column(name, type_, nullable, doc)


VERSION_COLUMN = _c("schema_version", "int32", "this export's schema version")

TABLES: dict[str, tuple[Column, ...]] = {
    # One row per committed record (control records included), in offset order.
    "log": (
        VERSION_COLUMN,
        _c("offset", "int64", "the record's offset in the metadata log"),
        _c("leader_epoch", "int32", "the epoch of the leader that appended it"),
        _c("batch_base_offset", "int64", "the offset of the first record of its batch"),
        _c(
            "record_type",
            "string",
            "register_broker, topic, partition_change, ..., leader_change (control)",
        ),
        _c("control", "bool", "a Raft control record (no metadata)"),
        _c(
            "entity_type",
            "string",
            "broker, topic, partition, config, acl, feature, producer_ids, quorum, none",
        ),
        _c(
            "entity",
            "string",
            "the entity's key: broker id, topic name or id, "
            "topic:partition, config resource type:name:key, ACL id, feature name",
        ),
        _c("topic", "string", "topic name when known (else its id)", nullable=True),
        _c("partition", "int32", "partition id", nullable=True),
        _c("broker_id", "int32", "broker id for broker records", nullable=True),
        _c("append_time_ms", "int64", "controller clock: when the leader sealed the batch"),
        _c(
            "commit_time_ms",
            "int64",
            "controller clock: when the active controller saw it "
            "commit, as it told the brokers; null when no broker trace has it",
            nullable=True,
        ),
    ),
    # One row per record a broker applied, from its apply trace.
    "apply": (
        VERSION_COLUMN,
        _c("broker_id", "int32", "the broker that applied it"),
        _c("offset", "int64", "the record's offset"),
        _c("leader_epoch", "int32", "the record's epoch"),
        _c("record_type", "string", "as in the log table"),
        _c(
            "state",
            "string",
            "the broker's state when it applied it (FENCED, ONLINE, ...); "
            "empty for traces written before states were recorded",
        ),
        _c("apply_time_ms", "int64", "broker clock: applied to the broker's cache"),
        _c(
            "commit_time_ms",
            "int64",
            "controller clock: the commit time the controller sent; null when it did not know it",
            nullable=True,
        ),
        _c(
            "fetch_send_time_ms",
            "int64",
            "broker clock: the fetch that brought it left",
            nullable=True,
        ),
        _c(
            "controller_receive_time_ms",
            "int64",
            "controller clock: that fetch arrived",
            nullable=True,
        ),
        _c("controller_send_time_ms", "int64", "controller clock: its answer left", nullable=True),
        _c("receive_time_ms", "int64", "broker clock: the answer arrived"),
        _c("controller_id", "int32", "the controller that answered", nullable=True),
        _c(
            "trace_clock_offset_ms",
            "double",
            "the agent's one-exchange estimate of controller minus broker clock",
        ),
        _c(
            "replay",
            "bool",
            "the broker had applied this offset before: a re-apply after it crashed between "
            "its trace and its cache flush (analyses count the first)",
        ),
    ),
    # One row per MetadataFetch exchange (with records or not): clock-offset samples.
    "fetches": (
        VERSION_COLUMN,
        _c("broker_id", "int32", "the broker that fetched"),
        _c("fetch_send_time_ms", "int64", "broker clock: the request left"),
        _c("controller_receive_time_ms", "int64", "controller clock: the request arrived"),
        _c("controller_send_time_ms", "int64", "controller clock: the answer left"),
        _c("receive_time_ms", "int64", "broker clock: the answer arrived"),
        _c("controller_id", "int32", "the controller that answered"),
        _c(
            "high_watermark",
            "int64",
            "the high watermark in the answer; -1: not known "
            "(an exchange taken from apply rows, for agents that kept no events file)",
        ),
        _c("records", "int32", "records in the answer"),
    ),
    # Broker lifecycle, as the controllers committed it and as the agents lived it.
    "lifecycle": (
        VERSION_COLUMN,
        _c("broker_id", "int32", "the broker"),
        _c(
            "event",
            "string",
            "registered, fenced, unfenced, controlled_shutdown, "
            "unregistered (controller); started, restarted, registered, fenced, unfenced, "
            "controlled_shutdown, stopped, snapshot_load_started, snapshot_loaded (broker)",
        ),
        _c("source", "string", "controller (a committed record) or broker (its own trace)"),
        _c("clock", "string", "whose clock time_ms is on: controller or broker"),
        _c("time_ms", "int64", "when it happened"),
        _c(
            "offset",
            "int64",
            "controller: the record's offset; broker: its next offset to apply",
            nullable=True,
        ),
        _c("broker_epoch", "int64", "the broker epoch concerned", nullable=True),
    ),
}


class SchemaError(Exception):
    """An export this code cannot read: missing, foreign or of an unknown version."""


def schema_document(format_: str, **facts: Any) -> dict[str, Any]:
    """The content of `schema.json`: version, format, facts about the run, tables."""
    return {
        "schema_version": SCHEMA_VERSION,
        "format": format_,
        **facts,
        "tables": {
            name: [
                {"name": c.name, "type": c.type, "nullable": c.nullable, "doc": c.doc}
                for c in columns
            ]
            for name, columns in TABLES.items()
        },
    }


def read_schema(export_dir: Path) -> dict[str, Any]:
    """`schema.json` of an export, checked: refuses what this version cannot read."""
    if not export_dir.is_dir():
        raise SchemaError(f"{export_dir}: no such export directory")
    path = export_dir / SCHEMA_FILE
    if not path.is_file():
        raise SchemaError(
            f"{export_dir} is not an export: no {SCHEMA_FILE} (make one with "
            "`quorumctl log export`)"
        )
    try:
        document: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise SchemaError(f"{path}: unreadable ({err})") from err
    version = document.get("schema_version")
    if version != SCHEMA_VERSION:
        raise SchemaError(
            f"{path}: schema version {version!r} is not supported (this build reads "
            f"version {SCHEMA_VERSION}); export again with a matching quorumctl"
        )
    if document.get("format") not in FORMATS:
        raise SchemaError(f"{path}: unknown format {document.get('format')!r}")
    for table in TABLES:
        if not (export_dir / table).is_dir():
            raise SchemaError(f"{export_dir}: table {table}/ is missing")
    return document
