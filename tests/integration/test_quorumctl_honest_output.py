"""Output that does not mislead: refused ACLs print no table row, an election for
an unknown partition prints no row, an election's row shows the leader, a node
without snapshots lists none (exit 0, `[]` in JSON), and the brokers appear as
the quorum's observers, as in Kafka. Real controllers and a broker, by
subprocess."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from controller_cluster import Cluster, cluster_with_online_brokers, ctl, ctl_json, quorumctl

BROKER = 41


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with cluster_with_online_brokers(Path(tmp_path_factory.mktemp("honest-output")), BROKER) as c:
        yield c


def test_a_refused_acl_prints_no_row(cluster: Cluster) -> None:
    done = ctl(
        cluster, "acls", "add", "--allow-principal", "alice", "--allow-principal", "User:dora",
        "--operation", "read", "--topic", "orders", "--output", "json",
    )  # fmt: skip
    assert done.returncode == 1
    assert "acl alice READ" in done.stderr
    assert [r["Principal"] for r in json.loads(done.stdout)] == ["User:dora"]
    alone = ctl(
        cluster, "acls", "add", "--allow-principal", "alice", "--operation", "read",
        "--topic", "orders",
    )  # fmt: skip
    assert alone.returncode == 1 and alone.stdout == ""


def test_elections_show_leaders_and_no_row_for_an_unknown_partition(cluster: Cluster) -> None:
    ctl_json(cluster, "topics", "create", "elected", "--partitions", "1")
    unknown = ctl(
        cluster, "elect-leaders", "--election-type", "preferred", "--topic", "never-was",
        "--partition", "0",
    )  # fmt: skip
    assert unknown.returncode == 1
    assert "UNKNOWN_TOPIC_OR_PARTITION" in unknown.stderr and unknown.stdout == ""
    rows = ctl_json(
        cluster, "elect-leaders", "--election-type", "preferred", "--topic", "elected",
        "--partition", "0",
    )  # fmt: skip
    assert rows == [
        {"Topic": "elected", "Partition": 0, "Leader": BROKER, "Result": "ELECTION_NOT_NEEDED"}
    ]


def test_no_snapshots_is_an_empty_list(cluster: Cluster) -> None:
    directory = str(cluster.procs[1].data_dir)
    listed = quorumctl("snapshot", "list", "--dir", directory, "--output", "json")
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == []
    table = quorumctl("snapshot", "list", "--dir", directory)
    assert table.returncode == 0 and table.stdout == ""
    assert "no snapshots under" in table.stderr


def test_brokers_are_the_quorums_observers(cluster: Cluster) -> None:
    status = ctl_json(cluster, "quorum", "describe", "--status")
    assert status["CurrentObservers"] == [BROKER]
    assert status["CurrentVoters"] == [1, 2, 3]
    rows = ctl_json(cluster, "quorum", "describe", "--replication")
    broker = next(r for r in rows if r["NodeId"] == BROKER)
    assert broker["Status"] == "Observer"
    assert broker["LogEndOffset"] > 0 and broker["Lag"] >= 0
    assert broker["LastFetchTimestamp"] > 0


def test_features_describe_shows_the_supported_range_and_downgrade(cluster: Cluster) -> None:
    upgraded = ctl(cluster, "features", "upgrade", "--feature", "metadata.version=1")
    assert upgraded.returncode == 0, upgraded.stderr
    rows = {r["Feature"]: r for r in ctl_json(cluster, "features", "describe")}
    assert rows["metadata.version"] == {
        "Feature": "metadata.version", "SupportedMinVersion": 1, "SupportedMaxVersion": 1,
        "FinalizedVersionLevel": 1,
    }  # fmt: skip
    assert rows["kraft.version"]["FinalizedVersionLevel"] == 0  # supported, not finalized
    dry = ctl_json(cluster, "features", "downgrade", "--feature", "metadata.version=0", "--dry-run")
    assert dry == [{"Feature": "metadata.version", "Level": 0, "Result": "valid"}]
    still = {r["Feature"]: r for r in ctl_json(cluster, "features", "describe")}
    assert still["metadata.version"]["FinalizedVersionLevel"] == 1
    higher = ctl(cluster, "features", "downgrade", "--feature", "metadata.version=7")
    assert higher.returncode == 1 and "INVALID_UPDATE_VERSION" in higher.stderr
    disabled = ctl_json(cluster, "features", "downgrade", "--feature", "kraft.version=0")
    assert disabled == [{"Feature": "kraft.version", "Level": 0, "Result": "disabled"}]


def test_a_broker_is_ready_once_online(cluster: Cluster) -> None:
    port = cluster.brokers[BROKER].metrics_port
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as answer:
        assert answer.status == 200 and answer.read() == b"ONLINE\n"
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5)
    assert missing.value.code == 404
