"""`quorumctl storage`: the `kafka-storage.sh` of this product."""

from __future__ import annotations

from pathlib import Path

import click

from quorum.server.config import ConfigError, ControllerConfig, load_config
from quorum.server.meta_properties import (
    MetaProperties,
    StorageFormatError,
    format_directory,
    random_uuid,
    read_meta_properties,
)


class OperationFailed(click.ClickException):
    """Exit code 1 with the message on stderr."""

    exit_code = 1


def _config(path: str) -> ControllerConfig:
    try:
        return load_config(path)
    except ConfigError as err:
        raise OperationFailed(f"invalid configuration {path}: {err}") from err


@click.group()
def storage() -> None:
    """Format metadata directories and create cluster ids.

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
@click.option("--config", "-c", "config_path", required=True, help="The node's properties file.")
@click.option(
    "--ignore-formatted", "-g", is_flag=True, help="Succeed if the directory is already formatted."
)
def format_command(cluster_id: str, config_path: str, ignore_formatted: bool) -> None:
    """Write meta.properties (cluster.id, node.id, version) into metadata.log.dir.

    \b
    Example:
      quorumctl storage format --cluster-id MkU3OEVBNTcwNTJENDM2Qk \\
          --config data/config/controller-1.properties
    """
    config = _config(config_path)
    directory = Path(config.metadata_log_dir)
    try:
        written = format_directory(
            directory, MetaProperties(cluster_id, config.node_id), ignore_formatted
        )
    except StorageFormatError as err:
        raise OperationFailed(str(err)) from err
    if written:
        click.echo(
            f"Formatting {directory} with cluster.id {cluster_id} and node.id {config.node_id}"
        )
    else:
        click.echo(f"{directory} is already formatted; nothing to do")


@storage.command("info")
@click.option("--config", "-c", "config_path", required=True, help="The node's properties file.")
def info_command(config_path: str) -> None:
    """Show the meta.properties of a node's metadata.log.dir.

    \b
    Example:
      quorumctl storage info --config data/config/controller-1.properties
    """
    config = _config(config_path)
    try:
        meta = read_meta_properties(Path(config.metadata_log_dir))
    except StorageFormatError as err:
        raise OperationFailed(str(err)) from err
    click.echo(f"metadata.log.dir: {config.metadata_log_dir}")
    for key, value in meta.as_properties().items():
        click.echo(f"{key}: {value}")
