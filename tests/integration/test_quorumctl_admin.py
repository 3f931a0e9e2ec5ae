"""Every online `quorumctl` command by subprocess against three real controllers and
three real broker agents: output, exit codes, JSON checked against the admin API,
and the error paths (unknown topic, duplicate topic, invalid config, no reachable
controller, wrong cluster id, usage errors)."""

from __future__ import annotations

import json
import os
import pty
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from controller_cluster import BIN, Cluster, cluster_with_online_brokers, ctl, ctl_json, quorumctl

from quorum.gen import admin_pb2 as api

BROKERS = (21, 22, 23)


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """Three brokers ONLINE and a topic `orders` (4 partitions, replication 3)."""
    with cluster_with_online_brokers(
        Path(tmp_path_factory.mktemp("quorumctl-admin")), *BROKERS
    ) as c:
        _create(c, "orders", "--partitions", "4", "--replication-factor", "3",
                "--config", "min.insync.replicas=2")  # fmt: skip
        yield c


@pytest.fixture
def cluster(shared: Cluster) -> Cluster:
    """The shared cluster as every test starts from it, in any order: its three
    brokers running and ONLINE (a test that stopped and unregistered one gets it
    back for the next: the agent registers again when it starts)."""
    dead = [b for b in BROKERS if not shared.brokers[b].alive()]
    if dead:
        shared.start_brokers(*dead)
        shared.wait_until(
            lambda: (
                sorted(
                    r["Id"] for r in ctl_json(shared, "brokers", "list") if r["State"] == "ONLINE"
                )
                == sorted(BROKERS)
            ),
            30,
            f"brokers {dead} registered and ONLINE again",
        )
    return shared


@pytest.fixture(scope="module")
def degraded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """Broker 23 stopped and unregistered under topics that lean on it: `orders`
    (some partitions prefer 23), `on-23` (partition 0 only on 23) and `strict`
    (replication 3, min ISR 3)."""
    with cluster_with_online_brokers(
        Path(tmp_path_factory.mktemp("quorumctl-admin-degraded")), *BROKERS
    ) as c:
        _create(c, "orders", "--partitions", "6", "--replication-factor", "3",
                "--config", "min.insync.replicas=2")  # fmt: skip
        _create(c, "on-23", "--replica-assignment", "23,21")
        _create(c, "strict", "--partitions", "2", "--replication-factor", "3",
                "--config", "min.insync.replicas=3")  # fmt: skip
        proc = c.brokers[23]
        assert proc.popen is not None
        proc.popen.terminate()
        assert proc.popen.wait(20) == 0
        assert ctl(c, "brokers", "unregister", "--id", "23").returncode == 0
        yield c


def _create(cluster: Cluster, topic: str, *args: str) -> None:
    done = ctl(cluster, "topics", "create", topic, *args)
    assert done.returncode == 0, done.stderr


def admin(cluster: Cluster, method: str, request: Any) -> Any:
    return cluster.call("admin", method, request)


def test_topics_create_list_describe_alter_delete(cluster: Cluster) -> None:
    done = ctl(cluster, "topics", "create", "carts", "--partitions", "4",
               "--replication-factor", "3", "--config", "min.insync.replicas=2")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "carts" in done.stdout and "created" in done.stdout
    listed = ctl(cluster, "topics", "list")
    assert listed.returncode == 0 and "carts" in listed.stdout.splitlines()
    rows = ctl_json(cluster, "topics", "describe", "--topic", "carts")
    truth = admin(cluster, "DescribeTopics", api.DescribeTopicsRequest(names=["carts"]))
    by_partition = {p.partition: p for p in truth.topics[0].partitions}
    assert len(rows) == 4
    for row in rows:
        p = by_partition[row["Partition"]]
        assert (row["Leader"], row["LeaderEpoch"], row["Replicas"], row["Isr"]) == (
            p.leader, p.leader_epoch, list(p.replicas), list(p.isr))  # fmt: skip
        assert row["MinIsr"] == 2 and row["Status"] == "ok"
    table = ctl(cluster, "topics", "describe", "--topic", "carts")
    assert table.stdout.splitlines()[0].split() == [
        "Topic", "TopicId", "Partition", "Leader", "LeaderEpoch", "Replicas", "Isr",
        "OfflineReplicas", "MinIsr", "Status",
        # Asked of the brokers (test_replica_offsets_operators.py checks the values).
        "HighWatermark", "LogStartOffset", "LogEndOffsets", "Lags",
    ]  # fmt: skip
    assert ctl(cluster, "topics", "alter", "--topic", "carts", "--partitions", "6").returncode == 0
    assert len(ctl_json(cluster, "topics", "describe", "--topic", "carts")) == 6
    assert ctl(cluster, "topics", "create", "gone", "--partitions", "1").returncode == 0
    assert ctl(cluster, "topics", "delete", "gone").returncode == 0
    assert "gone" not in ctl(cluster, "topics", "list").stdout.splitlines()


