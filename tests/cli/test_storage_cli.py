"""`quorumctl storage` as a real subprocess, and the meta.properties rules."""

from __future__ import annotations

import base64
import subprocess
import sys
from pathlib import Path

import pytest

from quorum.server.config import render_properties
from quorum.server.meta_properties import (
    MetaProperties,
    NodeIdMismatchError,
    NotFormattedError,
    StorageFormatError,
    check_directory,
    format_directory,
    random_uuid,
    read_meta_properties,
)


def quorumctl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "quorum.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def write_config(tmp_path: Path, **extra: str) -> Path:
    props = {
        "node.id": "1",
        "process.roles": "controller",
        "controller.quorum.voters": "1@127.0.0.1:9093",
        "listeners": "CONTROLLER://127.0.0.1:9093",
        "metadata.log.dir": str(tmp_path / "controller-1"),
        **extra,
    }
    path = tmp_path / "controller-1.properties"
    path.write_text(render_properties(props))
    return path


def test_random_uuid_is_a_kafka_style_id() -> None:
    first, second = (quorumctl("storage", "random-uuid") for _ in range(2))
    assert first.returncode == 0
    ids = [first.stdout.strip(), second.stdout.strip()]
    assert ids[0] != ids[1]
    for cluster_id in ids:
        assert len(cluster_id) == 22
        assert len(base64.urlsafe_b64decode(cluster_id + "==")) == 16


def test_format_writes_meta_properties_once(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    cluster_id = random_uuid()
    done = quorumctl("storage", "format", "--cluster-id", cluster_id, "--config", str(config))
    assert done.returncode == 0, done.stderr
    assert f"cluster.id {cluster_id}" in done.stdout
    meta_file = tmp_path / "controller-1" / "meta.properties"
    text = meta_file.read_text()
    assert f"cluster.id={cluster_id}" in text and "node.id=1" in text and "version=1" in text

    again = quorumctl("storage", "format", "--cluster-id", random_uuid(), "--config", str(config))
    assert again.returncode == 1
    assert "already exists" in again.stderr and "Traceback" not in again.stderr
    assert meta_file.read_text() == text

    ignored = quorumctl(
        "storage",
        "format",
        "--cluster-id",
        cluster_id,
        "--config",
        str(config),
        "--ignore-formatted",
    )
    assert ignored.returncode == 0 and meta_file.read_text() == text

    info = quorumctl("storage", "info", "--config", str(config))
    assert info.returncode == 0 and f"cluster.id: {cluster_id}" in info.stdout


def test_format_refusals_change_nothing(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    bad_id = quorumctl("storage", "format", "--cluster-id", "not-an-id", "--config", str(config))
    assert bad_id.returncode == 1 and "invalid cluster id" in bad_id.stderr
    assert not (tmp_path / "controller-1").exists()

    typo = write_config(tmp_path, **{"controller.quorum.election.timout.ms": "5"})
    bad_key = quorumctl("storage", "format", "--cluster-id", random_uuid(), "--config", str(typo))
    assert bad_key.returncode == 1
    assert "controller.quorum.election.timout.ms" in bad_key.stderr
    assert not (tmp_path / "controller-1").exists()

    usage = quorumctl("storage", "format", "--cluster-id", random_uuid())
    assert usage.returncode == 2 and "--config" in usage.stderr

    config = write_config(tmp_path)
    unformatted = quorumctl("storage", "info", "--config", str(config))
    assert unformatted.returncode == 1 and "not formatted" in unformatted.stderr


def test_help_shows_an_example() -> None:
    for command in (["storage", "format"], ["storage", "random-uuid"], ["storage"]):
        shown = quorumctl(*command, "--help")
        assert shown.returncode == 0 and "Example:" in shown.stdout


def test_meta_properties_rules(tmp_path: Path) -> None:
    with pytest.raises(NotFormattedError):
        read_meta_properties(tmp_path)
    cluster_id = random_uuid()
    assert format_directory(tmp_path, MetaProperties(cluster_id, 3))
    assert check_directory(tmp_path, 3).cluster_id == cluster_id
    with pytest.raises(NodeIdMismatchError, match=r"node\.id 3"):
        check_directory(tmp_path, 4)
    (tmp_path / "meta.properties").write_text("version=1\nnode.id=3\n")
    with pytest.raises(StorageFormatError, match="cannot be read"):
        read_meta_properties(tmp_path)
    (tmp_path / "meta.properties").write_text(f"version=9\nnode.id=3\ncluster.id={cluster_id}\n")
    with pytest.raises(StorageFormatError, match="version 9"):
        read_meta_properties(tmp_path)
