"""Where `quorumctl` finds the controllers, and how it prints what they say.

Bootstrap order: `--bootstrap-controller`, then `$QUORUMCTL_BOOTSTRAP`, then the
three controllers `make run` starts, so the local cluster needs no flags.

TLS: `--ssl-ca-location` (or `$QUORUMCTL_SSL_CA_LOCATION`) turns it on; with
`--ssl-certificate-location` and `--ssl-key-location` (or their `$QUORUMCTL_SSL_*`
variables) the tool presents a client certificate, whose subject is its
principal (mTLS). Set once in the environment, every command uses them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from typing import Any

import click

from quorum.common.tls import TlsConfigError, TlsSettings, client_tls

DEFAULT_BOOTSTRAP = "127.0.0.1:9093,127.0.0.1:9094,127.0.0.1:9095"
ENV_BOOTSTRAP = "QUORUMCTL_BOOTSTRAP"
DEFAULT_TIMEOUT_S = 15.0
# Where the shared options leave their values for the code that makes the calls,
# so every command takes them without each signature and call site repeating them.
META_TIMEOUT = "quorumctl.timeout"
META_REQUIRE_LEADER = "quorumctl.require_leader"
META_STALE = "quorumctl.stale_read"

_TLS_META = "quorumctl.tls"
_TLS_FLAGS = {
    "ssl_ca_location": (
        "--ssl-ca-location",
        "CA bundle (PEM) that the controllers' certificates chain to; turns TLS on.",
    ),
    "ssl_certificate_location": (
        "--ssl-certificate-location",
        "Client certificate (PEM) for mTLS.",
    ),
    "ssl_key_location": ("--ssl-key-location", "The client certificate's private key (PEM)."),
}


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


def _remember(key: str) -> Callable[[click.Context, click.Parameter, Any], Any]:
    def store(ctx: click.Context, _param: click.Parameter, value: Any) -> Any:
        ctx.meta[key] = value
        return value

    return store


def command_timeout(default: float = DEFAULT_TIMEOUT_S) -> float:
    """The command's `--timeout`, else `default` (also outside a click command)."""
    ctx = click.get_current_context(silent=True)
    value = ctx.meta.get(META_TIMEOUT) if ctx is not None else None
    return float(value) if value is not None else default


def require_leader() -> bool:
    ctx = click.get_current_context(silent=True)
    return bool(ctx is not None and ctx.meta.get(META_REQUIRE_LEADER))


def mark_stale(reason: str) -> None:
    """Say on stderr that this read may be stale, and keep the reason for JSON."""
    click.echo(f"WARNING: possibly stale read: {reason}", err=True)
    ctx = click.get_current_context(silent=True)
    if ctx is not None:
        ctx.meta[META_STALE] = reason


def stale_reason() -> str | None:
    ctx = click.get_current_context(silent=True)
    return ctx.meta.get(META_STALE) if ctx is not None else None


def _remember_tls(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    if param.name is not None:
        ctx.meta.setdefault(_TLS_META, {})[param.name] = value


def cli_tls() -> TlsSettings | None:
    """The TLS settings the current command was given (flags or environment)."""
    ctx = click.get_current_context(silent=True)
    given = ctx.meta.get(_TLS_META, {}) if ctx is not None else {}
    try:
        return client_tls(
            given.get("ssl_ca_location"),
            given.get("ssl_certificate_location"),
            given.get("ssl_key_location"),
        )
    except TlsConfigError as err:
        flag = "--" + err.key.replace(".", "-")
        raise click.BadParameter(str(err), param_hint=flag) from None


def connection_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The options every command that talks to the cluster takes."""
    for name, (flag, text) in _TLS_FLAGS.items():
        command = click.option(
            flag,
            name,
            envvar=f"QUORUMCTL_{name.upper()}",
            metavar="FILE",
            expose_value=False,
            callback=_remember_tls,
            help=f"{text} [env: QUORUMCTL_{name.upper()}]",
        )(command)
    command = click.option(
        "--require-leader",
        is_flag=True,
        expose_value=False,
        callback=_remember(META_REQUIRE_LEADER),
        help="Reads: ask the active controller, and fail rather than answer from a "
        "controller that knows no leader or lags (etcdctl --consistency=l).",
    )(command)
    command = click.option(
        "--timeout",
        type=click.FloatRange(min=0.1, max=3600),
        default=None,
        expose_value=False,
        callback=_remember(META_TIMEOUT),
        metavar="SECONDS",
        help=f"Give up after this long (default {DEFAULT_TIMEOUT_S:g}s; 5s for endpoint probes).",
    )(command)
    command = click.option(
        "--output",
        "-o",
        "--write-out",
        "-w",
        "output",
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
        "--bootstrap-server",
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
    """Rows of one shape as a table (nothing when empty) or a JSON list; the rows of
    a possibly stale read carry its reason as `StaleRead`."""
    if output == "json":
        click.echo(render_json(with_stale_marker(list(rows))))
    elif rows:
        click.echo(render_table(list(rows[0]), [list(r.values()) for r in rows]))


def with_stale_marker(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    reason = stale_reason()
    return [{**row, "StaleRead": reason} for row in rows] if reason else rows


def render_json(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=False)


def _cell(value: object) -> str:
    if isinstance(value, list | tuple):
        return "[" + ",".join(str(v) for v in value) + "]"
    return str(value)
