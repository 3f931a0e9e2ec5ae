"""`quorumctl quorum describe` against three real controllers, by subprocess."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from controller_cluster import Cluster, free_port, quorumctl, running_cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(Path(tmp_path_factory.mktemp("quorumctl"))) as c:
        c.write(5)
        yield c


def bootstrap(cluster: Cluster) -> str:
    return ",".join(cluster.voter_addresses())


def test_status_names_the_leader_epoch_and_high_watermark(cluster: Cluster) -> None:
    leader = cluster.wait_for_leader()
    done = quorumctl("quorum", "describe", "--status", "--bootstrap-controller", bootstrap(cluster))
    assert done.returncode == 0, done.stderr
    lines = dict(line.split(":", 1) for line in done.stdout.splitlines())
    assert int(lines["LeaderId"]) == leader.leader_id
    assert int(lines["LeaderEpoch"]) == leader.leader_epoch
    assert int(lines["HighWatermark"]) >= 6  # the leader change and five records
    assert lines["CurrentVoters"].strip() == "[1,2,3]"


def test_replication_json_has_one_row_per_voter_and_matches_the_leader(cluster: Cluster) -> None:
    leader = cluster.wait_for_leader()
    done = quorumctl(
        "quorum", "describe", "--replication", "-o", "json",
        "--bootstrap-controller", bootstrap(cluster),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert sorted(r["NodeId"] for r in rows) == [1, 2, 3]
    statuses = {r["NodeId"]: r["Status"] for r in rows}
    assert statuses[leader.leader_id] == "Leader"
    assert sorted(statuses.values()) == ["Follower", "Follower", "Leader"]
    assert all(r["LogEndOffset"] >= 6 and r["Lag"] >= 0 for r in rows)
    # Each controller's own directory id (meta.properties), as Kafka's tool shows it.
    for r in rows:
        meta = (cluster.procs[r["NodeId"]].data_dir / "meta.properties").read_text()
        assert f"directory.id={r['DirectoryId']}" in meta and len(r["DirectoryId"]) == 22


def test_the_table_has_kafkas_columns(cluster: Cluster) -> None:
    done = quorumctl(
        "quorum", "describe", "--replication", "--human-readable",
        "--bootstrap-controller", bootstrap(cluster),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    header = done.stdout.splitlines()[0].split()
    assert header == [
        "NodeId", "DirectoryId", "LogEndOffset", "Lag", "LastFetchTimestamp",
        "LastCaughtUpTimestamp", "Status",
    ]  # fmt: skip
    assert "ms ago" in done.stdout


def test_a_wrong_cluster_id_is_refused_with_its_error_name(cluster: Cluster) -> None:
    done = quorumctl(
        "quorum", "describe", "--cluster-id", "AAAAAAAAAAAAAAAAAAAAAA",
        "--bootstrap-controller", bootstrap(cluster),
    )  # fmt: skip
    assert done.returncode == 1
    assert "INCONSISTENT_CLUSTER_ID" in done.stderr
    assert "Traceback" not in done.stderr


def test_no_reachable_controller_names_what_it_tried() -> None:
    nowhere = f"127.0.0.1:{free_port()}"
    done = quorumctl("quorum", "describe", "--bootstrap-controller", nowhere)
    assert done.returncode == 1
    assert nowhere in done.stderr and "Traceback" not in done.stderr


def test_a_malformed_bootstrap_is_a_usage_error() -> None:
    done = quorumctl("quorum", "describe", "--bootstrap-controller", "no-port-here")
    assert done.returncode == 2
    assert "host:port" in done.stderr


def test_status_and_replication_together(cluster: Cluster) -> None:
    done = quorumctl(
        "quorum", "describe", "--status", "--replication", "-o", "json",
        "--bootstrap-controller", bootstrap(cluster),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    both = json.loads(done.stdout)
    assert both["Status"]["ClusterId"] == cluster.cluster_id
    assert sorted(r["NodeId"] for r in both["Replication"]) == [1, 2, 3]
    table = quorumctl(
        "quorum", "describe", "--status", "--replication",
        "--bootstrap-controller", bootstrap(cluster),
    )  # fmt: skip
    assert table.returncode == 0, table.stderr
    status_part, replication_part = table.stdout.split("\n\n")
    assert status_part.splitlines()[0].split(":")[0] == "ClusterId"
    assert replication_part.splitlines()[0].split()[0] == "NodeId"


def test_a_voter_that_never_fetched_shows_minus_one(tmp_path: Path) -> None:
    c = Cluster.create(tmp_path)
    c.start(1, 2)
    try:
        c.wait_for_leader(among=[1, 2])
        done = quorumctl(
            "quorum", "describe", "--replication", "-o", "json",
            "--bootstrap-controller", ",".join(c.voter_addresses()[:2]),
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        never = next(r for r in json.loads(done.stdout) if r["NodeId"] == 3)
        assert never["LogEndOffset"] == -1 and never["Lag"] == -1
        assert never["LastFetchTimestamp"] == -1 and never["Status"] == "Follower"
    finally:
        c.stop_all()


def test_voter_changes_at_kraft_version_0_are_unsupported_and_change_nothing(
    cluster: Cluster,
) -> None:
    """The voters are controller.quorum.voters here (formatted without
    --initial-controllers): KIP-853's calls answer UNSUPPORTED_VERSION."""
    before = cluster.wait_for_leader()
    directory_id = before.directory_id or "2sTtZ9PeQ0iq9ZT0kR2xVw"
    for args in (
        ("remove-controller", "--controller-id", "1", "--controller-directory-id", directory_id),
        (
            "add-controller", "--controller-id", "7", "--controller-directory-id", directory_id,
            "--endpoint", f"127.0.0.1:{free_port()}",
        ),
    ):  # fmt: skip
        done = quorumctl("quorum", *args, "--bootstrap-controller", bootstrap(cluster))
        assert done.returncode == 1 and "UNSUPPORTED_VERSION" in done.stderr, done.stderr
    after = cluster.wait_for_leader()
    assert sorted(r.replica_id for r in after.current_voters) == [1, 2, 3]
    assert after.leader_epoch == before.leader_epoch
