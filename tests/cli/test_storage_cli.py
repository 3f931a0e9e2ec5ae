"""`quorumctl storage` run as the real command an operator types.

Each test drives `python -m quorum.cli.main` in a subprocess and checks the exit
code, what is printed where, and what is (or is not) left on disk.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

import javaproperties
import pytest

from quorum.cli.main import main
from quorum.common.meta_properties import random_uuid
from tests.cli.storage_cli import format_, quorumctl, write_config


def test_random_uuid_prints_a_new_kafka_style_id() -> None:
    first, second = quorumctl("storage", "random-uuid"), quorumctl("storage", "random-uuid")
    assert first.returncode == second.returncode == 0
    ids = [first.stdout.strip(), second.stdout.strip()]
    assert ids[0] != ids[1]
    for cluster_id in ids:
        assert len(cluster_id) == 22
        raw = base64.urlsafe_b64decode(cluster_id + "==")
        assert len(raw) == 16
        assert base64.urlsafe_b64encode(raw).decode().rstrip("=") == cluster_id


def test_format_writes_meta_properties(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    cluster_id = random_uuid()
    done = format_(config, cluster_id)
    assert done.returncode == 0, done.stderr
    directory = tmp_path / "controller"
    assert done.stdout == f"Formatting {directory} with cluster.id {cluster_id} and node.id 1\n"
    text = (directory / "meta.properties").read_text()
    assert text.startswith("#")
    written = javaproperties.loads(text)
    assert set(written) == {"version", "cluster.id", "node.id", "directory.id"}
    assert (written["version"], written["cluster.id"], written["node.id"]) == (
        "1",
        cluster_id,
        "1",
    )
    assert len(written["directory.id"]) == 22
    assert sorted(p.name for p in directory.iterdir()) == ["meta.properties"]


def test_formatting_twice_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    cluster_id = random_uuid()
    assert format_(config, cluster_id).returncode == 0
    meta = tmp_path / "controller" / "meta.properties"
    before = meta.read_bytes()

    for again in (format_(config, cluster_id), format_(config, random_uuid())):
        assert again.returncode == 1
        assert "already formatted" in again.stderr and cluster_id in again.stderr
        assert "--ignore-formatted" in again.stderr
        assert "Traceback" not in again.stderr and again.stdout == ""
        assert meta.read_bytes() == before

    ignored = format_(config, cluster_id, "--ignore-formatted")
    assert ignored.returncode == 0, ignored.stderr
    assert "already formatted" in ignored.stdout
    assert meta.read_bytes() == before

    other = format_(config, random_uuid(), "--ignore-formatted")
    assert other.returncode == 1 and "another identity" in other.stderr
    assert meta.read_bytes() == before


def test_a_bad_cluster_id_writes_nothing(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    for bad in ("not-an-id", random_uuid() + "A", "AAAAAAAAAAAAAAAAAAAAAA"):
        result = format_(config, bad)
        assert result.returncode == 1
        assert "invalid cluster id" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "controller").exists()


def test_a_bad_config_writes_nothing_and_names_the_key(tmp_path: Path) -> None:
    typo = write_config(tmp_path, extra={"controller.quorum.election.timout.ms": "5"})
    result = format_(typo, random_uuid())
    assert result.returncode == 1
    assert "unknown property 'controller.quorum.election.timout.ms'" in result.stderr
    assert "did you mean controller.quorum.election.timeout.ms?" in result.stderr
    assert str(typo) in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "controller").exists()

    missing = format_(tmp_path / "absent.properties", random_uuid())
    assert missing.returncode == 1 and "absent.properties" in missing.stderr


def test_a_directory_with_data_but_no_meta_properties_is_refused(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    (tmp_path / "controller" / "__cluster_metadata-0").mkdir(parents=True)
    result = format_(config, random_uuid())
    assert result.returncode == 1
    assert "not empty" in result.stderr and "__cluster_metadata-0" in result.stderr
    assert not (tmp_path / "controller" / "meta.properties").exists()


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    no_config = quorumctl("storage", "format", "--cluster-id", random_uuid())
    assert no_config.returncode == 2 and "--config" in no_config.stderr
    no_id = quorumctl("storage", "format", "--config", str(write_config(tmp_path)))
    assert no_id.returncode == 2 and "--cluster-id" in no_id.stderr
    unknown = quorumctl("storage", "wipe")
    assert unknown.returncode == 2 and "wipe" in unknown.stderr


def test_info_shows_the_identity_or_says_not_formatted(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    unformatted = quorumctl("storage", "info", "--config", str(config))
    assert unformatted.returncode == 1
    assert "not formatted" in unformatted.stderr and "Traceback" not in unformatted.stderr

    cluster_id = random_uuid()
    assert format_(config, cluster_id).returncode == 0
    info = quorumctl("storage", "info", "--config", str(config))
    assert info.returncode == 0, info.stderr
    lines = info.stdout.splitlines()
    assert f"metadata.log.dir: {tmp_path / 'controller'}" in lines
    assert {f"cluster.id: {cluster_id}", "node.id: 1", "version: 1"} <= set(lines)

    other_node = write_config(tmp_path, node_id=2)  # same metadata.log.dir
    mismatch = quorumctl("storage", "info", "--config", str(other_node))
    assert mismatch.returncode == 1
    assert "node.id 1" in mismatch.stderr and "node.id 2" in mismatch.stderr


def test_upgrade_quorum_state_rewrites_a_version_1_file_once(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    cluster_id = random_uuid()
    assert format_(config, cluster_id).returncode == 0
    state = tmp_path / "controller" / "__cluster_metadata-0" / "quorum-state"
    state.parent.mkdir(parents=True, exist_ok=True)
    state.write_text(
        json.dumps(
            {"version": 1, "cluster_id": cluster_id, "node_id": 1, "epoch": 9}
            | {"voted_for": 2, "leader_id": None}
        )
    )
    upgraded = quorumctl("storage", "upgrade-quorum-state", "--config", str(config))
    assert upgraded.returncode == 0, upgraded.stderr
    assert "upgraded to version 2 (epoch 9, voted for 2" in upgraded.stdout
    assert json.loads(state.read_text())["version"] == 2
    again = quorumctl("storage", "upgrade-quorum-state", "--config", str(config))
    assert again.returncode == 0 and "nothing to do" in again.stdout

    edited = json.loads(state.read_text()) | {"version": 1}
    state.write_text(json.dumps(edited))
    refused = quorumctl("storage", "upgrade-quorum-state", "--config", str(config))
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert "version was edited" in refused.stderr
    assert json.loads(state.read_text()) == edited


def test_every_command_has_help_with_an_example() -> None:
    for command in ([], ["storage"], ["storage", "random-uuid"], ["storage", "format"]):
        shown = quorumctl(*command, "--help")
        assert shown.returncode == 0 and "Example:" in shown.stdout, command
        if not command:  # the top level's help (every command imported: the costliest)
            assert "_QUORUMCTL_COMPLETE=bash_source" in shown.stdout
    shown = quorumctl("storage", "info", "-h")
    assert shown.returncode == 0 and "Example:" in shown.stdout


def test_shell_completion_script() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "quorum.cli.main"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"_QUORUMCTL_COMPLETE": "bash_source", "PATH": ""},
    )
    assert result.returncode == 0
    assert "_quorumctl_completion" in result.stdout


def test_main_returns_the_exit_code_in_process(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["storage", "random-uuid"]) == 0
    assert len(capsys.readouterr().out.strip()) == 22
    assert main(["storage", "format"]) == 2
    assert main(["storage", "info", "--config", "/nonexistent/c.properties"]) == 1
    assert "/nonexistent/c.properties" in capsys.readouterr().err
