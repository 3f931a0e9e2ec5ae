"""`quorumctl quorum add-controller / remove-controller` (KIP-853, kraft.version 1).

What `kafka-metadata-quorum.sh add-controller` and `remove-controller` do: ask
the active controller to add a caught-up observer to the voter set, or to
remove a voter, one at a time. The answer comes once the change is committed;
a refusal prints Kafka's error name (DUPLICATE_VOTER, VOTER_NOT_FOUND,
REQUEST_TIMED_OUT while another change is pending or the controller has not
caught up, UNSUPPORTED_VERSION at kraft.version 0) and changes nothing.
"""

from __future__ import annotations

from pathlib import Path

import click

from quorum.cli.admin_calls import call_admin
from quorum.cli.bootstrap import RequestFailed, connection_options, parse_bootstrap, render_json
from quorum.cli.params import BROKER_ID
from quorum.cli.quorum_describe import quorum_group
from quorum.common.meta_properties import StorageFormatError, read_meta_properties
from quorum.controller_config import ConfigError, load_config
from quorum.gen import admin_pb2 as api


def _endpoint(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise click.BadParameter(f"{text!r} is not host:port", param_hint="--endpoint")
    return host.strip("[]"), int(port)


def _from_config(path: Path) -> tuple[int, str, str, int]:
    """node.id, the directory id in its meta.properties, its CONTROLLER listener."""
    try:
        config = load_config(path)
        meta = read_meta_properties(Path(config.metadata_log_dir))
    except (ConfigError, StorageFormatError, OSError) as err:
        raise RequestFailed(f"cannot read the controller's identity from {path}: {err}") from err
    if not meta.directory_id:
        raise RequestFailed(f"{config.metadata_log_dir} has no directory.id in meta.properties")
    listener = config.listener
    return config.node_id, meta.directory_id, listener.host, listener.port


@quorum_group.command("add-controller")
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    default=None,
    help="The new controller's properties file: node.id, its listener, and the "
    "directory id of its formatted metadata.log.dir (as Kafka's tool takes it).",
)
@click.option("--controller-id", type=BROKER_ID, default=None, help="Instead of --config.")
@click.option("--controller-directory-id", default=None, help="Instead of --config.")
@click.option("--endpoint", default=None, help="host:port of its listener; instead of --config.")
@connection_options
def add_controller(
    config_path: Path | None,
    controller_id: int | None,
    controller_directory_id: str | None,
    endpoint: str | None,
    bootstrap: str | None,
    cluster_id: str,
    output: str,
) -> None:
    """Add a caught-up observer controller to the voter set (kraft.version 1).

    \b
    Example:
      quorumctl quorum add-controller --config data/config/controller-4.properties
      quorumctl quorum add-controller --controller-id 4 \\
          --controller-directory-id 2sTtZ9PeQ0iq9ZT0kR2xVw --endpoint 127.0.0.1:9096
    """
    explicit = (controller_id, controller_directory_id, endpoint)
    if config_path is not None:
        if any(v is not None for v in explicit):
            raise click.UsageError("give --config, or the three --controller-* / --endpoint")
        node_id, directory_id, host, port = _from_config(config_path)
    elif controller_id is None or controller_directory_id is None or endpoint is None:
        raise click.UsageError(
            "give --config, or --controller-id, --controller-directory-id and --endpoint"
        )
    else:
        node_id, directory_id = controller_id, controller_directory_id
        host, port = _endpoint(endpoint)
    request = api.AddRaftVoterRequest(
        voter_id=node_id,
        voter_directory_id=directory_id,
        listeners=[api.RaftVoterEndpoint(name="CONTROLLER", host=host, port=port)],
    )
    reply = call_admin(parse_bootstrap(bootstrap), cluster_id, "AddRaftVoter", request)
    result = {
        "ControllerId": node_id,
        "DirectoryId": directory_id,
        "Endpoint": f"{host}:{port}",
        "Offset": reply.offset,
        "LeaderEpoch": reply.leader_epoch,
        "Result": "added",
    }
    click.echo(
        render_json(result)
        if output == "json"
        else f"controller {node_id} ({directory_id}) added as a voter at offset {reply.offset}"
    )


@quorum_group.command("remove-controller")
@click.option("--controller-id", type=BROKER_ID, required=True, help="The voter's id.")
@click.option(
    "--controller-directory-id",
    required=True,
    help="The voter's directory id (quorum describe --replication shows it).",
)
@connection_options
def remove_controller(
    controller_id: int,
    controller_directory_id: str,
    bootstrap: str | None,
    cluster_id: str,
    output: str,
) -> None:
    """Remove a voter (kraft.version 1); the active controller may remove itself,
    and resigns once the change is committed.

    \b
    Example:
      quorumctl quorum remove-controller --controller-id 4 \\
          --controller-directory-id 2sTtZ9PeQ0iq9ZT0kR2xVw
    """
    request = api.RemoveRaftVoterRequest(
        voter_id=controller_id, voter_directory_id=controller_directory_id
    )
    reply = call_admin(parse_bootstrap(bootstrap), cluster_id, "RemoveRaftVoter", request)
    result = {
        "ControllerId": controller_id,
        "DirectoryId": controller_directory_id,
        "Offset": reply.offset,
        "LeaderEpoch": reply.leader_epoch,
        "Result": "removed",
    }
    click.echo(
        render_json(result)
        if output == "json"
        else f"controller {controller_id} removed from the voters at offset {reply.offset}"
    )
