"""Frozen controllers, busy ports and peers that come back (issue 17, items 6-8).

A frozen (SIGSTOPped) controller keeps its TCP connections open; clients and
broker agents must move on to the new active controller well before the freeze
ends. A second process given a busy port must refuse to start with a clear
message. After two of three controllers were away, the survivor and the returning
peers must elect a leader within a few election timeouts.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from controller_cluster import BIN, Cluster, quorumctl

pytestmark = pytest.mark.slow

FREEZE_S = 40.0


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster.create(tmp_path, extra={"broker.session.timeout.ms": "3000"})
    # Node 1, the first address every client and agent tries, should lead: then
    # freezing the leader freezes the first bootstrap address too (the worst case).
    for node_id, proc in c.procs.items():
        with proc.config.open("a") as out:
            timeout_ms = 200 if node_id == 1 else 1800
            out.write(f"controller.quorum.election.timeout.ms={timeout_ms}\n")
    c.start()
    try:
        c.wait_for_leader()
        yield c
    finally:
        for proc in c.procs.values():
            if proc.alive():
                assert proc.popen is not None
                os.kill(proc.popen.pid, signal.SIGCONT)
        c.stop_all()


def leader_first(cluster: Cluster) -> tuple[int, list[str]]:
    """The leader's id and a bootstrap list that names it first."""
    leader = cluster.wait_for_leader().leader_id
    first = cluster.procs[leader].address
    return leader, [first] + [a for a in cluster.voter_addresses() if a != first]


def test_quorumctl_moves_on_from_a_frozen_first_controller(cluster: Cluster) -> None:
    leader, bootstrap = leader_first(cluster)
    cluster.kill(leader, signal.SIGSTOP)
    frozen_at = time.monotonic()
    cluster.wait_for_leader([n for n in cluster.procs if n != leader])
    servers = ",".join(bootstrap)
    acl = ("--allow-principal", "User:thaw", "--operation", "read", "--topic", "orders")
    added = quorumctl("acls", "add", *acl, "--bootstrap-controller", servers)
    listed = quorumctl("acls", "list", "--bootstrap-controller", servers)
    took_s = time.monotonic() - frozen_at
    assert added.returncode == 0, added.stderr
    assert listed.returncode == 0 and "User:thaw" in listed.stdout, listed.stderr
    assert took_s < FREEZE_S / 2, f"quorumctl waited {took_s:.1f}s on a frozen controller"


def agent_state(cluster: Cluster, broker_id: int) -> str:
    metrics = cluster.brokers[broker_id].metrics()
    return next(
        key.split('"')[1]
        for key, value in metrics.items()
        if key.startswith("quorum_broker_state{") and value == 1.0
    )


def test_a_broker_agent_follows_the_new_leader_while_the_old_one_is_frozen(
    cluster: Cluster,
) -> None:
    leader, _ = leader_first(cluster)
    assert leader == 1  # the agent's first bootstrap address (ids in order)
    cluster.add_brokers(
        21,
        broker__heartbeat__interval__ms="500",
        broker__session__timeout__ms="3000",
    )
    cluster.start_brokers(21)
    cluster.wait_until(lambda: agent_state(cluster, 21) == "ONLINE", 20, "broker 21 ONLINE")

    cluster.kill(leader, signal.SIGSTOP)
    frozen_at = time.monotonic()
    cluster.wait_for_leader([n for n in cluster.procs if n != leader])
    # It may be fenced meanwhile, but must be ONLINE again long before the thaw.
    time.sleep(1)
    cluster.wait_until(
        lambda: agent_state(cluster, 21) == "ONLINE", FREEZE_S / 2, "broker 21 ONLINE again"
    )
    assert time.monotonic() - frozen_at < FREEZE_S / 2 + 2


def copy_config(cluster: Cluster, tmp_path: Path, name: str, **changes: str) -> Path:
    """Node 1's properties with a fresh, formatted data directory and `changes`."""
    data_dir = tmp_path / name
    config = tmp_path / f"{name}.properties"
    changes = {"metadata.log.dir": str(data_dir), **changes}
    lines = []
    for line in cluster.procs[1].config.read_text().splitlines():
        key = line.split("=", 1)[0]
        lines.append(f"{key}={changes[key]}" if key in changes else line)
    config.write_text("\n".join(lines) + "\n")
    cluster._format(config)
    return config


def refused_start(config: Path) -> str:
    result = subprocess.run(
        [str(BIN / "quorum-controller"), "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 1, result
    assert "Traceback" not in result.stderr, result.stderr
    return result.stderr


def test_a_second_controller_on_a_busy_port_refuses_to_start(
    cluster: Cluster, tmp_path: Path
) -> None:
    """Same listener as the running node 1 (gRPC's SO_REUSEPORT would let both
    listen and split the calls between them)."""
    twin = copy_config(cluster, tmp_path, "twin", **{"metrics.listener": ""})
    stderr = refused_start(twin)
    assert f"cannot listen on {cluster.procs[1].address}" in stderr, stderr
    assert cluster.procs[1].alive()
    cluster.write(2)


def test_a_busy_metrics_port_is_refused_with_a_clear_message(
    cluster: Cluster, tmp_path: Path
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        config = copy_config(
            cluster, tmp_path, "busy-metrics", **{"metrics.listener": f"http://127.0.0.1:{busy}"}
        )
        cluster.kill(1)  # its listener port must be free for this node
        cluster.wait_exit(1)
        stderr = refused_start(config)
    assert f"cannot listen on metrics.listener http://127.0.0.1:{busy}" in stderr, stderr


def test_the_quorum_re_forms_quickly_after_two_peers_come_back(cluster: Cluster) -> None:
    leader = cluster.wait_for_leader().leader_id
    survivor = next(n for n in cluster.procs if n != leader)
    away = [n for n in cluster.procs if n != survivor]
    for node_id in away:
        cluster.kill(node_id)
        cluster.wait_exit(node_id)
    # Long enough for gRPC's default reconnect back-off to grow past 10 s.
    time.sleep(20)
    cluster.start(*away)
    back_at = time.monotonic()
    cluster.wait_for_leader(timeout_s=30)
    took_s = time.monotonic() - back_at
    assert took_s < 8, f"the quorum took {took_s:.1f}s to re-form"
