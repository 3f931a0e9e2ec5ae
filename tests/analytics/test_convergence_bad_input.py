"""Bad input to the Spark job: a clear message and exit 1, before Spark starts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from handmade import add_broker, build, write


def job(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "analytics.convergence", *args],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_a_missing_directory(tmp_path: Path) -> None:
    done = job("--input", str(tmp_path / "nowhere"), "--out", str(tmp_path / "report"))
    assert done.returncode == 1
    assert "nowhere: no such export directory" in done.stderr
    assert not (tmp_path / "report").exists()


@pytest.mark.parametrize("empty", ["directory", "tables"])
def test_an_empty_export(tmp_path: Path, empty: str) -> None:
    export = tmp_path / "export"
    if empty == "directory":
        export.mkdir()
    else:
        write(build(0), export)
    done = job("--input", str(export), "--out", str(tmp_path / "report"))
    assert done.returncode == 1
    expected = "not an export: no schema.json" if empty == "directory" else "empty export"
    assert expected in done.stderr, done.stderr


def test_a_wrong_schema_version(tmp_path: Path) -> None:
    h = build(4)
    add_broker(h, 201, 0, [5, 5, 5, 5])
    write(h, tmp_path / "export", version=99)
    done = job("--input", str(tmp_path / "export"), "--out", str(tmp_path / "report"))
    assert done.returncode == 1
    assert "schema version 99 is not supported" in done.stderr, done.stderr


def test_the_console_script_is_installed() -> None:
    script = Path(sys.executable).parent / "quorum-convergence"
    done = subprocess.run([str(script), "--help"], capture_output=True, text=True, check=False)
    assert done.returncode == 0 and "--master" in done.stdout
