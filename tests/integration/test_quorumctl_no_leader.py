"""The 3 a.m. case: two of three controllers dead. `quorumctl` must show each
surviving node's own view, mark reads stale, say why writes fail, and never print
a raw gRPC error; the survivor's log names the peers it cannot reach. Real
processes, by subprocess, as an operator runs them.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from controller_cluster import Cluster, quorumctl, running_cluster

RAW_GRPC = ("AioRpcError", "debug_error_string", "Traceback", "StatusCode.")


def bootstrap(cluster: Cluster) -> str:
    return ",".join(cluster.voter_addresses())


def http_get(port: int, path: str) -> tuple[int, str]:
    """(status, body) of a GET on a process's metrics listener."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def assert_one_line_errors(stderr: str) -> None:
    for marker in RAW_GRPC:
        assert marker not in stderr, stderr


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    with running_cluster(tmp_path) as c:
        yield c


def test_endpoint_status_and_health_with_a_leader(cluster: Cluster) -> None:
    leader = cluster.wait_for_leader()
    first = cluster.voter_addresses()[0]
    done = quorumctl(
        "endpoint", "status", "--cluster", "-w", "json", "--bootstrap-controller", first
    )
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert sorted(r["NodeId"] for r in rows) == [1, 2, 3]  # found through --cluster
    roles = {r["NodeId"]: r["Role"] for r in rows}
    assert roles[leader.leader_id] == "leader"
    assert sorted(roles.values()) == ["follower", "follower", "leader"]
    assert all(r["LeaderId"] == leader.leader_id and r["Error"] == "" for r in rows)
    assert all(r["Epoch"] == leader.leader_epoch and r["HighWatermark"] > 0 for r in rows)
    # The leader voted for itself in its epoch; VotedFor is shown for every node.
    assert {r["NodeId"]: r["VotedFor"] for r in rows}[leader.leader_id] == leader.leader_id

    table = quorumctl("endpoint", "status", "--bootstrap-controller", bootstrap(cluster))
    assert table.returncode == 0, table.stderr
    assert table.stdout.splitlines()[0].split() == [
        "Endpoint", "NodeId", "Role", "Epoch", "LeaderId", "VotedFor", "LogEndOffset",
        "HighWatermark", "AppliedOffset", "CannotReach", "Error",
    ]  # fmt: skip

    health = quorumctl("endpoint", "health", "--bootstrap-controller", bootstrap(cluster))
    assert health.returncode == 0, health.stderr
    assert health.stdout.count("is healthy: took = ") == 3

    status = quorumctl(
        "quorum", "describe", "--status", "-o", "json", "--bootstrap-controller", first
    )
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["ClusterId"] == cluster.cluster_id


def test_two_of_three_dead(cluster: Cluster) -> None:
    first = cluster.wait_for_leader()
    survivor = next(n for n in cluster.procs if n != first.leader_id)
    dead = sorted(n for n in cluster.procs if n != survivor)
    for node_id in dead:
        cluster.kill(node_id)
        cluster.wait_exit(node_id)
    cluster.wait_until(
        lambda: {p.node_id for p in cluster.describe(survivor).unreachable_peers} == set(dead),
        what="the survivor to find both peers unreachable",
    )
    addresses = bootstrap(cluster)

    # 1. describe --status: the survivor's own view, a one-line summary, exit 1.
    done = quorumctl("quorum", "describe", "--status", "--bootstrap-controller", addresses)
    assert done.returncode == 1
    assert_one_line_errors(done.stderr)
    assert done.stderr.count("\n") == 1, done.stderr
    assert f"node {survivor} ({cluster.procs[survivor].address}) reachable" in done.stderr
    assert "knows no leader" in done.stderr or "knows no reachable leader" in done.stderr
    assert "cannot reach nodes " + ", ".join(map(str, dead)) in done.stderr
    assert "unreachable (connection refused)" in done.stderr
    assert "CannotReach" in done.stdout.splitlines()[0]

    rows = json.loads(
        quorumctl(
            "endpoint", "status", "-w", "json", "--bootstrap-controller", addresses
        ).stdout
    )  # fmt: skip
    mine = next(r for r in rows if r["NodeId"] == survivor)
    assert mine["Role"] != "leader" and mine["CannotReach"] == dead
    assert mine["LogEndOffset"] >= 1 and mine["HighWatermark"] >= 1
    gone = [r for r in rows if r["Role"] == "unreachable"]
    assert len(gone) == 2 and all("connection refused" in r["Error"] for r in gone)

    health = quorumctl("endpoint", "health", "--bootstrap-controller", addresses)
    assert health.returncode == 1
    assert_one_line_errors(health.stderr)
    assert "is unhealthy: knows no" in health.stderr

    # 2. a read is served, but marked stale; --require-leader refuses it.
    read = quorumctl(
        "configs", "describe", "--entity-type", "cluster", "--all", "-o", "json",
        "--bootstrap-controller", addresses,
    )  # fmt: skip
    assert read.returncode == 0, read.stderr
    assert "WARNING: possibly stale read" in read.stderr and "knows no" in read.stderr
    rows = json.loads(read.stdout)
    assert rows and all("knows no" in r["StaleRead"] for r in rows)
    strict = quorumctl(
        "configs", "describe", "--entity-type", "cluster", "--require-leader",
        "--bootstrap-controller", addresses,
    )  # fmt: skip
    assert strict.returncode == 1
    assert "refusing a read without an active controller (--require-leader)" in strict.stderr
    assert strict.stdout == ""

    # 3. a write says what happened, within its --timeout.
    started = time.monotonic()
    write = quorumctl(
        "topics", "create", "orders", "--partitions", "1", "--replication-factor", "1",
        "--timeout", "3", "--bootstrap-controller", addresses,
    )  # fmt: skip
    assert time.monotonic() - started < 12
    assert write.returncode == 1
    assert_one_line_errors(write.stderr)
    assert "no active controller: " in write.stderr
    assert f"node {survivor} ({cluster.procs[survivor].address}) reachable" in write.stderr
    assert "knows no" in write.stderr
    for node_id in dead:
        assert f"{cluster.procs[node_id].address}: unreachable (connection refused)" in write.stderr

    # /readyz says the survivor is not ready (no reachable leader); it is still live.
    port = cluster.procs[survivor].metrics_port
    code, reason = http_get(port, "/readyz")
    assert code == 503 and ("no leader known" in reason or "not reachable" in reason), reason
    assert http_get(port, "/healthz")[0] == 200

    # The survivor's log names the peers it cannot reach, once per interval.
    log_text = cluster.procs[survivor].log_text()
    warning = next(line for line in log_text.splitlines() if "cannot reach 2 of 2 peers" in line)
    assert "WARNING" in warning
    for node_id in dead:
        assert f"node {node_id} at {cluster.procs[node_id].address}" in warning
