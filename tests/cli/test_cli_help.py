"""Every `quorumctl` command explains itself with an example, and shell completion
scripts come out for bash and zsh."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import click
from click.testing import CliRunner

from quorum.cli.main import cli


def leaf_commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = []
    for name, command in group.commands.items():
        path = (*prefix, name)
        if isinstance(command, click.Group):
            found += leaf_commands(command, path)
        else:
            found.append(path)
    return found


def test_every_command_has_help_with_an_example() -> None:
    commands = leaf_commands(cli)
    assert {("topics", "create"), ("metadata", "shell"), ("log", "dump"),
            ("brokers", "unregister"), ("elect-leaders",)} <= set(commands)  # fmt: skip
    runner = CliRunner()
    for path in commands:
        result = runner.invoke(cli, [*path, "--help"])
        assert result.exit_code == 0, (path, result.output)
        assert "Example" in result.output and "quorumctl " in result.output, path


def test_shell_completion_scripts_for_bash_and_zsh() -> None:
    quorumctl = Path(sys.executable).parent / "quorumctl"
    for shell, marker in (("bash", "complete "), ("zsh", "compdef")):
        env = {**os.environ, "_QUORUMCTL_COMPLETE": f"{shell}_source"}
        done = subprocess.run([str(quorumctl)], env=env, capture_output=True, text=True,
                              timeout=30, check=False)  # fmt: skip
        assert done.returncode == 0 and marker in done.stdout, (shell, done.stdout[:200])
