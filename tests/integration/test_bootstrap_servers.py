"""KIP-853 bootstrapping on real processes: a cluster grown from one controller.

Controller 1 is formatted `--standalone` (the only voter); controllers 2 and 3
are formatted `--no-initial-controllers`. All three know only
`controller.quorum.bootstrap.servers`, no static voter list: 2 and 3 run as
observers that find the leader through those servers, and are added with
`quorumctl quorum add-controller` while writes are acknowledged. A broker agent
given only the bootstrap servers registers and follows the log.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from controller_cluster import BIN, Cluster, Proc, admin_pb, ctl_json, free_port, quorumctl
from voters_under_writes import (
    Writer,
    add_when_caught_up,
    check_acknowledged,
    voters,
    wait_caught_up,
)

from quorum.common.config import render_properties
from quorum.common.meta_properties import random_uuid, read_meta_properties

IDS = (1, 2, 3)


def bootstrap_cluster(root: Path) -> Cluster:
    cluster = Cluster(root, random_uuid())
    (root / "config").mkdir(parents=True)
    (root / "logs").mkdir(parents=True)
    for node in IDS:
        cluster.procs[node] = Proc(
            node, free_port(), free_port(),
            root / "config" / f"controller-{node}.properties",
            root / f"controller-{node}", root / "logs" / f"controller-{node}.log",
        )  # fmt: skip
    servers = ",".join(p.address for p in cluster.procs.values())
    for node, proc in cluster.procs.items():
        props = {
            "node.id": str(node),
            "process.roles": "controller",
            "controller.quorum.bootstrap.servers": servers,
            "listeners": f"CONTROLLER://{proc.address}",
            "metadata.log.dir": str(proc.data_dir),
            "metrics.listener": f"http://{proc.host}:{proc.metrics_port}",
        }
        proc.config.write_text(render_properties(props))
    cluster._format_all(
        [p.config for p in cluster.procs.values()],
        flags={
            p.config: ["--standalone"] if n == 1 else ["--no-initial-controllers"]
            for n, p in cluster.procs.items()
        },
    )
    cluster.directory_ids = {
        n: read_meta_properties(p.data_dir).directory_id or "" for n, p in cluster.procs.items()
    }
    return cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = bootstrap_cluster(Path(tmp_path_factory.mktemp("bootstrap-servers")))
    c.start()
    try:
        c.wait_for_leader([1], timeout_s=60)
        yield c
    finally:
        c.stop_all()


def test_controllers_found_through_bootstrap_servers_are_added_under_writes(
    cluster: Cluster,
) -> None:
    assert voters(cluster) == {1: cluster.directory_ids[1]}
    # The observers found the leader through the bootstrap servers alone.
    cluster.wait_until(
        lambda: all(cluster.describe(n).leader_id == 1 for n in (2, 3)), 60, "observers follow 1"
    )

    # `quorum describe --replication` shows the voter's directory id and the
    # observers that could be promoted, caught up (lag 0) with theirs.
    def observers_caught_up() -> bool:
        rows = ctl_json(cluster, "quorum", "describe", "--replication")
        seen = {r["NodeId"]: r for r in rows}
        assert seen[1]["Status"] == "Leader"
        assert seen[1]["DirectoryId"] == cluster.directory_ids[1]
        return all(
            seen[n]["Status"] == "Observer"
            and seen[n]["DirectoryId"] == cluster.directory_ids[n]
            and seen[n]["Lag"] == 0
            for n in (2, 3)
        )

    cluster.wait_until(observers_caught_up, 60, "describe --replication lists the observers")
    with Writer(cluster) as writer:
        writer.wait_for_more(0)
        for node in (2, 3):
            out = add_when_caught_up(cluster, node, by_config=True)
            assert "added as a voter" in out, out
            writer.wait_for_more(len(writer.acknowledged))
        assert voters(cluster) == {n: cluster.directory_ids[n] for n in IDS}
    assert all(cluster.describe(n).role in ("leader", "follower") for n in IDS)

    final = cluster.wait_for_leader()
    wait_caught_up(cluster, IDS, final)
    check_acknowledged(cluster, writer, IDS, final)


def test_a_broker_given_bootstrap_servers_registers_and_follows(cluster: Cluster) -> None:
    servers = ",".join(p.address for p in cluster.procs.values())
    cluster.add_brokers(
        101,
        controller__quorum__voters="",
        controller__quorum__bootstrap__servers=servers,
        broker__heartbeat__interval__ms="500",
    )
    cluster.start_brokers(101)

    def online() -> bool:
        reply = cluster.call("admin", "DescribeCluster", admin_pb.DescribeClusterRequest())
        return any(b.broker_id == 101 and b.state == "ONLINE" for b in reply.brokers)

    cluster.wait_until(online, 60, "broker 101 ONLINE")
    offsets = cluster.write(3, prefix=b"after-broker")
    leader = cluster.wait_for_leader()
    assert leader.high_watermark > offsets[-1]


def test_a_bootstrap_controller_on_a_kraft_version_0_disk_refuses_to_start(
    tmp_path: Path, cluster: Cluster
) -> None:
    proc = cluster.procs[3]
    config = tmp_path / "c.properties"
    data = tmp_path / "data"
    config.write_text(
        proc.config.read_text()
        .replace(str(proc.data_dir), str(data))
        .replace(f"CONTROLLER://{proc.address}", f"CONTROLLER://127.0.0.1:{free_port()}")
    )
    done = quorumctl(
        "storage", "format", "--cluster-id", cluster.cluster_id, "--config", str(config)
    )
    assert done.returncode == 0, done.stderr
    started = subprocess.run(
        [str(BIN / "quorum-controller"), "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert started.returncode == 1, started.stderr
    assert "controller.quorum.bootstrap.servers needs kraft.version 1" in started.stderr
