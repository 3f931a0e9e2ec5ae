"""A click group whose named subcommands are imported only when used.

Why: every `quorumctl` call pays for the imports of every command module, and
two of them are heavy (the Kafka protocol structs behind `groups`, pyarrow
behind `log export`): most of a second of CPU per call, in every test and
script that runs the tool. Listing commands (help, completion) still imports
them all, so what an operator sees is unchanged."""

from __future__ import annotations

import importlib
from typing import Any

import click


class LazyGroup(click.Group):
    """`lazy_commands` maps a subcommand's name to "module:attribute"."""

    def __init__(self, *args: Any, lazy_commands: dict[str, str] | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.lazy_commands = dict(lazy_commands or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy_commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = self.lazy_commands.get(cmd_name)
        if target is None:
            return super().get_command(ctx, cmd_name)
        module, attribute = target.split(":")
        command = getattr(importlib.import_module(module), attribute)
        assert isinstance(command, click.Command), target
        return command
