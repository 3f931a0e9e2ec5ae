"""The quorum-state file: atomic, durable, and refusing other clusters' files."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from quorum.log.errors import InconsistentClusterIdError, QuorumStateCorruptionError
from quorum.log.quorum_state import FileQuorumStateStore
from quorum.raft.config import QuorumStateData


def test_missing_file_means_a_fresh_node(tmp_path: Path) -> None:
    store = FileQuorumStateStore(tmp_path / "quorum-state", "c1", 3)
    assert store.read() == QuorumStateData()
    assert not (tmp_path / "quorum-state").exists()


def test_written_state_survives_reopen(tmp_path: Path) -> None:
    path = tmp_path / "meta" / "quorum-state"
    FileQuorumStateStore(path, "c1", 3).write(QuorumStateData(7, 2, None))
    assert FileQuorumStateStore(path, "c1", 3).read() == QuorumStateData(7, 2, None)
    FileQuorumStateStore(path, "c1", 3).write(QuorumStateData(8, None, 1))
    assert FileQuorumStateStore(path, "c1", 3).read() == QuorumStateData(8, None, 1)
    doc = json.loads(path.read_text())
    assert doc.pop("crc32c") > 0
    assert doc == {
        "version": 2,
        "cluster_id": "c1",
        "node_id": 3,
        "epoch": 8,
        "voted_for": None,
        "leader_id": 1,
    }
    assert sorted(os.listdir(path.parent)) == ["quorum-state"]  # no temp file left


def test_write_goes_through_a_temp_file_and_rename(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "quorum-state"
    store = FileQuorumStateStore(path, "c1", 3)
    store.write(QuorumStateData(1, 3, None))
    calls: list[str] = []
    real_replace, real_fsync = os.replace, os.fsync

    def replace(src: str, dst: str) -> None:
        calls.append("rename")
        assert json.loads(Path(src).read_text())["epoch"] == 2
        assert json.loads(path.read_text())["epoch"] == 1  # old content intact until the rename
        real_replace(src, dst)

    def fsync(fd: int) -> None:
        calls.append("fsync")
        real_fsync(fd)

    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(os, "fsync", fsync)
    store.write(QuorumStateData(2, None, 3))
    assert calls == ["fsync", "rename", "fsync"]  # file, then the directory


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"not json",
        b"[]",
        b'{"version": 1}',
        b'{"version": 3, "cluster_id": "c1", "node_id": 3, "epoch": 1, '
        b'"voted_for": null, "leader_id": null}',
        b'{"version": 1, "cluster_id": "c1", "node_id": 3, "epoch": 2147483647, '
        b'"voted_for": null, "leader_id": null}',
        b'{"version": 1, "cluster_id": "c1", "node_id": 3, "epoch": "1", '
        b'"voted_for": null, "leader_id": null}',
        b'{"version": 1, "cluster_id": "c1", "node_id": 3, "epoch": -1, '
        b'"voted_for": null, "leader_id": null}',
    ],
)
def test_damaged_files_are_refused_with_the_path(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "quorum-state"
    path.write_bytes(content)
    with pytest.raises(QuorumStateCorruptionError) as caught:
        FileQuorumStateStore(path, "c1", 3)
    assert str(path) in str(caught.value)
    assert path.read_bytes() == content


@pytest.mark.parametrize(
    ("field", "value"), [("voted_for", 2), ("epoch", 0), ("leader_id", 3), ("epoch", 2)]
)
def test_an_edited_file_fails_its_checksum(tmp_path: Path, field: str, value: int) -> None:
    """A vote or epoch changed by hand would let the node vote twice in one epoch."""
    path = tmp_path / "quorum-state"
    FileQuorumStateStore(path, "c1", 3).write(QuorumStateData(1, 1, None))
    doc = json.loads(path.read_text())
    doc[field] = value
    path.write_text(json.dumps(doc))
    with pytest.raises(QuorumStateCorruptionError, match="checksum mismatch") as caught:
        FileQuorumStateStore(path, "c1", 3)
    assert str(path) in str(caught.value)


V1_FILE = (
    '{"version": 1, "cluster_id": "c1", "node_id": 3, "epoch": 4, '
    '"voted_for": 2, "leader_id": null}'
)


def test_a_version_1_file_is_refused_at_start_and_upgraded_once_on_request(
    tmp_path: Path,
) -> None:
    path = tmp_path / "quorum-state"
    path.write_text(V1_FILE)
    with pytest.raises(QuorumStateCorruptionError, match="upgrade-quorum-state"):
        FileQuorumStateStore(path, "c1", 3)
    assert path.read_text() == V1_FILE
    assert FileQuorumStateStore.upgrade(path, "c1", 3) == QuorumStateData(4, 2, None)
    assert json.loads(path.read_text())["version"] == 2
    assert FileQuorumStateStore(path, "c1", 3).read() == QuorumStateData(4, 2, None)
    assert FileQuorumStateStore.upgrade(path, "c1", 3) is None  # already version 2


def test_a_version_2_file_edited_to_claim_version_1_is_refused(tmp_path: Path) -> None:
    """Editing the version field must not be a way around the checksum."""
    path = tmp_path / "quorum-state"
    FileQuorumStateStore(path, "c1", 3).write(QuorumStateData(7, 1, None))
    doc = json.loads(path.read_text())
    doc["version"], doc["voted_for"] = 1, 2
    path.write_text(json.dumps(doc))
    before = path.read_bytes()
    for open_it in (
        lambda: FileQuorumStateStore(path, "c1", 3),
        lambda: FileQuorumStateStore.upgrade(path, "c1", 3),
    ):
        with pytest.raises(QuorumStateCorruptionError, match="version was edited"):
            open_it()
    assert path.read_bytes() == before


def test_a_changed_cluster_id_names_meta_properties(tmp_path: Path) -> None:
    path = tmp_path / "quorum-state"
    FileQuorumStateStore(path, "c1", 3).write(QuorumStateData(1, None, None))
    with pytest.raises(InconsistentClusterIdError) as caught:
        FileQuorumStateStore(path, "c2", 3)
    assert "meta.properties says cluster 'c2'" in str(caught.value)
