"""`quorumctl` takes what an operator types from Kafka's tools: `--topic` for
create and delete (beside the positional names), `--bootstrap-server`, enum
values in any case (`--operation Read`, `--election-type PREFERRED`),
`--resource-pattern-type`, list values `cleanup.policy=[compact,delete]`; and
`acls remove` asks first unless `--force`. Real controllers and a broker, by
subprocess (the confirmation through a real terminal)."""

from __future__ import annotations

import os
import pty
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import controller_cluster
import pytest
from controller_cluster import BIN, Cluster, cluster_with_online_brokers

BROKER = 31


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with cluster_with_online_brokers(Path(tmp_path_factory.mktemp("kafka-spelling")), BROKER) as c:
        yield c


def ctl(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    """Every call here names the bootstrap as kafka-topics.sh does."""
    return controller_cluster.ctl(cluster, *args, flag="--bootstrap-server")


def ctl_json(cluster: Cluster, *args: str) -> Any:
    return controller_cluster.ctl_json(cluster, *args, flag="--bootstrap-server")


def test_topics_create_and_delete_with_topic_options(cluster: Cluster) -> None:
    created = ctl_json(
        cluster, "topics", "create", "--topic", "spelled", "--topic", "also",
        "--partitions", "1", "--replication-factor", "1",
    )  # fmt: skip
    assert sorted(r["Topic"] for r in created) == ["also", "spelled"]
    positional = ctl_json(cluster, "topics", "create", "plain", "--partitions", "1")
    assert [r["Result"] for r in positional] == ["created"]
    deleted = ctl_json(cluster, "topics", "delete", "--topic", "spelled", "plain")
    assert sorted(r["Topic"] for r in deleted) == ["plain", "spelled"]
    names = [t["Topic"] for t in ctl_json(cluster, "topics", "list")]
    assert "also" in names and "spelled" not in names and "plain" not in names
    nothing = ctl(cluster, "topics", "delete")
    assert nothing.returncode == 2 and "--topic" in nothing.stderr


def test_list_values_in_brackets(cluster: Cluster) -> None:
    ctl_json(
        cluster, "topics", "create", "--topic", "compacted", "--partitions", "1",
        "--config", "cleanup.policy=[compact,delete]",
    )  # fmt: skip
    described = ctl_json(
        cluster, "configs", "describe", "--entity-type", "topics", "--entity-name", "compacted"
    )
    values = {r["Name"]: r["Value"] for r in described}
    assert values["cleanup.policy"] == "compact,delete"
    altered = ctl(
        cluster, "configs", "alter", "--entity-type", "Topics", "--entity-name", "compacted",
        "--add-config", "cleanup.policy=[delete],retention.ms=1000",
    )  # fmt: skip
    assert altered.returncode == 0, altered.stderr
    described = ctl_json(
        cluster, "configs", "describe", "--entity-type", "topics", "--entity-name", "compacted"
    )
    values = {r["Name"]: r["Value"] for r in described}
    assert values["cleanup.policy"] == "delete" and values["retention.ms"] == "1000"
    unclosed = ctl(
        cluster, "configs", "alter", "--entity-type", "topics", "--entity-name", "compacted",
        "--add-config", "cleanup.policy=[compact,delete",
    )  # fmt: skip
    assert unclosed.returncode == 2 and "unclosed" in unclosed.stderr


def test_enum_values_in_any_case(cluster: Cluster) -> None:
    added = ctl(
        cluster, "acls", "add", "--allow-principal", "User:bob", "--operation", "Read",
        "--operation", "DescribeConfigs", "--topic", "bob-",
        "--resource-pattern-type", "PREFIXED",
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    rows = ctl_json(cluster, "acls", "list", "--principal", "User:bob")
    assert sorted((r["Operation"], r["PatternType"]) for r in rows) == [
        ("DESCRIBE-CONFIGS", "PREFIXED"),
        ("READ", "PREFIXED"),
    ]
    elected = ctl(
        cluster, "elect-leaders", "--election-type", "PREFERRED", "--all-topic-partitions"
    )
    assert elected.returncode == 0, elected.stderr
    wrong = ctl(cluster, "elect-leaders", "--election-type", "Sometimes", "--all-topic-partitions")
    assert wrong.returncode == 2 and "preferred" in wrong.stderr


def run_on_terminal(cluster: Cluster, answer: str, *args: str) -> subprocess.CompletedProcess[str]:
    """quorumctl with a real terminal on stdin, answering the prompt with `answer`."""
    controller, terminal = pty.openpty()
    try:
        os.write(controller, answer.encode() + b"\n")
        return subprocess.run(
            [str(BIN / "quorumctl"), *args,
             "--bootstrap-controller", ",".join(cluster.voter_addresses())],
            stdin=terminal, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
    finally:
        os.close(terminal)
        os.close(controller)


def test_acls_remove_asks_unless_forced(cluster: Cluster) -> None:
    add = ctl(
        cluster, "acls", "add", "--allow-principal", "User:carol", "--operation", "write",
        "--topic", "carol",
    )  # fmt: skip
    assert add.returncode == 0, add.stderr
    no_terminal = ctl(cluster, "acls", "remove", "--principal", "User:carol")
    assert no_terminal.returncode == 2 and "--force" in no_terminal.stderr
    declined = run_on_terminal(cluster, "n", "acls", "remove", "--principal", "User:carol")
    assert declined.returncode == 1, declined.stderr
    assert "Are you sure you want to remove the ACLs matching" in declined.stderr
    assert "principal User:carol" in declined.stderr and "nothing removed" in declined.stderr
    assert len(ctl_json(cluster, "acls", "list", "--principal", "User:carol")) == 1
    accepted = run_on_terminal(cluster, "y", "acls", "remove", "--principal", "User:carol")
    assert accepted.returncode == 0, accepted.stderr
    assert "User:carol" in accepted.stdout
    assert ctl_json(cluster, "acls", "list", "--principal", "User:carol") == []
    add = ctl(
        cluster, "acls", "add", "--allow-principal", "User:carol", "--operation", "write",
        "--topic", "carol",
    )  # fmt: skip
    forced = ctl_json(cluster, "acls", "remove", "--principal", "User:carol", "--force")
    assert len(forced) == 1
