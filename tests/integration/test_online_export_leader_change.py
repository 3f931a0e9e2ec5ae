"""An online export (`quorumctl log export --bootstrap-controller`) that loses its
leader half-way: killed, or deposed while it still answers. The export must go on
at the new leader and deliver exactly the committed log up to the high watermark
it started from: no gap, no duplicate, no byte different from a survivor's log.

The export's reader (`fetch_committed`) is driven step by step so that the
leader change lands between two fetches, which a whole-process run could not
promise: the log is made larger than one fetch answer first.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from controller_cluster import Cluster, run, running_cluster

from quorum.cli.data_dir import partition_dir
from quorum.cli.export_sources import LogReadReport, describe_leader, fetch_committed, stream_log
from quorum.controller.record_codec import noop
from quorum.raft.records import Batch

RECORDS_PER_WRITE = 1_000
WRITES = 20  # 20,000 records: more than one fetch answer carries


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    with running_cluster(tmp_path) as c:
        run(_fill(c))
        yield c


async def _fill(cluster: Cluster) -> None:
    client = cluster.client()
    try:
        for w in range(WRITES):
            records = [noop(b"w%03d-%05d" % (w, i)) for i in range(RECORDS_PER_WRITE)]
            await client.write(records, deadline_s=30)
    finally:
        await client.close()


def _survivor_log(cluster: Cluster, node_id: int, stop: int) -> list[tuple[int, int, bytes]]:
    """(offset, epoch, record) for every record below `stop` in a node's log on disk."""
    rows = []
    for batch in stream_log(partition_dir(cluster.procs[node_id].data_dir), LogReadReport()):
        for i, record in enumerate(batch.records):
            if batch.base_offset + i < stop:
                rows.append((batch.base_offset + i, batch.epoch, record))
    return rows


def _rows(batches: list[Batch]) -> list[tuple[int, int, bytes]]:
    return [(b.base_offset + i, b.epoch, r) for b in batches for i, r in enumerate(b.records)]


def _export_across(cluster: Cluster, change_leader: str) -> None:
    addresses = cluster.voter_addresses()
    leader = describe_leader(addresses, cluster.cluster_id)
    stop = leader.high_watermark
    assert stop >= WRITES * RECORDS_PER_WRITE
    reader = fetch_committed(addresses, cluster.cluster_id, leader)
    exported = [next(reader)]
    assert exported[0].base_offset + len(exported[0].records) < stop  # more to read
    if change_leader == "killed":
        cluster.kill(leader.leader_id)
    else:
        cluster.kill(leader.leader_id, signal.SIGSTOP)
        others = [n for n in cluster.procs if n != leader.leader_id]
        cluster.wait_for_leader(among=others)
        cluster.kill(leader.leader_id, signal.SIGCONT)
        cluster.wait_until(
            lambda: cluster.describe(leader.leader_id).role != "leader",
            what="the old leader to step down",
        )
    exported.extend(reader)
    rows = _rows(exported)
    assert [offset for offset, _, _ in rows] == list(range(stop))
    survivor = next(n for n in cluster.procs if n != leader.leader_id)
    time.sleep(0.5)  # the survivor's appends reach its file before we read it
    assert rows == _survivor_log(cluster, survivor, stop)


def test_export_goes_on_after_the_leader_is_killed(cluster: Cluster) -> None:
    _export_across(cluster, "killed")


def test_export_goes_on_after_the_leader_is_deposed(cluster: Cluster) -> None:
    """The old leader still answers, with an error instead of records."""
    _export_across(cluster, "deposed")