def test_topic_error_paths_exit_1_with_the_error_name(cluster: Cluster) -> None:
    unknown = ctl(cluster, "topics", "describe", "--topic", "no-such-topic")
    assert unknown.returncode == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in unknown.stderr
    ctl(cluster, "topics", "create", "dup", "--partitions", "1")
    duplicate = ctl(cluster, "topics", "create", "dup", "--partitions", "1")
    assert duplicate.returncode == 1 and "TOPIC_ALREADY_EXISTS" in duplicate.stderr
    assert ctl(cluster, "topics", "create", "dup", "--if-not-exists").returncode == 0
    invalid = ctl(cluster, "topics", "create", "bad", "--partitions", "1",
                  "--replication-factor", "3", "--config", "min.insync.replicas=7")  # fmt: skip
    assert invalid.returncode == 1 and "INVALID_CONFIG" in invalid.stderr
    assert "Traceback" not in invalid.stderr
    assert "bad" not in ctl(cluster, "topics", "list").stdout.splitlines()
    assert ctl(cluster, "topics", "delete", "never-was", "--if-exists").returncode == 0
    usage = ctl(cluster, "topics", "alter", "--topic", "orders")
    assert usage.returncode == 2 and "--partitions" in usage.stderr


def test_no_reachable_controller_and_a_wrong_cluster_id(cluster: Cluster) -> None:
    # --timeout: the refusal is the same after 2 s as after the default 15 s.
    nobody = quorumctl("topics", "list", "--bootstrap-controller", "127.0.0.1:1", "--timeout", "2")
    assert nobody.returncode == 1
    assert "no controller reachable" in nobody.stderr and "127.0.0.1:1" in nobody.stderr
    wrong = ctl(cluster, "topics", "list", "--cluster-id", "not-this-cluster")
    assert wrong.returncode == 1 and "INCONSISTENT_CLUSTER_ID" in wrong.stderr


def test_configs_describe_and_alter(cluster: Cluster) -> None:
    done = ctl(cluster, "configs", "alter", "--entity-type", "topics", "--entity-name", "orders",
               "--add-config", "retention.ms=1000,cleanup.policy=compact")  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = ctl_json(cluster, "configs", "describe", "--entity-type", "topics",
                    "--entity-name", "orders")  # fmt: skip
    values = {r["Name"]: r["Value"] for r in rows}
    assert values["retention.ms"] == "1000" and values["cleanup.policy"] == "compact"
    assert ctl(cluster, "configs", "alter", "--entity-type", "topics", "--entity-name", "orders",
               "--delete-config", "retention.ms").returncode == 0  # fmt: skip
    rows = ctl_json(cluster, "configs", "describe", "--entity-type", "topics",
                    "--entity-name", "orders")  # fmt: skip
    assert "retention.ms" not in {r["Name"] for r in rows}
    every = ctl_json(cluster, "configs", "describe", "--entity-type", "topics",
                     "--entity-name", "orders", "--all")  # fmt: skip
    defaults = {r["Name"]: r["Source"] for r in every if r["Name"] not in {x["Name"] for x in rows}}
    assert "retention.ms" in defaults and set(defaults.values()) == {"DEFAULT_CONFIG"}
    bad = ctl(cluster, "configs", "alter", "--entity-type", "topics", "--entity-name", "orders",
              "--add-config", "no.such.key=1")  # fmt: skip
    assert bad.returncode == 1 and "INVALID_CONFIG" in bad.stderr
    cluster_wide = ctl(cluster, "configs", "alter", "--entity-type", "cluster",
                       "--add-config", "auto.leader.rebalance.enable=false")  # fmt: skip
    assert cluster_wide.returncode == 0, cluster_wide.stderr


