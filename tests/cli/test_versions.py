"""`--version` on every console script, as an operator checks what is installed."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent
SCRIPTS = ("quorumctl", "quorum-controller", "broker-agent", "quorum-sim", "quorum-convergence")


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_console_script_prints_its_version(script: str) -> None:
    done = subprocess.run(
        [str(BIN / script), "--version"], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    expected = f"{script} {metadata.version('kraft-quorum')} (kraft-quorum)"
    assert done.stdout.strip() == expected


def test_every_console_script_is_covered() -> None:
    text = (Path(__file__).parents[2] / "pyproject.toml").read_text()
    declared = text.split("[project.scripts]", 1)[1].split("\n[", 1)[0]
    names = {line.split("=")[0].strip() for line in declared.splitlines() if "=" in line}
    assert names == set(SCRIPTS)
