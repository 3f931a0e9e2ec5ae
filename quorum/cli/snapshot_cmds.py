"""`quorumctl snapshot list|inspect`: a node's RocksDB snapshots, offline."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import click

from quorum.cli.bootstrap import print_rows, render_json, render_table
from quorum.cli.data_dir import OfflineError, ReadOnlySnapshots, partition_dir, snapshot_store
from quorum.cli.log_tools import dir_option, output_option, render_compact
from quorum.cli.proto_json import proto_to_dict
from quorum.controller.record_codec import decode, record_type
from quorum.raft.records import SnapshotId
from snapshots.errors import SnapshotCorruptionError

_DIGITS = re.compile(r"[0-9]+")


@click.group("snapshot")
def snapshot_group() -> None:
    """List and inspect metadata snapshots offline.

    \b
    Example:
      quorumctl snapshot list --dir data/controller-1
      quorumctl snapshot inspect --dir data/controller-1 --snapshot latest
    """


def _store(directory: Path) -> ReadOnlySnapshots:
    store = snapshot_store(partition_dir(directory))
    if store is None or not store.snapshot_ids():
        raise OfflineError(f"no snapshots under {directory}")
    return store


def manifest_row(store: ReadOnlySnapshots, snapshot_id: SnapshotId) -> dict[str, Any]:
    m = store.manifest(snapshot_id)
    return {
        "EndOffset": snapshot_id.end_offset, "Epoch": snapshot_id.epoch,
        "Records": m.record_count, "DataBytes": m.data_bytes,
        "CreatedTimeMs": m.created_time_ms, "Checksum": f"{m.checksum:08x}",
    }  # fmt: skip


@snapshot_group.command("list")
@dir_option
@output_option
def list_snapshots(directory: Path, output: str) -> None:
    """Every snapshot, oldest first, from its manifest.

    \b
    Example:
      quorumctl snapshot list --dir data/broker-101 --output json
    """
    store = snapshot_store(partition_dir(directory))
    ids = store.snapshot_ids() if store is not None else []
    if not ids and output == "table":
        # No snapshots yet is a state, not a failure: say so and exit 0 (JSON: []).
        click.echo(f"no snapshots under {directory}", err=True)
    print_rows([manifest_row(store, s) for s in ids] if store is not None else [], output)


@snapshot_group.command("inspect")
@dir_option
@output_option
@click.option("--snapshot", "which", default="latest", show_default=True,
              metavar="END_OFFSET-EPOCH|latest", help="Which snapshot.")  # fmt: skip
@click.option("--keys-only", is_flag=True, help="Keys and record types, not bodies.")
def inspect(directory: Path, output: str, which: str, keys_only: bool) -> None:
    """One snapshot: its manifest, then every record decoded, with the checksum verified.

    \b
    Example:
      quorumctl snapshot inspect --dir data/controller-1 --snapshot 1200-3 --keys-only
    """
    store = _store(directory)
    ids = store.snapshot_ids()
    if which == "latest":
        chosen = ids[-1]
    else:
        end, sep, epoch = which.partition("-")
        # ASCII digits only: str.isdigit() also takes "²", which int() then refuses.
        if not sep or not _DIGITS.fullmatch(end) or not _DIGITS.fullmatch(epoch):
            raise click.BadParameter(f"{which!r} is not END_OFFSET-EPOCH", param_hint="--snapshot")
        chosen = SnapshotId(int(end), int(epoch))
        if chosen not in ids:
            listed = ", ".join(f"{s.end_offset}-{s.epoch}" for s in ids)
            raise OfflineError(f"no snapshot {which} (have: {listed})")
    records = []
    try:
        for key, value in store.read(chosen):
            record = decode(value, chosen.end_offset - 1)
            kind = record_type(record)
            entry: dict[str, Any] = {"Key": key.decode(errors="replace"), "Type": kind}
            if not keys_only:
                entry["Record"] = proto_to_dict(getattr(record, kind))
            records.append(entry)
    except SnapshotCorruptionError as err:
        raise OfflineError(f"corrupt snapshot: {err}") from err
    manifest = manifest_row(store, chosen)
    if output == "json":
        click.echo(render_json({"Manifest": manifest, "Records": records}))
        return
    click.echo(render_table(list(manifest), [list(manifest.values())]))
    for entry in records:
        body = f" {render_compact(entry['Record'])}" if "Record" in entry else ""
        click.echo(f"| {entry['Key']} {entry['Type']}{body}")
