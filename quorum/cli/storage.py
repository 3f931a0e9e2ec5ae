"""`quorumctl storage`: what ``kafka-storage.sh`` is to Kafka.

Formatting is a separate, explicit step (not something a controller does on
first start) so that a controller pointed at the wrong or an emptied directory
refuses to start instead of quietly joining the quorum with no history.
"""

from __future__ import annotations

from pathlib import Path

import click

from quorum.cli.data_dir import PARTITION_DIR
from quorum.common.meta_properties import (
    MetaProperties,
    StorageFormatError,
    directory_id_problem,
    format_directory,
    random_uuid,
    read_meta_properties,
    validate_cluster_id,
)
from quorum.common.node_identity import (
    NodeStorage,
    broker_storage,
    is_broker_agent_config,
)
from quorum.controller_config import ConfigError, ControllerConfig, load_config, read_properties
from quorum.log.errors import StorageError
from quorum.log.file_log import FileLogStore
from quorum.log.kraft_bootstrap import (
    InitialControllersError,
    initial_voters_batch,
    parse_initial_controllers,
    write_kraft_version,
)
from quorum.log.quorum_state import FILE_NAME as QUORUM_STATE_FILE
from quorum.log.quorum_state import FileQuorumStateStore
from quorum.raft.voters import VoterSet

_CONFIG_OPTION = click.option(
    "--config",
    "-c",
    "config_path",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The node's properties file (the one quorum-controller runs with).",
)


class OperationFailed(click.ClickException):
    """The operation could not be done: message on stderr, exit code 1."""

    exit_code = 1


def _load(config_path: Path) -> ControllerConfig | NodeStorage:
    """A controller's file (checked whole), or a broker agent's (its node.id and
    metadata.log.dir: the rest is the agent's to check when it starts)."""
    try:
        props = read_properties(config_path)
        if is_broker_agent_config(props):
            return broker_storage(props)
        return load_config(config_path)
    except ConfigError as err:
        raise OperationFailed(f"invalid configuration {config_path}: {err}") from err


@click.group()
def storage() -> None:
    """Create cluster ids and format metadata directories.

    Every controller's metadata.log.dir must be formatted with the cluster's
    id before the controller starts.

    \b
    Example:
      quorumctl storage format --cluster-id "$(quorumctl storage random-uuid)" \\
          --config data/config/controller-1.properties
    """


@storage.command("random-uuid")
def random_uuid_command() -> None:
    """Print a new cluster id (22 characters of URL-safe base64).

    \b
    Example:
      quorumctl storage random-uuid
    """
    click.echo(random_uuid())


@storage.command("format")
@click.option("--cluster-id", "-t", required=True, help="The cluster id to format with.")
@_CONFIG_OPTION
@click.option(
    "--ignore-formatted",
    "-g",
    is_flag=True,
    help="Succeed when the directory is already formatted with this cluster id and node id.",
)
@click.option(
    "--initial-controllers",
    "-I",
    default=None,
    help="kraft.version 1 (KIP-853): the first voter set, as id@host:port:directory-id,... "
    "(this node's directory id is taken from it). Every initial controller is formatted "
    "with the same list.",
)
@click.option(
    "--no-initial-controllers",
    "-N",
    is_flag=True,
    help="kraft.version 1 without a voter set: a controller that starts as an observer "
    "and is added with `quorumctl quorum add-controller`.",
)
@click.option(
    "--standalone",
    "-s",
    is_flag=True,
    help="kraft.version 1 with this controller as the only voter (its listener and a new "
    "directory id): the first controller of a cluster that grows with add-controller.",
)
def format_command(
    cluster_id: str,
    config_path: Path,
    ignore_formatted: bool,
    initial_controllers: str | None,
    no_initial_controllers: bool,
    standalone: bool,
) -> None:
    """Write meta.properties (cluster.id, node.id, version) into metadata.log.dir.

    An existing meta.properties is never overwritten, and a directory that
    holds data but no meta.properties is refused. Without `--standalone`,
    `--initial-controllers` or `--no-initial-controllers` (at most one of them)
    the node runs kraft.version 0: the voters are controller.quorum.voters,
    until `quorumctl features upgrade --feature kraft.version=1`.

    \b
    Example:
      quorumctl storage format --cluster-id J8iyX0bCRYmvK5QWpWQ5Zg \\
          --config data/config/controller-1.properties
    """
    try:
        validate_cluster_id(cluster_id)
    except StorageFormatError as err:
        raise OperationFailed(str(err)) from err
    exclusive_flags_problem(standalone, initial_controllers is not None, no_initial_controllers)
    config = _load(config_path)
    directory = config.metadata_log_dir
    if standalone:
        if not isinstance(config, ControllerConfig) or config.process_roles != ("controller",):
            raise OperationFailed("You can only use --standalone on a controller.")
        initial_controllers = standalone_voter(config)
    voters: VoterSet | None = None
    directory_id: str | None = None
    if initial_controllers is not None:
        if not isinstance(config, ControllerConfig):
            raise OperationFailed("--initial-controllers is for controllers only")
        try:
            voters = parse_initial_controllers(initial_controllers)
        except InitialControllersError as err:
            raise OperationFailed(f"invalid --initial-controllers: {err}") from err
        bad = [
            f"{v.voter_id}: {problem}"
            for v in voters.voters
            if (problem := directory_id_problem(v.directory_id))
        ]
        if bad:
            raise OperationFailed(f"invalid directory id in --initial-controllers: {bad}")
        me = voters.voter(config.node_id)
        directory_id = me.directory_id if me is not None else None
    try:
        written = format_directory(
            directory,
            MetaProperties(cluster_id, config.node_id, directory_id=directory_id),
            ignore_formatted,
        )
        if written and (voters is not None or no_initial_controllers):
            _bootstrap_kraft_version(directory, voters)
    except StorageFormatError as err:
        raise OperationFailed(str(err)) from err
    if written and (voters is not None or no_initial_controllers):
        click.echo(f"kraft.version 1 (voters: {_voters_text(voters)})")
    if written:
        click.echo(
            f"Formatting {directory} with cluster.id {cluster_id} and node.id {config.node_id}"
        )
    else:
        click.echo(
            f"{directory} is already formatted with cluster.id {cluster_id} and "
            f"node.id {config.node_id}; nothing to do"
        )


