"""One admin call from the CLI: find the active controller, turn refusals into exit 1.

Errors come out as Kafka's error name, code and the server's message on stderr
(exit code 1); an unreachable cluster names every address it tried. Per-item
errors in batch answers are reported the same way by `fail_on_item_errors`.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterable
from typing import Any

import click

from quorum.admin_client import AdminClient, AdminError, NoControllerError
from quorum.cli.bootstrap import RequestFailed, cli_tls
from quorum.gen import admin_pb2 as api


def call_admin(
    addresses: list[str], cluster_id: str, method: str, request: Any, deadline_s: float = 15.0
) -> Any:
    tls = cli_tls()

    async def go() -> Any:
        client = AdminClient(addresses, cluster_id, tls=tls)
        try:
            return await client.admin(method, request, deadline_s=deadline_s)
        finally:
            await client.close()

    try:
        return asyncio.run(go())
    except AdminError as err:
        code = err.error.error.value if err.error.error is not None else -1
        raise RequestFailed(f"{err.name} (error code {code}): {err.error.message}") from err
    except NoControllerError as err:
        raise RequestFailed(
            f"no controller reachable: {err} (set --bootstrap-controller or $QUORUMCTL_BOOTSTRAP)"
        ) from err


def item_error(error: api.ApiError) -> str | None:
    """`NAME (error code N): message` for a failed item, None for success."""
    if error.error_code == 0:
        return None
    return f"{error.error_name} (error code {error.error_code}): {error.message}"


def fail_on_item_errors(failures: Iterable[tuple[str, str]]) -> None:
    """Print every failed item on stderr, then exit 1 if there was any."""
    failed = list(failures)
    for what, message in failed:
        click.echo(f"{what}: {message}", err=True)
    if failed:
        sys.exit(1)
