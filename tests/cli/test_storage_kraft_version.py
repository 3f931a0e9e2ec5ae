"""`quorumctl storage format --initial-controllers / --no-initial-controllers` (KIP-853).

Run as the real command: what lands on disk (kraft.version, the node's directory
id, the initial VotersRecord as the log's first entry, byte for byte equal on
every initial controller) and what is refused (changing nothing).
"""

from __future__ import annotations

from pathlib import Path

from quorum.common.meta_properties import random_uuid, read_meta_properties
from quorum.log.file_log import FileLogStore
from quorum.log.kraft_bootstrap import BOOTSTRAP_FILE, read_kraft_version
from quorum.raft.voters import decode_voters
from tests.cli.storage_cli import format_, write_config

PARTITION = "__cluster_metadata-0"


def _initial(dirs: dict[int, str]) -> str:
    return ",".join(f"{n}@127.0.0.1:{9092 + n}:{d}" for n, d in sorted(dirs.items()))


def test_initial_controllers_write_kraft_version_1_and_the_first_voter_set(
    tmp_path: Path,
) -> None:
    cluster_id = random_uuid()
    dirs = {1: random_uuid(), 2: random_uuid()}
    first_entries = []
    for node_id in (1, 2):
        home = tmp_path / f"n{node_id}"
        home.mkdir()
        config = write_config(home, node_id)
        done = format_(config, cluster_id, "--initial-controllers", _initial(dirs))
        assert done.returncode == 0, done.stderr
        assert "kraft.version 1" in done.stdout
        data = home / "controller"
        assert read_kraft_version(data) == 1
        assert read_meta_properties(data).directory_id == dirs[node_id]
        with FileLogStore(data / PARTITION) as log_store:
            _, batches = log_store.recover()
        assert len(batches) == 1 and batches[0].control and batches[0].base_offset == 0
        voters = decode_voters(batches[0].records[0])
        assert {v.voter_id: v.directory_id for v in voters.voters} == dirs
        assert [(e.host, e.port) for e in voters.voter(2).endpoints] == [("127.0.0.1", 9094)]
        first_entries.append(batches[0])
    assert first_entries[0] == first_entries[1]


def test_no_initial_controllers_is_kraft_version_1_with_an_empty_log(tmp_path: Path) -> None:
    config = write_config(tmp_path, 1)
    done = format_(config, random_uuid(), "--no-initial-controllers")
    assert done.returncode == 0, done.stderr
    data = tmp_path / "controller"
    assert read_kraft_version(data) == 1
    assert not (data / PARTITION).exists()


def test_without_either_flag_the_node_stays_at_kraft_version_0(tmp_path: Path) -> None:
    config = write_config(tmp_path, 1)
    assert format_(config, random_uuid()).returncode == 0
    assert read_kraft_version(tmp_path / "controller") == 0
    assert not (tmp_path / "controller" / BOOTSTRAP_FILE).exists()


def test_bad_initial_controllers_are_refused_and_nothing_is_written(tmp_path: Path) -> None:
    config = write_config(tmp_path, 1)
    good = random_uuid()
    for bad in (
        "1@127.0.0.1:9093",  # no directory id
        f"x@127.0.0.1:9093:{good}",
        f"1@127.0.0.1:9093:{good},1@127.0.0.1:9094:{random_uuid()}",  # id twice
        "1@127.0.0.1:9093:not-a-uuid",
        "",
    ):
        done = format_(config, random_uuid(), "--initial-controllers", bad)
        assert done.returncode == 1, bad
        assert "initial-controllers" in done.stderr, done.stderr
        assert not (tmp_path / "controller").exists()
    both = format_(
        config,
        random_uuid(),
        "--initial-controllers",
        f"1@127.0.0.1:9093:{good}",
        "--no-initial-controllers",
    )
    assert both.returncode == 1 and "not allowed with argument" in both.stderr, both.stderr