def test_acls_add_list_remove(cluster: Cluster) -> None:
    done = ctl(cluster, "acls", "add", "--allow-principal", "User:alice",
               "--operation", "read", "--operation", "describe", "--topic", "orders")  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = ctl_json(cluster, "acls", "list", "--topic", "orders")
    assert sorted(r["Operation"] for r in rows) == ["DESCRIBE", "READ"]
    assert all(r["Principal"] == "User:alice" and r["Permission"] == "ALLOW" for r in rows)
    truth = admin(cluster, "DescribeAcls", api.DescribeAclsRequest(
        filter=api.AclBindingFilter(resource_type=1, pattern_type=1, operation=1,
                                    permission_type=1)))  # fmt: skip
    assert len(truth.bindings) == len(rows)
    removed = ctl_json(
        cluster, "acls", "remove", "--topic", "orders", "--principal", "User:alice", "--force"
    )
    assert len(removed) == 2
    assert ctl_json(cluster, "acls", "list", "--topic", "orders") == []
    assert ctl(cluster, "acls", "remove").returncode == 2  # refuses to remove everything
    deny = ctl(cluster, "acls", "add", "--deny-principal", "User:mallory", "--operation", "write",
               "--topic", "orders-", "--pattern-type", "prefixed")  # fmt: skip
    assert deny.returncode == 0, deny.stderr
    rows = ctl_json(cluster, "acls", "list", "--principal", "User:mallory")
    assert [(r["PatternType"], r["Permission"], r["Operation"]) for r in rows] == [
        ("PREFIXED", "DENY", "WRITE")
    ]
    assert len(ctl_json(cluster, "acls", "remove", "--principal", "User:mallory", "--force")) == 1


def test_validate_only_and_explicit_replica_assignments(cluster: Cluster) -> None:
    dry = ctl(cluster, "topics", "create", "dry", "--partitions", "2", "--validate-only")
    assert dry.returncode == 0 and "valid" in dry.stdout, dry.stderr
    assert "dry" not in ctl(cluster, "topics", "list").stdout.splitlines()
    pinned = ctl(cluster, "topics", "create", "on-23", "--replica-assignment", "23,21")
    assert pinned.returncode == 0, pinned.stderr
    rows = ctl_json(cluster, "topics", "describe", "--topic", "on-23")
    assert [r["Replicas"] for r in rows] == [[23], [21]]
    bad = ctl(cluster, "topics", "create", "bad-pin", "--replica-assignment", "23:99")
    assert bad.returncode == 1 and "INVALID_REPLICA_ASSIGNMENT" in bad.stderr
    both = ctl(cluster, "topics", "create", "x", "--replica-assignment", "21", "--partitions", "1")
    assert both.returncode == 2
    strict = ctl(cluster, "topics", "create", "strict", "--partitions", "2",
                 "--replication-factor", "3", "--config", "min.insync.replicas=3")  # fmt: skip
    assert strict.returncode == 0, strict.stderr


def test_brokers_list_and_unregister(cluster: Cluster) -> None:
    rows = ctl_json(cluster, "brokers", "list")
    assert [r["Id"] for r in rows] == list(BROKERS)
    for r in rows:
        assert r["State"] == "ONLINE" and r["AgentState"] == "ONLINE" and not r["Fenced"]
        assert 0 <= r["LastHeartbeatMs"] < 9000 and r["MetadataOffset"] > 0 and r["Lag"] >= 0
    table = ctl(cluster, "brokers", "list")
    assert table.stdout.splitlines()[0].split()[:4] == ["Id", "State", "AgentState", "Epoch"]
    missing = ctl(cluster, "brokers", "unregister", "--id", "99")
    assert missing.returncode == 1 and "BROKER_ID_NOT_REGISTERED" in missing.stderr
    proc = cluster.brokers[23]
    assert proc.popen is not None
    proc.popen.terminate()
    assert proc.popen.wait(20) == 0
    assert ctl(cluster, "brokers", "unregister", "--id", "23").returncode == 0
    assert [r["Id"] for r in ctl_json(cluster, "brokers", "list")] == [21, 22]


