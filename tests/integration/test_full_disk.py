"""A full disk under the leader's metadata log: the leader stops (exit code 4)
before it can acknowledge anything it did not store, and the others go on.

The test mounts a small tmpfs of its own (root only); where mounting is not
allowed it is skipped with that reason.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from controller_cluster import Cluster, run

from quorum.client import QuorumClient
from quorum.controller.record_codec import noop
from quorum.log.file_log import FileLogStore

pytestmark = pytest.mark.slow

FULL_NODE = 3
DISK_BYTES = 1 << 20
RECORD_BYTES = 8 * 1024


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount_point = tmp_path / f"controller-{FULL_NODE}"
    mount_point.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={DISK_BYTES}", "tmpfs", str(mount_point)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def favour_as_leader(cluster: Cluster, node_id: int) -> None:
    """Give `node_id` a much shorter election timeout than the other voters, so it
    times out first and wins the first election."""
    for other, proc in cluster.procs.items():
        timeout_ms = 200 if other == node_id else 1800
        with proc.config.open("a") as out:
            out.write(f"controller.quorum.election.timeout.ms={timeout_ms}\n")


def write_until_refused(cluster: Cluster) -> list[int]:
    """Acknowledged offsets of single-record writes sent until the cluster stops
    answering (the leader died), 600 writes were acknowledged or 40 s passed."""

    async def go() -> list[int]:
        client = QuorumClient(cluster.voter_addresses(), cluster.cluster_id)
        acknowledged: list[int] = []
        give_up = time.monotonic() + 40
        try:
            for i in range(600):
                if time.monotonic() > give_up:
                    return acknowledged
                payload = (b"w%06d" % i).ljust(RECORD_BYTES, b".")
                try:
                    result = await client.write([noop(payload)], deadline_s=2)
                except Exception:
                    if not cluster.procs[FULL_NODE].alive():
                        return acknowledged
                    continue
                acknowledged.append(result.last_offset)
            return acknowledged
        finally:
            await client.close()

    return run(go())


def committed_offsets(data_dir: Path) -> set[int]:
    store = FileLogStore(data_dir / "__cluster_metadata-0")
    try:
        _, batches = store.recover()
        return {b.base_offset + i for b in batches for i in range(len(b.records))}
    finally:
        store.close()


@pytest.mark.expected_log_errors(r"stopping: \w+ failed: .*No space left on device")
def test_a_leader_on_a_full_disk_stops_and_acknowledges_nothing_it_did_not_store(
    tmp_path: Path, small_disk: Path
) -> None:
    cluster = Cluster.create(tmp_path)
    try:
        favour_as_leader(cluster, FULL_NODE)
        cluster.start()
        assert cluster.wait_for_leader().leader_id == FULL_NODE
        acknowledged = write_until_refused(cluster)
        assert cluster.wait_exit(FULL_NODE, 20) == 4
        log_text = cluster.procs[FULL_NODE].log_text()
        assert "No space left on device" in log_text
        assert "append at" not in log_text  # it never went on past the failure
        # The two others elect a leader and keep committing.
        survivors = [n for n in cluster.procs if n != FULL_NODE]
        cluster.wait_for_leader(survivors)
        later = cluster.write(3)
        cluster.stop_all()
        for node_id in survivors:
            stored = committed_offsets(cluster.procs[node_id].data_dir)
            lost = [o for o in acknowledged + later if o not in stored]
            assert not lost, f"node {node_id} lacks acknowledged offsets {lost[:5]}"
        assert acknowledged, "no write was acknowledged before the disk filled"
    finally:
        cluster.stop_all()
