"""`quorumctl configs`: what `kafka-configs.sh` does for topics, brokers and the cluster."""

from __future__ import annotations

import click

from quorum.cli.admin_calls import call_admin, fail_on_item_errors, item_error
from quorum.cli.bootstrap import (
    connection_options,
    parse_bootstrap,
    print_rows,
    render_json,
    render_table,
)
from quorum.cli.params import KafkaChoice, config_pair, parse_int, split_config_list
from quorum.gen import admin_pb2 as api

ENTITY_TYPES = {"topics": api.TOPIC, "brokers": api.BROKER, "cluster": api.CLUSTER}


def _resource(entity_type: str, entity_name: str | None) -> tuple[int, str]:
    if entity_type == "cluster":
        if entity_name:
            raise click.UsageError("--entity-type cluster takes no --entity-name")
        return api.CLUSTER, ""
    if not entity_name:
        raise click.UsageError(f"--entity-type {entity_type} needs --entity-name")
    if entity_type == "brokers":
        try:
            parse_int(entity_name, 0)
        except ValueError as err:
            raise click.BadParameter(
                f"a broker is named by its id: {err}", param_hint="--entity-name"
            ) from None
    return ENTITY_TYPES[entity_type], entity_name


def entity_options(command: click.decorators.FC) -> click.decorators.FC:
    command = click.option("--entity-name", help="Topic name or broker id.")(command)
    return click.option(
        "--entity-type",
        type=KafkaChoice(list(ENTITY_TYPES)),
        required=True,
        help="topics, brokers, or cluster (defaults for every broker).",
    )(command)


@click.group("configs")
def configs_group() -> None:
    """Describe and alter dynamic configs.

    \b
    Example:
      quorumctl configs describe --entity-type topics --entity-name orders
      quorumctl configs alter --entity-type topics --entity-name orders \\
          --add-config retention.ms=86400000,min.insync.replicas=2
    """


@configs_group.command("describe")
@entity_options
@click.option("--all", "show_all", is_flag=True, help="Defaults too, not only what is set.")
@connection_options
def describe(
    entity_type: str,
    entity_name: str | None,
    show_all: bool,
    bootstrap: str | None,
    cluster_id: str,
    output: str,
) -> None:
    """Show a resource's configs and where each value comes from.

    \b
    Example:
      quorumctl configs describe --entity-type brokers --entity-name 101 --all
    """
    rtype, name = _resource(entity_type, entity_name)
    reply = call_admin(
        parse_bootstrap(bootstrap),
        cluster_id,
        "DescribeConfigs",
        api.DescribeConfigsRequest(
            resources=[api.DescribeConfigsResource(resource_type=rtype, resource_name=name)]
        ),
    )
    result = reply.resources[0]
    message = item_error(result.error)
    if message:
        fail_on_item_errors([(f"{entity_type} {name}".strip(), message)])
    rows = [
        {
            "Name": c.name,
            "Value": "<sensitive>" if c.sensitive else c.value,
            "Source": api.ConfigSource.Name(c.source),
            "ReadOnly": c.read_only,
        }
        for c in result.configs
        if show_all or not c.is_default
    ]
    print_rows(rows, output)


def _split(values: tuple[str, ...], option: str) -> list[str]:
    """Comma-separated items, a `[a,b]` list value kept whole (kafka-configs.sh)."""
    try:
        return [item for value in values for item in split_config_list(value)]
    except ValueError as err:
        raise click.BadParameter(str(err), param_hint=option) from None


@configs_group.command("alter")
@entity_options
@click.option("--add-config", "add", multiple=True, metavar="K=V[,K=V...]", help="Set configs.")
@click.option("--delete-config", "delete", multiple=True, metavar="K[,K...]", help="Unset configs.")
@click.option("--validate-only", is_flag=True, help="Check, change nothing.")
@connection_options
def alter(
    entity_type: str,
    entity_name: str | None,
    add: tuple[str, ...],
    delete: tuple[str, ...],
    validate_only: bool,
    bootstrap: str | None,
    cluster_id: str,
    output: str,
) -> None:
    """Set or delete configs (validated by the controller; all or nothing).

    \b
    Example:
      quorumctl configs alter --entity-type cluster --add-config auto.leader.rebalance.enable=false
      quorumctl configs alter --entity-type topics --entity-name orders --delete-config retention.ms
      quorumctl configs alter --entity-type topics --entity-name orders \\
          --add-config cleanup.policy=[compact,delete],retention.ms=1000
    """
    rtype, name = _resource(entity_type, entity_name)
    changes = []
    for pair in _split(add, "--add-config"):
        key, value = config_pair(pair, "--add-config")
        changes.append(api.AlterableConfig(name=key, value=value, op=api.SET))
    changes += [
        api.AlterableConfig(name=key, op=api.DELETE) for key in _split(delete, "--delete-config")
    ]
    if not changes:
        raise click.UsageError("give --add-config and/or --delete-config")
    reply = call_admin(
        parse_bootstrap(bootstrap),
        cluster_id,
        "IncrementalAlterConfigs",
        api.IncrementalAlterConfigsRequest(
            resources=[
                api.AlterConfigsResource(resource_type=rtype, resource_name=name, configs=changes)
            ],
            validate_only=validate_only,
        ),
    )
    result = reply.resources[0]
    message = item_error(result.error)
    if message:
        fail_on_item_errors([(f"{entity_type} {name}".strip(), message)])
    summary = {
        "EntityType": entity_type,
        "EntityName": name,
        "Changes": len(changes),
        "Result": "valid" if validate_only else "altered",
    }
    if output == "json":
        click.echo(render_json(summary))
    else:
        click.echo(render_table(list(summary), [list(summary.values())]))