def test_describe_filters_match_the_admin_apis_flags(degraded: Cluster) -> None:
    """Broker 23 is gone: on-23's partition 0 is offline, strict is under min ISR."""
    cluster = degraded
    truth = cluster.call("admin", "DescribeTopics", api.DescribeTopicsRequest())
    flagged: dict[str, set[tuple[str, int]]] = {"under": set(), "min": set(), "offline": set()}
    for t in truth.topics:
        for p in t.partitions:
            for key, on in (("under", p.under_replicated), ("min", p.under_min_isr),
                            ("offline", p.leader == -1)):  # fmt: skip
                if on:
                    flagged[key].add((t.name, p.partition))
    for flag, key in (("--under-replicated-partitions", "under"),
                      ("--under-min-isr-partitions", "min"),
                      ("--unavailable-partitions", "offline")):  # fmt: skip
        rows = ctl_json(cluster, "topics", "describe", flag)
        assert {(r["Topic"], r["Partition"]) for r in rows} == flagged[key], flag
    assert ("on-23", 0) in flagged["offline"] and ("on-23", 1) not in flagged["offline"]
    assert {("strict", 0), ("strict", 1)} <= flagged["min"]
    table = ctl(cluster, "topics", "describe", "--unavailable-partitions")
    assert "Offline" in table.stdout and "none" in table.stdout


def test_elect_leaders_and_features(degraded: Cluster) -> None:
    # Broker 23 is gone: partitions it should lead cannot get it back.
    cluster = degraded
    truth = admin(cluster, "DescribeTopics", api.DescribeTopicsRequest(names=["orders"]))
    first = {p.partition: p.replicas[0] for p in truth.topics[0].partitions}
    done = ctl(cluster, "elect-leaders", "--election-type", "preferred",
               "--all-topic-partitions", "--output", "json")  # fmt: skip
    rows = json.loads(done.stdout)
    orders = {r["Partition"]: r["Result"] for r in rows if r["Topic"] == "orders"}
    for partition, result in orders.items():
        if first[partition] == 23:
            assert result == "PREFERRED_LEADER_NOT_AVAILABLE", rows
        else:
            assert result in ("ELECTED", "ELECTION_NOT_NEEDED"), rows
    # on-23's partition 0 has only broker 23, so the run always reports a failure.
    assert ("on-23", 0, "PREFERRED_LEADER_NOT_AVAILABLE") in {
        (r["Topic"], r["Partition"], r["Result"]) for r in rows
    }
    assert done.returncode == 1 and "PREFERRED_LEADER_NOT_AVAILABLE" in done.stderr
    fine = min(p for p, b in first.items() if b != 23)
    again = ctl(cluster, "elect-leaders", "--election-type", "preferred", "--topic", "orders",
                "--partition", str(fine))  # fmt: skip
    assert again.returncode == 0 and "ELECTION_NOT_NEEDED" in again.stdout, again
    usage = ctl(cluster, "elect-leaders", "--election-type", "preferred")
    assert usage.returncode == 2
    features = ctl_json(cluster, "features", "describe")
    assert isinstance(features, list)
    upgraded = ctl(cluster, "features", "upgrade", "--feature", "metadata.version=1")
    assert upgraded.returncode == 0, upgraded.stderr
    levels = {f["Feature"]: f["FinalizedVersionLevel"]
              for f in ctl_json(cluster, "features", "describe")}  # fmt: skip
    assert levels["metadata.version"] == 1
    too_high = ctl(cluster, "features", "upgrade", "--feature", "metadata.version=99")
    assert too_high.returncode == 1 and "Traceback" not in too_high.stderr


def test_bulk_create_shows_progress_on_a_terminal_and_is_quiet_when_piped(
    cluster: Cluster, tmp_path: Path
) -> None:
    names = tmp_path / "topics.txt"
    names.write_text("".join(f"bulk-{i}\n" for i in range(60)))
    args = ["topics", "create", "--from-file", str(names), "--partitions", "1",
            "--replication-factor", "1", "--bootstrap-controller",
            ",".join(cluster.voter_addresses())]  # fmt: skip
    piped = quorumctl(*args[:4], "bulk-extra", *args[4:])
    assert piped.returncode == 0, piped.stderr
    assert "creating topics" not in piped.stderr
    names.write_text("".join(f"bulk-tty-{i}\n" for i in range(60)))
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(str(BIN / "quorumctl"), ["quorumctl", *args])
    output = b""
    try:
        while True:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            output += chunk
        _, status = os.waitpid(pid, 0)
    finally:
        os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0, output
    assert b"creating topics" in output and b"100%" in output
    listed = ctl(cluster, "topics", "list").stdout.splitlines()
    assert sum(name.startswith("bulk-") for name in listed) == 121
