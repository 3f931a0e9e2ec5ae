"""The offline `quorumctl` tools (`log dump`, `snapshot list|inspect`, `metadata
shell`) on data a real cluster wrote, read after (and beside) it: output, JSON
checked against what was created, corruption and usage errors, and the shell
driven through a pseudo-terminal."""

from __future__ import annotations

import json
import os
import pty
import select
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from controller_cluster import BIN, Cluster, quorumctl, run

from quorum.admin_client import AdminClient
from quorum.common.meta_properties import random_uuid
from quorum.gen import admin_pb2 as api
from quorum.gen import broker_pb2 as bpb

TOPICS = [f"offline-{i}" for i in range(8)]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, int]]:
    """A stopped cluster's controller-1 and the offset below which only the first
    topic existed."""
    c = Cluster.create(
        Path(tmp_path_factory.mktemp("offline")),
        extra={
            "metadata.snapshot.max.new.record.bytes": "512",
            "metadata.snapshot.max.interval.ms": "1000",
        },
    )
    c.start()
    try:
        c.wait_for_leader()

        async def create() -> int:
            client = AdminClient(c.voter_addresses(), c.cluster_id)
            first_done = 0
            try:
                registered = await client.broker("RegisterBroker", bpb.RegisterBrokerRequest(
                    broker_id=7, incarnation_id=random_uuid()))  # fmt: skip
                beat = bpb.BrokerHeartbeatRequest(
                    broker_id=7, broker_epoch=registered.broker_epoch,
                    current_metadata_offset=registered.broker_epoch + 1,
                )  # fmt: skip
                assert not (await client.broker("BrokerHeartbeat", beat)).is_fenced
                for i, name in enumerate(TOPICS):
                    topic = api.CreatableTopic(name=name, num_partitions=3, replication_factor=1,
                                               configs={"retention.ms": "1000"})  # fmt: skip
                    reply = await client.admin(
                        "CreateTopics", api.CreateTopicsRequest(topics=[topic])
                    )
                    assert reply.topics[0].error.error_code == 0, reply
                    if i == 0:
                        view = await client.admin("DescribeCluster", api.DescribeClusterRequest())
                        first_done = view.metadata_offset
            finally:
                await client.close()
            return first_done

        first_done = run(create())
        c.wait_until(
            lambda: c.describe(1).applied_offset == c.describe(c.wait_for_leader().leader_id)
            .applied_offset, 10, "controller 1 caught up",
        )  # fmt: skip
        time.sleep(1.5)  # a snapshot of the latest image (interval check runs every 1 s)
    finally:
        c.stop_all()
    yield c.procs[1].data_dir, first_done


def test_log_dump_shows_every_batch_and_decoded_record(data_dir: tuple[Path, int]) -> None:
    directory, _ = data_dir
    done = quorumctl("log", "dump", "--dir", str(directory), "--output", "json")
    assert done.returncode == 0, done.stderr
    batches = json.loads(done.stdout)
    offsets = [r["Offset"] for b in batches for r in b["Records"]]
    assert offsets == list(range(offsets[0], offsets[0] + len(offsets)))  # contiguous
    assert all(b["CrcValid"] for b in batches)
    names = [r["Record"]["name"] for b in batches for r in b["Records"] if r["Type"] == "topic"]
    assert names == TOPICS  # segments below a snapshot stay until retention removes them
    assert offsets[0] == 0 and batches[0]["Records"][0]["Type"] == "leader_change"
    # Every field, defaults included (partition 0), int64 as numbers (issue 22).
    partitions = [r["Record"] for b in batches for r in b["Records"] if r["Type"] == "partition"]
    assert any(p["partition_id"] == 0 for p in partitions)
    assert all(isinstance(p["leader_epoch"], int) for p in partitions)
    epochs = [r["Record"]["broker_epoch"] for b in batches for r in b["Records"]
              if r["Type"] == "register_broker"]  # fmt: skip
    assert all(isinstance(e, int) for e in epochs)
    text = quorumctl("log", "dump", "--dir", str(directory))
    assert text.returncode == 0 and "baseOffset: " in text.stdout and "| offset: " in text.stdout


def test_snapshot_list_and_inspect_agree_with_the_manifest(data_dir: tuple[Path, int]) -> None:
    directory, _ = data_dir
    listed = quorumctl("snapshot", "list", "--dir", str(directory), "--output", "json")
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    assert rows and [r["EndOffset"] for r in rows] == sorted(r["EndOffset"] for r in rows)
    latest = rows[-1]
    done = quorumctl("snapshot", "inspect", "--dir", str(directory), "--output", "json")
    assert done.returncode == 0, done.stderr
    inspected = json.loads(done.stdout)
    assert inspected["Manifest"] == latest
    assert len(inspected["Records"]) == latest["Records"]
    which = f"{rows[0]['EndOffset']}-{rows[0]['Epoch']}"
    keys = quorumctl("snapshot", "inspect", "--dir", str(directory), "--snapshot", which,
                     "--keys-only")  # fmt: skip
    assert keys.returncode == 0 and "| " in keys.stdout
    missing = quorumctl("snapshot", "inspect", "--dir", str(directory), "--snapshot", "1-999")
    assert missing.returncode == 1 and "no snapshot 1-999" in missing.stderr


