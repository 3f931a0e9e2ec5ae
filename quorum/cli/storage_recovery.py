"""`quorumctl storage force-standalone`: recovery after the permanent loss of a
majority of the voters (kraft.version 1).

With a majority of the voters gone for good nothing can be committed, and no
voter change either: AddRaftVoter and RemoveRaftVoter need a majority of their
own. This is the operator's way out, in the spirit of etcd's
`--force-new-cluster`: on a *stopped* survivor, rewrite the voter set to that
one node, which then starts as a single-voter quorum, and add the others back
with `quorum add-controller`. It is a storage command (run on the node's
directory, as `kafka-storage.sh` is), not an RPC: nothing a running quorum
accepts can do this, and the directory lock proves the node is stopped.

It is loud and refuses when it can tell it would lose more than it must:

- the survivor must be the most up-to-date one: every other controller it
  knows (the voter set in its log, `controller.quorum.voters`, and any
  `--bootstrap-controller`) is asked for its log end; one that answers with a
  newer log (last epoch, then end offset) is named and nothing is written;
- a controller that answers and follows a leader means the quorum is not lost:
  nothing is written (change the voters with remove-controller instead).

What it writes: the quorum-state moves to an epoch above every epoch this
node and the answering controllers know (so the new quorum's elections and
entries can never be mistaken for an old leader's), then a VotersRecord naming
only this node is appended to its log in that epoch. On start the node elects
itself, and its LeaderChange record commits everything its log holds.

What can be lost: records the lost majority had committed that this node had
not yet fetched (and anything on a controller that could not be reached). The
lost controllers must never start again on their old disks: they would still
believe in the old voter set. They rejoin formatted afresh
(`storage format --no-initial-controllers`) and are added with add-controller.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path

import click
import grpc

from quorum.cli.bootstrap import cli_tls, connection_options, render_json, render_table
from quorum.cli.data_dir import PARTITION_DIR, SNAPSHOT_DIR
from quorum.cli.storage import _CONFIG_OPTION, OperationFailed, storage
from quorum.client import QuorumClient, QuorumClientError
from quorum.common.meta_properties import StorageFormatError, read_meta_properties
from quorum.controller_config import ConfigError, ControllerConfig, load_config
from quorum.log.errors import LogDirectoryLockedError, StorageError
from quorum.log.file_log import FileLogStore
from quorum.log.kraft_bootstrap import (
    CONTROLLER_LISTENER,
    read_kraft_version,
    voters_from_snapshot_record,
)
from quorum.log.quorum_state import FILE_NAME as QUORUM_STATE_FILE
from quorum.log.quorum_state import FileQuorumStateStore
from quorum.raft.config import QuorumStateData
from quorum.raft.records import Batch
from quorum.raft.voters import (
    Endpoint,
    Voter,
    VoterSet,
    decode_voters,
    encode_voters,
    is_voters_record,
)
from snapshots.store import FileSnapshotStore

ASK_TIMEOUT_S = 3.0
READ_BYTES = 4 << 20


@dataclass(frozen=True)
class PeerAnswer:
    """What one other controller said (or why it said nothing)."""

    node_id: int
    address: str
    reached: bool
    role: str = ""
    leader_id: int = -1
    epoch: int = 0
    log_end_epoch: int = 0
    log_end_offset: int = 0
    problem: str = ""


@dataclass(frozen=True)
class LocalLog:
    end_offset: int
    last_epoch: int
    voters: VoterSet | None


@storage.command("force-standalone")
@_CONFIG_OPTION
@click.option(
    "--force",
    is_flag=True,
    help="Do not ask for confirmation (needed without a terminal).",
)
@connection_options
def force_standalone(
    config_path: Path, force: bool, bootstrap: str | None, cluster_id: str, output: str
) -> None:
    """Make this STOPPED controller the only voter, after losing a majority for good.

    DATA LOSS: records the lost controllers had committed that this one had
    not fetched are gone. Refuses when another controller answers with a newer
    log, or answers while following a leader (the quorum is not lost). The
    lost controllers must never start on their old disks again; format them
    with --no-initial-controllers and add them back with
    `quorumctl quorum add-controller` once this one runs.

    \b
    Example:
      quorumctl storage force-standalone --config data/config/controller-1.properties
      quorum-controller --config data/config/controller-1.properties
      quorumctl quorum add-controller --config data/config/controller-2.properties
    """
    config = _load_controller(config_path)
    directory = Path(config.metadata_log_dir)
    try:
        meta = read_meta_properties(directory)
        kraft_version = read_kraft_version(directory)
    except (StorageFormatError, ValueError) as err:
        raise OperationFailed(str(err)) from err
    if cluster_id and cluster_id != meta.cluster_id:
        raise OperationFailed(f"{directory} belongs to cluster {meta.cluster_id}, not {cluster_id}")
    if kraft_version < 1 or not meta.directory_id:
        raise OperationFailed(
            f"{directory} runs kraft.version 0 (static controller.quorum.voters): there the "
            "voter set is configuration, not data; this command needs kraft.version 1"
        )
    partition = directory / PARTITION_DIR
    try:
        log_store = FileLogStore(partition)
    except LogDirectoryLockedError as err:
        raise OperationFailed(f"{err}: stop the controller first") from err
    except (OSError, StorageError) as err:
        raise OperationFailed(f"cannot open the log in {partition}: {err}") from err
    with log_store:
        local = _read_local(log_store, partition)
        state_path = partition / QUORUM_STATE_FILE
        state_store = FileQuorumStateStore(state_path, meta.cluster_id, meta.node_id)
        state = state_store.read()
        me = Voter(
            meta.node_id,
            meta.directory_id,
            (Endpoint(CONTROLLER_LISTENER, config.advertised.host, config.advertised.port),),
        )
        if local.voters is not None and local.voters.voters == (me,):
            click.echo(f"controller {meta.node_id} is already the only voter; nothing to do")
            return
        answers = asyncio.run(_ask_peers(_peers(config, local, bootstrap), meta.cluster_id))
        if output != "json":
            click.echo(_report(meta.node_id, local, answers))
        _refuse_if_unsafe(local, answers)
        if not force:
            _confirm(meta.node_id, local)
        epoch = 1 + max(state.epoch, local.last_epoch, *(a.epoch for a in answers if a.reached), 0)
        # The epoch first: a crash before the record leaves a node that can run
        # this again; the record without the epoch would not be safe.
        state_store.write(QuorumStateData(epoch, None, None))
        record = Batch(
            local.end_offset,
            epoch,
            (encode_voters(VoterSet((me,))),),
            int(time.time() * 1000),
            control=True,
        )
        log_store.append([record])
        log_store.flush(local.end_offset + 1)
    summary = {
        "NodeId": meta.node_id,
        "DirectoryId": meta.directory_id,
        "Epoch": epoch,
        "VotersRecordOffset": local.end_offset,
        "Result": "standalone",
        "Controllers": [
            {
                "NodeId": a.node_id,
                "Address": a.address,
                "Answered": a.reached,
                "Role": a.role or a.problem,
                "LogEndEpoch": a.log_end_epoch,
                "LogEndOffset": a.log_end_offset,
            }
            for a in answers
        ],
    }
    if output == "json":
        click.echo(render_json(summary))
        return
    click.echo(
        f"WARNING: controller {meta.node_id} is now the only voter (VotersRecord at offset "
        f"{local.end_offset}, epoch {epoch}).\n"
        f"Next: start it, then format each replacement controller with "
        "--no-initial-controllers and add it with `quorumctl quorum add-controller`. "
        "Never start a lost controller on its old disk."
    )


def _load_controller(config_path: Path) -> ControllerConfig:
    try:
        return load_config(config_path)
    except ConfigError as err:
        raise OperationFailed(f"invalid configuration {config_path}: {err}") from err


def _read_local(log_store: FileLogStore, partition: Path) -> LocalLog:
    """The log's end, its last epoch and the newest voter set it holds (in a
    VotersRecord, or else in the snapshot it starts after)."""
    voters: VoterSet | None = None
    snapshot_id = log_store.snapshot_id
    if snapshot_id is not None:
        for key, value in FileSnapshotStore(partition / SNAPSHOT_DIR).read(snapshot_id):
            voters = voters_from_snapshot_record(key, value)
            break
    offset = log_store.start_offset
    last_epoch = snapshot_id.epoch if snapshot_id is not None else 0
    while offset < log_store.end_offset:
        batches = log_store.read(offset, READ_BYTES)
        if not batches:
            break
        for batch in batches:
            last_epoch = batch.epoch
            if batch.control:
                for record in batch.records:
                    if is_voters_record(record):
                        voters = decode_voters(record)
            offset = batch.base_offset + len(batch.records)
    return LocalLog(log_store.end_offset, last_epoch, voters)


def _peers(config: ControllerConfig, local: LocalLog, bootstrap: str | None) -> dict[str, int]:
    """Every other controller this node knows of: address -> node id (-1 unknown)."""
    peers: dict[str, int] = {}
    for node_id, endpoint in config.voters.items():
        if node_id != config.node_id:
            peers[endpoint.address()] = node_id
    if local.voters is not None:
        for voter in local.voters.voters:
            if voter.voter_id != config.node_id:
                for e in voter.endpoints[:1]:
                    peers[f"{e.host}:{e.port}"] = voter.voter_id
    for address in (bootstrap or "").split(","):
        if address.strip() and address.strip() != config.listener.address():
            peers.setdefault(address.strip(), -1)
    return peers


async def _ask_peers(peers: dict[str, int], cluster_id: str) -> list[PeerAnswer]:
    if not peers:
        return []
    client = QuorumClient(list(peers), cluster_id, tls=cli_tls())
    try:
        return list(await asyncio.gather(*(_ask(client, a, n) for a, n in peers.items())))
    finally:
        await client.close()


async def _ask(client: QuorumClient, address: str, node_id: int) -> PeerAnswer:
    try:
        reply = await client.describe_quorum(address, timeout_s=ASK_TIMEOUT_S)
    except QuorumClientError:
        return PeerAnswer(node_id, address, False, problem="another cluster")
    except grpc.aio.AioRpcError as err:
        problem = "no answer" if err.code() == grpc.StatusCode.UNAVAILABLE else err.code().name
        return PeerAnswer(node_id, address, False, problem=problem)
    return PeerAnswer(
        reply.node_id,
        address,
        True,
        reply.role,
        reply.leader_id,
        reply.leader_epoch,
        reply.log_end_epoch,
        reply.log_end_offset,
    )


def _report(node_id: int, local: LocalLog, answers: list[PeerAnswer]) -> str:
    rows: list[list[object]] = [
        [node_id, "(this node, stopped)", "-", "-", local.last_epoch, local.end_offset]
    ]
    for a in sorted(answers, key=lambda a: (a.node_id, a.address)):
        if a.reached:
            leader = a.leader_id if a.leader_id >= 0 else "none"
            rows.append([a.node_id, a.address, a.role, leader, a.log_end_epoch, a.log_end_offset])
        else:
            rows.append([a.node_id, a.address, a.problem, "-", "-", "-"])
    headers = ["NodeId", "Address", "Role", "Leader", "LogEndEpoch", "LogEndOffset"]
    return render_table(headers, rows)


def _refuse_if_unsafe(local: LocalLog, answers: list[PeerAnswer]) -> None:
    mine = (local.last_epoch, local.end_offset)
    for a in answers:
        if not a.reached:
            continue
        if a.leader_id >= 0 and a.role in ("leader", "follower"):
            raise OperationFailed(
                f"controller {a.node_id} at {a.address} follows leader {a.leader_id} in epoch "
                f"{a.epoch}: the quorum is not lost. Change the voters with "
                "`quorumctl quorum remove-controller` / `add-controller` instead."
            )
        if (a.log_end_epoch, a.log_end_offset) > mine:
            raise OperationFailed(
                f"controller {a.node_id} at {a.address} holds a newer log (last epoch "
                f"{a.log_end_epoch}, end offset {a.log_end_offset}) than this one (last epoch "
                f"{mine[0]}, end offset {mine[1]}): records only it has would be lost. Run "
                "force-standalone on the most up-to-date survivor instead (stop it first)."
            )


def _confirm(node_id: int, local: LocalLog) -> None:
    question = (
        f"Make controller {node_id} the only voter? Records the lost controllers committed "
        f"beyond this node's log end ({local.end_offset}) are lost for good"
    )
    if not click.get_text_stream("stdin").isatty():
        raise click.UsageError("refusing to rewrite the voters unconfirmed: pass --force")
    if not click.confirm(question, err=True):
        raise click.Abort()


__all__ = ["force_standalone"]
