"""`quorumctl acls`: what `kafka-acls.sh` does (add, list, remove)."""

from __future__ import annotations

import sys
from typing import Any

import click

from quorum.cli.admin_calls import call_admin, fail_on_item_errors, item_error
from quorum.cli.bootstrap import (
    connection_options,
    parse_bootstrap,
    print_rows,
)
from quorum.cli.params import KafkaChoice
from quorum.gen import admin_pb2 as api

# Kafka's wire ids (see proto/admin.proto).
RESOURCE_TYPES = {"any": 1, "topic": 2, "group": 3, "cluster": 4, "transactional-id": 5}
PATTERN_TYPES = {"any": 1, "match": 2, "literal": 3, "prefixed": 4}
OPERATIONS = {
    "any": 1,
    "all": 2,
    "read": 3,
    "write": 4,
    "create": 5,
    "delete": 6,
    "alter": 7,
    "describe": 8,
    "cluster-action": 9,
    "describe-configs": 10,
    "alter-configs": 11,
    "idempotent-write": 12,
}
PERMISSIONS = {"any": 1, "deny": 2, "allow": 3}


def _name(table: dict[str, int], value: int) -> str:
    return next((k for k, v in table.items() if v == value), str(value)).upper()


def _resource(topic: str | None, group: str | None, cluster: bool) -> tuple[int, str | None]:
    chosen = [(2, topic)] if topic else []
    chosen += [(3, group)] if group else []
    chosen += [(4, "kafka-cluster")] if cluster else []
    if len(chosen) > 1:
        raise click.UsageError("name one of --topic, --group, --cluster")
    return chosen[0] if chosen else (1, None)


def resource_options(command: Any) -> Any:
    command = click.option("--cluster", "on_cluster", is_flag=True, help="The cluster.")(command)
    command = click.option("--group", help="A consumer group.")(command)
    command = click.option("--topic", help="A topic (or prefix with --pattern-type).")(command)
    return click.option(
        "--resource-pattern-type",
        "--pattern-type",
        "pattern_type",
        type=KafkaChoice(list(PATTERN_TYPES)),
        default=None,
        help="literal (default for add), prefixed, match, any (any case, as kafka-acls.sh).",
    )(command)


def binding_row(b: api.AclBinding) -> dict[str, Any]:
    return {
        "ResourceType": _name(RESOURCE_TYPES, b.resource_type),
        "Name": b.resource_name,
        "PatternType": _name(PATTERN_TYPES, b.pattern_type),
        "Principal": b.principal,
        "Host": b.host,
        "Operation": _name(OPERATIONS, b.operation),
        "Permission": _name(PERMISSIONS, b.permission_type),
    }


@click.group("acls")
def acls_group() -> None:
    """Add, list and remove ACLs.

    \b
    Example:
      quorumctl acls add --allow-principal User:alice --operation read --topic orders
      quorumctl acls list --topic orders
    """


@acls_group.command("add")
@resource_options
@click.option("--allow-principal", "allow", multiple=True, help="e.g. User:alice")
@click.option("--deny-principal", "deny", multiple=True, help="e.g. User:mallory")
@click.option(
    "--operation",
    "operations",
    multiple=True,
    required=True,
    type=KafkaChoice([o for o in OPERATIONS if o != "any"]),
    help="Read, Write, ..., ClusterAction, DescribeConfigs (any case; repeatable).",
)
@click.option("--host", default="*", show_default=True, help="Client host.")
@connection_options
def add(
    pattern_type: str | None,
    topic: str | None,
    group: str | None,
    on_cluster: bool,
    allow: tuple[str, ...],
    deny: tuple[str, ...],
    operations: tuple[str, ...],
    host: str,
    bootstrap: str | None,
    cluster_id: str,
    output: str,
) -> None:
    """Add ACLs: every principal x operation on the resource.

    \b
    Example:
      quorumctl acls add --allow-principal User:alice --operation read --operation describe \\
          --topic orders-  --pattern-type prefixed
    """
    rtype, name = _resource(topic, group, on_cluster)
    if name is None:
        raise click.UsageError("name the resource: --topic, --group or --cluster")
    if not allow and not deny:
        raise click.UsageError("give --allow-principal and/or --deny-principal")
    pattern = PATTERN_TYPES[pattern_type or "literal"]
    bindings = [
        api.AclBinding(
            resource_type=rtype,
            resource_name=name,
            pattern_type=pattern,
            principal=principal,
            host=host,
            operation=OPERATIONS[op],
            permission_type=permission,
        )
        for permission, principals in ((3, allow), (2, deny))
        for principal in principals
        for op in operations
    ]
    reply = call_admin(
        parse_bootstrap(bootstrap),
        cluster_id,
        "CreateAcls",
        api.CreateAclsRequest(creations=bindings),
    )
    failures, created = [], []
    for b, r in zip(bindings, reply.results, strict=True):
        message = item_error(r.error)
        if message:
            failures.append((f"acl {b.principal} {_name(OPERATIONS, b.operation)}", message))
        else:
            created.append(b)
    # Only what was created: a table of refused bindings would read as success.
    print_rows([binding_row(b) for b in created], output)
    fail_on_item_errors(failures)