def copy_of(data_dir: tuple[Path, int], destination: Path) -> Path:
    """A copy of the shared data directory that a test may change."""
    shutil.copytree(data_dir[0], destination)
    return destination


def test_the_offline_tools_leave_a_live_nodes_files_alone(
    data_dir: tuple[Path, int], tmp_path: Path
) -> None:
    """A snapshot being written by a running node (a .tmp- directory) survives."""
    copy = copy_of(data_dir, tmp_path / "live")
    in_progress = copy / "__cluster_metadata-0" / "snapshots" / ".tmp-in-progress"
    in_progress.mkdir()
    before = sorted(p.name for p in (copy / "__cluster_metadata-0").iterdir())
    for command in (["snapshot", "list"], ["snapshot", "inspect"], ["log", "dump"]):
        assert quorumctl(*command, "--dir", str(copy)).returncode == 0
    piped_shell(copy, "ls /\n")
    assert in_progress.is_dir()
    assert sorted(p.name for p in (copy / "__cluster_metadata-0").iterdir()) == before


def test_corruption_and_bad_directories_exit_1_with_a_clear_message(
    data_dir: tuple[Path, int], tmp_path: Path
) -> None:
    copy = copy_of(data_dir, tmp_path / "copy")
    segment = sorted((copy / "__cluster_metadata-0").glob("*.log"))[0]
    data = bytearray(segment.read_bytes())
    data[len(data) // 2] ^= 0xFF
    segment.write_bytes(bytes(data))
    done = quorumctl("log", "dump", "--dir", str(copy))
    assert done.returncode == 1 and segment.name in done.stderr and "Traceback" not in done.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    for command in (["log", "dump"], ["snapshot", "list"], ["metadata", "shell"]):
        result = quorumctl(*command, "--dir", str(empty))
        assert result.returncode == 1 and "not a metadata log directory" in result.stderr
    assert quorumctl("log", "dump").returncode == 2  # --dir is required


def piped_shell(directory: Path, commands: str, *flags: str) -> str:
    done = subprocess.run(
        [str(BIN / "quorumctl"), "metadata", "shell", "--dir", str(directory), *flags],
        input=commands, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_shell_at_an_earlier_offset_shows_fewer_topics(data_dir: tuple[Path, int]) -> None:
    directory, first_done = data_dir
    everything = piped_shell(directory, "ls /topics\n").split()
    assert everything == [f"{name}/" for name in sorted(TOPICS)]
    earlier = piped_shell(directory, "ls /topics\n", "--at-offset", str(first_done))
    assert earlier.split() == [f"{TOPICS[0]}/"]


def _read_until(fd: int, marker: bytes, timeout_s: float = 20) -> bytes:
    out = b""
    deadline = time.monotonic() + timeout_s
    while marker not in out:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            raise AssertionError(f"no {marker!r} in {out!r}")
        out += os.read(fd, 4096)
    return out


def test_the_shell_on_a_terminal(data_dir: tuple[Path, int]) -> None:
    directory, _ = data_dir
    pid, fd = pty.fork()
    if pid == 0:  # the child: quorumctl on the pseudo-terminal
        os.execv(str(BIN / "quorumctl"),
                 ["quorumctl", "metadata", "shell", "--dir", str(directory)])  # fmt: skip
    try:
        _read_until(fd, b"/]> ")
        os.write(fd, b"ls /topics\n")
        listing = _read_until(fd, b"/]> ")
        assert all(name.encode() in listing for name in TOPICS)
        os.write(fd, f"cd /topics/{TOPICS[1]}\n".encode())
        _read_until(fd, f"/topics/{TOPICS[1]}]> ".encode())
        os.write(fd, b"cat partitions/0\n")
        shown = _read_until(fd, b"]> ")
        assert b'"replicas"' in shown and b'"leader": 7' in shown
        os.write(fd, b"cat config\n")
        assert b'"retention.ms": "1000"' in _read_until(fd, b"]> ")
        os.write(fd, b"find /brokers\n")
        assert b"/brokers/7" in _read_until(fd, b"]> ")
        os.write(fd, b"exit\n")
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
    finally:
        os.close(fd)
