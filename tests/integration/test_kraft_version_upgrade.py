"""kraft.version 0 -> 1 on a running static quorum (real processes):
`quorumctl features upgrade --feature kraft.version=1`, then a voter is added.

Three static voters (controller.quorum.voters) and an observer. While a voter
is down the upgrade is refused (INVALID_UPDATE_VERSION: its support is
unknown) and nothing changes; with all three up it commits, every controller
reports kraft.version 1 with the voters' directory ids in the log, and the
observer is added with add-controller. Writes run throughout, and every
acknowledged one is in every log at its offset.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from controller_cluster import Cluster, admin_pb, ctl, ctl_json, running_cluster
from voters_under_writes import (
    Writer,
    add_when_caught_up,
    check_acknowledged,
    voters,
    wait_caught_up,
)

from quorum.cli.features import feature_rows
from quorum.common.meta_properties import read_meta_properties

VOTERS = (1, 2, 3)
OBSERVER = 4


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root = Path(tmp_path_factory.mktemp("kraft-upgrade"))
    with running_cluster(root, voters=3, observers=1) as c:
        yield c


def kraft_rows(cluster: Cluster, cli: bool = False) -> dict[str, object]:
    """`features describe`'s kraft.version row (in process unless `cli`: a
    quorumctl start costs seconds on a busy machine)."""
    if cli:
        rows = ctl_json(cluster, "features", "describe")
    else:
        reply = cluster.call("admin", "DescribeCluster", admin_pb.DescribeClusterRequest())
        rows = feature_rows(reply)
    return {r["Feature"]: r for r in rows}["kraft.version"]  # type: ignore[return-value]


def upgrade(cluster: Cluster, *more: str) -> tuple[int, str]:
    done = ctl(cluster, "features", "upgrade", "--feature", "kraft.version=1", *more)
    return done.returncode, done.stdout + done.stderr


def test_the_upgrade_is_refused_while_a_voter_is_down_then_commits_and_a_voter_is_added(
    cluster: Cluster,
) -> None:
    assert kraft_rows(cluster, cli=True) == {
        "Feature": "kraft.version", "SupportedMinVersion": 0, "SupportedMaxVersion": 1,
        "FinalizedVersionLevel": 0,
    }  # fmt: skip
    leader = cluster.wait_for_leader().leader_id
    down = next(n for n in VOTERS if n != leader)
    with Writer(cluster) as writer:
        writer.wait_for_more(0)
        cluster.kill(down)
        cluster.wait_exit(down)
        code, out = upgrade(cluster)
        assert code != 0 and "INVALID_UPDATE_VERSION" in out, out
        assert f"voter {down} did not answer" in out, out
        assert kraft_rows(cluster)["FinalizedVersionLevel"] == 0
        assert all(cluster.describe(n).kraft_version == 0 for n in VOTERS if n != down)
        higher = ctl(cluster, "features", "upgrade", "--feature", "kraft.version=2")
        assert higher.returncode != 0 and "supports levels 0..1" in higher.stderr, higher.stderr

        cluster.start(down)
        cluster.wait_until(
            lambda: cluster.describe(down).leader_id == leader, 60, f"voter {down} back"
        )
        code, out = upgrade(cluster, "--dry-run")
        assert code == 0 and "valid" in out, out
        assert kraft_rows(cluster)["FinalizedVersionLevel"] == 0

        code, out = upgrade(cluster)
        assert code == 0 and "upgraded" in out, out
        assert kraft_rows(cluster)["FinalizedVersionLevel"] == 1
        directories = {
            n: read_meta_properties(cluster.procs[n].data_dir).directory_id or ""
            for n in (*VOTERS, OBSERVER)
        }
        assert voters(cluster) == {n: directories[n] for n in VOTERS}
        cluster.wait_until(
            lambda: all(cluster.describe(n).kraft_version == 1 for n in (*VOTERS, OBSERVER)),
            60,
            "every node at kraft.version 1",
        )
        back = ctl(cluster, "features", "downgrade", "--feature", "kraft.version=0")
        assert back.returncode != 0 and "cannot be downgraded" in back.stderr, back.stderr
        writer.wait_for_more(len(writer.acknowledged))

        cluster.directory_ids = directories
        out = add_when_caught_up(cluster, OBSERVER, by_config=True)
        assert "added as a voter" in out, out
        assert voters(cluster) == directories
        writer.wait_for_more(len(writer.acknowledged))

        # A restarted voter reads kraft.version 1 back from its log.
        cluster.kill(down)
        cluster.wait_exit(down)
        cluster.start(down)
        cluster.wait_until(
            lambda: (
                cluster.describe(down).kraft_version == 1
                and sorted(cluster.describe(down).voter_addresses) == [1, 2, 3, 4]
            ),
            60,
            "the restarted voter at kraft.version 1",
        )
        writer.wait_for_more(len(writer.acknowledged))

    final = cluster.wait_for_leader()
    nodes = (*VOTERS, OBSERVER)
    wait_caught_up(cluster, nodes, final)
    check_acknowledged(cluster, writer, nodes, final, logs_agree=False)
