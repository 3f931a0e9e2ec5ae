"""Where `quorumctl` finds the controllers, and how it prints what they say.

Bootstrap order: `--bootstrap-controller`, then `$QUORUMCTL_BOOTSTRAP`, then the
three controllers `make run` starts, so the local cluster needs no flags.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from typing import Any

import click

DEFAULT_BOOTSTRAP = "127.0.0.1:9093,127.0.0.1:9094,127.0.0.1:9095"
ENV_BOOTSTRAP = "QUORUMCTL_BOOTSTRAP"


class RequestFailed(click.ClickException):
    """The cluster refused or could not answer: message on stderr, exit code 1."""

    exit_code = 1


def parse_bootstrap(value: str | None) -> list[str]:
    raw = value or os.environ.get(ENV_BOOTSTRAP) or DEFAULT_BOOTSTRAP
    addresses = [a.strip() for a in raw.split(",") if a.strip()]
    for address in addresses:
        host, sep, port = address.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise click.BadParameter(f"{address!r} is not host:port", param_hint="bootstrap")
    return addresses


def connection_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The options every command that talks to the cluster takes."""
    command = click.option(
        "--output",
        "-o",
        type=click.Choice(["table", "json"]),
        default="table",
        show_default=True,
        help="Table for people, JSON for scripts.",
    )(command)
    command = click.option(
        "--cluster-id",
        default="",
        help="Refuse to talk to a cluster with another id (default: do not check).",
    )(command)
    return click.option(
        "--bootstrap-controller",
        "bootstrap",
        metavar="HOST:PORT[,HOST:PORT...]",
        help=f"Controllers to ask first (default: ${ENV_BOOTSTRAP}, else {DEFAULT_BOOTSTRAP}).",
    )(command)


def render_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Left-aligned columns separated by two spaces, as Kafka's tools print them."""
    cells = [[str(h) for h in headers]] + [[_cell(v) for v in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join(line.rstrip() for line in lines)


def print_rows(rows: Sequence[dict[str, Any]], output: str) -> None:
    """Rows of one shape as a table (nothing when empty) or a JSON list."""
    if output == "json":
        click.echo(render_json(list(rows)))
    elif rows:
        click.echo(render_table(list(rows[0]), [list(r.values()) for r in rows]))


def render_json(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=False)


def _cell(value: object) -> str:
    if isinstance(value, list | tuple):
        return "[" + ",".join(str(v) for v in value) + "]"
    return str(value)
