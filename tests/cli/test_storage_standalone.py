"""`quorumctl storage format --standalone` (kafka-storage.sh's flag, KIP-853):
one controller, kraft.version 1, a bootstrap VotersRecord naming itself alone;
the combinations Kafka refuses are refused here with its words, writing nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from quorum.common.meta_properties import random_uuid, read_meta_properties
from quorum.log.file_log import FileLogStore
from quorum.log.kraft_bootstrap import read_kraft_version
from quorum.raft.voters import decode_voters
from tests.cli.storage_cli import format_, write_config

PARTITION = "__cluster_metadata-0"
BOOTSTRAP = {
    "controller.quorum.voters": "",
    "controller.quorum.bootstrap.servers": "127.0.0.1:9093",
}


def test_standalone_writes_this_controller_as_the_only_voter(tmp_path: Path) -> None:
    config = write_config(tmp_path, 1, BOOTSTRAP)
    done = format_(config, random_uuid(), "--standalone")
    assert done.returncode == 0, done.stderr
    assert "kraft.version 1" in done.stdout
    data = tmp_path / "controller"
    assert read_kraft_version(data) == 1
    directory_id = read_meta_properties(data).directory_id
    with FileLogStore(data / PARTITION) as log_store:
        _, batches = log_store.recover()
    assert len(batches) == 1 and batches[0].control and batches[0].base_offset == 0
    voters = decode_voters(batches[0].records[0])
    assert [(v.voter_id, v.directory_id) for v in voters.voters] == [(1, directory_id)]
    assert [(e.host, e.port) for e in voters.voter(1).endpoints] == [("127.0.0.1", 9093)]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ("--standalone", "--initial-controllers", f"1@127.0.0.1:9093:{random_uuid()}"),
            "argument --initial-controllers/-I: not allowed with argument --standalone/-s",
        ),
        (
            ("--standalone", "--no-initial-controllers"),
            "argument --no-initial-controllers/-N: not allowed with argument --standalone/-s",
        ),
    ],
)
def test_standalone_with_another_voter_flag_is_refused(
    tmp_path: Path, flags: tuple[str, ...], message: str
) -> None:
    config = write_config(tmp_path, 1, BOOTSTRAP)
    done = format_(config, random_uuid(), *flags)
    assert done.returncode == 1 and message in done.stderr, done.stderr
    assert not (tmp_path / "controller").exists()


def test_standalone_on_a_broker_is_refused(tmp_path: Path) -> None:
    config = write_config(tmp_path, 5, {"process.roles": "broker"})
    done = format_(config, random_uuid(), "--standalone")
    assert done.returncode == 1
    assert "You can only use --standalone on a controller." in done.stderr, done.stderr
    assert not (tmp_path / "controller").exists()


def test_standalone_with_a_wildcard_listener_is_refused(tmp_path: Path) -> None:
    config = write_config(tmp_path, 1, {**BOOTSTRAP, "listeners": "CONTROLLER://0.0.0.0:9093"})
    done = format_(config, random_uuid(), "--standalone")
    assert done.returncode == 1 and "no address others can dial" in done.stderr, done.stderr
    assert not (tmp_path / "controller").exists()