def _filter(
    pattern_type: str | None,
    topic: str | None,
    group: str | None,
    on_cluster: bool,
    principal: str | None,
) -> api.AclBindingFilter:
    rtype, name = _resource(topic, group, on_cluster)
    f = api.AclBindingFilter(
        resource_type=rtype,
        pattern_type=PATTERN_TYPES[pattern_type or "any"],
        operation=1,
        permission_type=1,
    )
    if name is not None:
        f.resource_name = name
    if principal is not None:
        f.principal = principal
    return f


@acls_group.command("list")
@resource_options
@click.option("--principal", help="Only this principal.")
@connection_options
def list_acls(
    pattern_type: str | None,
    topic: str | None,
    group: str | None,
    on_cluster: bool,
    principal: str | None,
    bootstrap: str | None,
    cluster_id: str,
    output: str,
) -> None:
    """List ACLs matching a filter (default: all).

    \b
    Example:
      quorumctl acls list --principal User:alice --output json
    """
    reply = call_admin(
        parse_bootstrap(bootstrap),
        cluster_id,
        "DescribeAcls",
        api.DescribeAclsRequest(filter=_filter(pattern_type, topic, group, on_cluster, principal)),
    )
    print_rows([binding_row(b) for b in reply.bindings], output)


@acls_group.command("remove")
@resource_options
@click.option("--principal", help="Only this principal.")
@click.option(
    "--force", is_flag=True, help="Do not ask for confirmation (needed without a terminal)."
)
@connection_options
def remove(
    pattern_type: str | None,
    topic: str | None,
    group: str | None,
    on_cluster: bool,
    principal: str | None,
    force: bool,
    bootstrap: str | None,
    cluster_id: str,
    output: str,
) -> None:
    """Remove the ACLs matching a filter; prints what was removed.

    Asks for confirmation first, as kafka-acls.sh does, unless --force; without a
    terminal to ask on, it refuses rather than remove unconfirmed.

    \b
    Example:
      quorumctl acls remove --topic orders --principal User:alice
      quorumctl acls remove --topic orders --force
    """
    if not any((topic, group, on_cluster, principal)):
        raise click.UsageError("name a resource or a principal (refusing to remove every ACL)")
    if not force:
        _confirm_removal(_filter(pattern_type, topic, group, on_cluster, principal))
    reply = call_admin(
        parse_bootstrap(bootstrap),
        cluster_id,
        "DeleteAcls",
        api.DeleteAclsRequest(filters=[_filter(pattern_type, topic, group, on_cluster, principal)]),
    )
    result = reply.results[0]
    message = item_error(result.error)
    if message:
        fail_on_item_errors([("acl filter", message)])
    print_rows([binding_row(b) for b in result.matching], output)


def _confirm_removal(f: api.AclBindingFilter) -> None:
    """kafka-acls.sh's "Are you sure you want to delete all ACLs for resource ...?";
    exit 1 when declined, usage error (2) when there is no terminal to ask on."""
    what = f"ACLs matching {_describe_filter(f)}"
    if not sys.stdin.isatty():
        raise click.UsageError(f"refusing to remove {what} without confirmation: pass --force")
    if not click.confirm(f"Are you sure you want to remove the {what}?", err=True):
        click.echo("nothing removed", err=True)
        sys.exit(1)


def _describe_filter(f: api.AclBindingFilter) -> str:
    parts = [f"resource type {_name(RESOURCE_TYPES, f.resource_type)}"]
    if f.HasField("resource_name"):
        parts.append(f"name {f.resource_name!r}")
    parts.append(f"pattern {_name(PATTERN_TYPES, f.pattern_type)}")
    if f.HasField("principal"):
        parts.append(f"principal {f.principal}")
    return ", ".join(parts)
