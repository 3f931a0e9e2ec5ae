"""`quorumctl log dump`: every batch and record of a metadata log, decoded, as
`kafka-dump-log.sh --cluster-metadata-decoder` prints them. Offline: reads a
data directory, no cluster needed. (`log export` joins this group with the
analytics work.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from quorum.cli.bootstrap import render_json
from quorum.cli.data_dir import partition_dir, segments
from quorum.cli.lazy_group import LazyGroup
from quorum.cli.proto_json import proto_to_dict
from quorum.controller.record_codec import MetadataRecordError, decode, record_type
from quorum.raft.records import Batch, decode_leader_change


def dir_option(command: Any) -> Any:
    return click.option(
        "--dir",
        "directory",
        required=True,
        type=click.Path(exists=True, file_okay=False, path_type=Path),
        help="A node's metadata.log.dir (or its __cluster_metadata-0).",
    )(command)


def output_option(command: Any) -> Any:
    return click.option(
        "--output", "-o", type=click.Choice(["table", "json"]), default="table",
        show_default=True, help="Text for people, JSON for scripts.",
    )(command)  # fmt: skip


@click.group("log", cls=LazyGroup, lazy_commands={"export": "quorum.cli.log_export:export_command"})
def log_group() -> None:
    """Read the metadata log offline.

    \b
    Example:
      quorumctl log dump --dir data/controller-1
    """


def decoded(batch: Batch, offset: int, data: bytes) -> dict[str, Any]:
    """One record: the CLI's keys (PascalCase, as every quorumctl JSON) around the
    record body, whose keys are the record schema's own field names."""
    if batch.control:
        try:
            leader, voters = decode_leader_change(data)
        except ValueError:
            return {"Offset": offset, "Type": "control", "Bytes": len(data)}
        return {"Offset": offset, "Type": "leader_change", "LeaderId": leader,
                "Voters": sorted(voters)}  # fmt: skip
    try:
        record = decode(data, offset)
    except MetadataRecordError as err:
        return {"Offset": offset, "Type": "undecodable", "Error": str(err)}
    kind = record_type(record)
    body = proto_to_dict(getattr(record, kind))
    return {"Offset": offset, "Type": kind, "Version": record.version, "Record": body}


@log_group.command("dump")
@dir_option
@output_option
@click.option("--no-records", is_flag=True, help="Batch headers only.")
def dump(directory: Path, output: str, no_records: bool) -> None:
    """Every batch (offsets, epoch, count, append time, control flag, CRC checked) and
    every record, decoded.

    \b
    Example:
      quorumctl log dump --dir data/controller-1 --output json | jq '.[0]'
    """
    batches_out: list[dict[str, Any]] = []
    for segment in segments(partition_dir(directory)):
        if output == "table":
            click.echo(f"Dumping {segment.path}")
        for position, batch in segment.batches:
            entry = {
                "Segment": segment.path.name, "Position": position,
                "BaseOffset": batch.base_offset, "LastOffset": batch.last_offset,
                "Epoch": batch.epoch, "Count": len(batch.records),
                "AppendTimeMs": batch.append_time_ms, "IsControl": batch.control,
                "CrcValid": True,
            }  # fmt: skip
            records = [] if no_records else [
                decoded(batch, i, data)
                for i, data in enumerate(batch.records, start=batch.base_offset)
            ]  # fmt: skip
            if output == "json":
                batches_out.append({**entry, "Records": records})
                continue
            click.echo(
                f"baseOffset: {batch.base_offset} lastOffset: {batch.last_offset} "
                f"count: {len(batch.records)} epoch: {batch.epoch} position: {position} "
                f"appendTime: {batch.append_time_ms} isControl: {batch.control} crcValid: true"
            )
            for r in records:
                rest = {k: v for k, v in r.items() if k not in ("Offset", "Type")}
                click.echo(f"| offset: {r['Offset']} {r['Type']}: {render_compact(rest)}")
        if segment.torn_reason is not None:
            message = f"{segment.path.name}: torn tail not shown ({segment.torn_reason})"
            click.echo(message, err=True)
    if output == "json":
        click.echo(render_json(batches_out))


def render_compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)