def exclusive_flags_problem(
    standalone: bool, initial_controllers: bool, no_initial_controllers: bool
) -> None:
    """kafka-storage.sh takes at most one of the three (an argparse group): the
    same words when two are given."""
    given = [
        flag
        for flag, on in (
            ("--standalone/-s", standalone),
            ("--initial-controllers/-I", initial_controllers),
            ("--no-initial-controllers/-N", no_initial_controllers),
        )
        if on
    ]
    if len(given) > 1:
        raise OperationFailed(f"argument {given[1]}: not allowed with argument {given[0]}")


def standalone_voter(config: ControllerConfig) -> str:
    """`--standalone` as the `--initial-controllers` entry it stands for: this
    controller at its advertised listener, with a new directory id."""
    if config.advertised.host in ("0.0.0.0", "::", ""):
        raise OperationFailed(
            f"--standalone writes this controller's listener into the voter set, and "
            f"{config.advertised.address()} is no address others can dial: set a host in "
            "listeners"
        )
    return f"{config.node_id}@{config.advertised.address()}:{random_uuid()}"


def _bootstrap_kraft_version(directory: Path, voters: VoterSet | None) -> None:
    try:
        write_kraft_version(directory)
        if voters is not None:
            with FileLogStore(directory / PARTITION_DIR) as log_store:
                log_store.append([initial_voters_batch(voters)])
                log_store.flush(1)
    except (OSError, StorageError) as err:
        raise StorageFormatError(f"cannot write the initial voter set: {err}") from err


def _voters_text(voters: VoterSet | None) -> str:
    if voters is None:
        return "none yet, learned from the log"
    return ",".join(
        f"{v.voter_id}@{e.host}:{e.port}:{v.directory_id}"
        for v in voters.voters
        for e in v.endpoints[:1]
    )


@storage.command("info")
@_CONFIG_OPTION
def info_command(config_path: Path) -> None:
    """Show the meta.properties of a node's metadata.log.dir.

    Exits 1 when the directory is not formatted, cannot be read, or was
    formatted for another node.id than the configuration's.

    \b
    Example:
      quorumctl storage info --config data/config/controller-1.properties
    """
    config = _load(config_path)
    try:
        meta = read_meta_properties(config.metadata_log_dir)
    except StorageFormatError as err:
        raise OperationFailed(str(err)) from err
    click.echo(f"metadata.log.dir: {config.metadata_log_dir}")
    for key, value in meta.as_properties().items():
        click.echo(f"{key}: {value}")
    if meta.node_id != config.node_id:
        raise OperationFailed(
            f"{config.metadata_log_dir} was formatted for node.id {meta.node_id}, "
            f"but {config_path} says node.id {config.node_id}"
        )


@storage.command("upgrade-quorum-state")
@_CONFIG_OPTION
def upgrade_quorum_state_command(config_path: Path) -> None:
    """Upgrade a controller's version-1 quorum-state file (no checksum) to version 2.

    A controller does not read a version-1 file at start-up, so that editing the
    version field of a checksummed file cannot skip its checksum. Run this once,
    with the controller stopped, on a directory written by a release from before
    the checksum; a file that is already version 2 is left as it is.

    \b
    Example:
      quorumctl storage upgrade-quorum-state --config data/config/controller-1.properties
    """
    config = _load(config_path)
    try:
        meta = read_meta_properties(config.metadata_log_dir)
    except StorageFormatError as err:
        raise OperationFailed(str(err)) from err
    path = config.metadata_log_dir / PARTITION_DIR / QUORUM_STATE_FILE
    try:
        state = FileQuorumStateStore.upgrade(path, meta.cluster_id, config.node_id)
    except StorageError as err:
        raise OperationFailed(str(err)) from err
    if state is None:
        click.echo(f"{path}: already version 2 (or absent); nothing to do")
    else:
        click.echo(
            f"{path}: upgraded to version 2 (epoch {state.epoch}, voted for "
            f"{state.voted_for}, leader {state.leader_id})"
        )
