"""KIP-853 on real controller processes (kraft.version 1): `quorumctl quorum
add-controller` / `remove-controller` while writes are acknowledged.

Three controllers are formatted with `--initial-controllers`, a fourth with
`--no-initial-controllers` runs as an observer. Under a stream of writes the
fourth is added as a voter, removed again, then the active controller removes
itself; afterwards every acknowledged write is in every controller's log at
the offset it was acknowledged at, and the logs agree below the high
watermark. Bad requests get Kafka's error names and change nothing.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from controller_cluster import Cluster, run, running_cluster
from voters_under_writes import (
    Writer,
    add_when_caught_up,
    check_acknowledged,
    membership,
    remove,
    voters,
    wait_caught_up,
)

from quorum.admin_client import AdminClient, AdminError
from quorum.gen import admin_pb2 as api

OBSERVER = 4


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root = Path(tmp_path_factory.mktemp("dynamic-voters"))
    # A leader without a majority resigns after the fetch timeout: 6 s leaves
    # the pending-change test room to ask twice on a loaded machine.
    extra = {"controller.quorum.fetch.timeout.ms": "6000"}
    with running_cluster(root, voters=3, observers=1, kraft_version=1, extra=extra) as c:
        yield c


def test_add_remove_and_remove_the_leader_under_writes_lose_nothing(cluster: Cluster) -> None:
    initial = voters(cluster)
    assert sorted(initial) == [1, 2, 3]
    assert initial == {n: cluster.directory_ids[n] for n in (1, 2, 3)}
    with Writer(cluster) as writer:
        writer.wait_for_more(0)

        out = add_when_caught_up(cluster, OBSERVER)
        assert "added as a voter" in out, out
        four = {n: cluster.directory_ids[n] for n in (1, 2, 3, 4)}
        assert voters(cluster) == four
        writer.wait_for_more(len(writer.acknowledged))

        # The leader dies: an election among the four (voter 4's address comes
        # from the voter set in the log, no static setting names it); the old
        # leader restarts with the voter set read back from its log.
        crashed = cluster.wait_for_leader().leader_id
        cluster.kill(crashed)
        cluster.wait_exit(crashed)
        others = [n for n in (1, 2, 3, 4) if n != crashed]
        cluster.wait_for_leader(others, timeout_s=60)
        cluster.start(crashed)
        cluster.wait_until(lambda: voters(cluster) == four, 60, "the four voters after a crash")
        assert any("reaching voter 4 at" in cluster.procs[n].log_text() for n in (1, 2, 3)), (
            cluster.logs()
        )
        writer.wait_for_more(len(writer.acknowledged))

        code, out = remove(cluster, OBSERVER, cluster.directory_ids[OBSERVER])
        assert code == 0, out
        assert sorted(voters(cluster)) == [1, 2, 3]
        writer.wait_for_more(len(writer.acknowledged))

        leader = cluster.wait_for_leader().leader_id
        code, out = remove(cluster, leader, cluster.directory_ids[leader])
        assert code == 0, out
        remaining = sorted({1, 2, 3} - {leader})
        cluster.wait_until(
            lambda: (
                cluster.wait_for_leader(remaining).leader_id in remaining
                and sorted(voters(cluster)) == remaining
            ),
            60,
            "a leader among the remaining voters",
        )
        writer.wait_for_more(len(writer.acknowledged))

    # Every controller (voters and the two removed ones) catches up, then the check.
    final = cluster.wait_for_leader(remaining)
    wait_caught_up(cluster, (1, 2, 3, 4), final)
    check_acknowledged(cluster, writer, (1, 2, 3, 4), final)


def test_bad_voter_changes_get_kafkas_errors_and_change_nothing(cluster: Cluster) -> None:
    before = voters(cluster)
    voter = min(before)
    wrong_directory = cluster.directory_ids[OBSERVER]
    outsider = next(n for n in (1, 2, 3, 4) if n not in before)
    cases = [
        (
            "DUPLICATE_VOTER",
            (
                "add-controller", "--controller-id", str(voter),
                "--controller-directory-id", before[voter],
                "--endpoint", cluster.procs[voter].address,
            ),
        ),
        ("VOTER_NOT_FOUND", ("remove-controller", "--controller-id", "99",
                             "--controller-directory-id", before[voter])),
        ("VOTER_NOT_FOUND", ("remove-controller", "--controller-id", str(voter),
                             "--controller-directory-id", wrong_directory)),
        ("VOTER_NOT_FOUND", ("remove-controller", "--controller-id", str(outsider),
                             "--controller-directory-id", cluster.directory_ids[outsider])),
        (
            "REQUEST_TIMED_OUT",  # id 9 never fetched: not caught up
            (
                "add-controller", "--controller-id", "9",
                "--controller-directory-id", wrong_directory,
                "--endpoint", "127.0.0.1:1",
            ),
        ),
        ("INVALID_REQUEST", ("remove-controller", "--controller-id", str(voter),
                             "--controller-directory-id", "not-a-directory-id")),
    ]  # fmt: skip
    for error, args in cases:
        code, out = membership(cluster, *args)
        assert code != 0 and error in out, (error, args, out)
        assert voters(cluster) == before, (error, args)


def test_a_second_change_while_one_is_pending_is_refused_and_changes_nothing(
    cluster: Cluster,
) -> None:
    """A follower is stopped (SIGSTOP) so that a removal cannot reach the new
    set's majority; while it is pending, a second change is REQUEST_TIMED_OUT
    and is never made. The follower resumes, the first change commits, and the
    removed voter is added back (this test leaves the voters as it found them)."""
    before = voters(cluster)
    leader = cluster.wait_for_leader().leader_id
    followers = sorted(n for n in before if n != leader)
    stopped = followers[-1]
    # The voter whose removal needs the stopped one: the other follower of three,
    # or the leader itself of two.
    removed = followers[0] if len(followers) == 2 else leader
    assert len(before) in (2, 3)
    bootstrap = cluster.voter_addresses()

    async def scenario() -> tuple[str, str]:
        client = AdminClient(bootstrap, cluster.cluster_id)
        first = None
        try:
            end = (await cluster._describe(leader)).log_end_offset
            cluster.kill(stopped, signal.SIGSTOP)
            first = asyncio.ensure_future(
                client.admin(
                    "RemoveRaftVoter",
                    api.RemoveRaftVoterRequest(
                        voter_id=removed, voter_directory_id=before[removed]
                    ),
                    deadline_s=60,
                )
            )
            while (await cluster._describe(leader)).log_end_offset == end:
                await asyncio.sleep(0.02)  # the VotersRecord is in the leader's log
            try:
                await client.admin(
                    "RemoveRaftVoter",
                    api.RemoveRaftVoterRequest(
                        voter_id=stopped, voter_directory_id=before[stopped]
                    ),
                    deadline_s=5,
                )
                second = "accepted"
            except AdminError as err:
                second = str(err)
            cluster.kill(stopped, signal.SIGCONT)
            try:
                await first
                outcome = "committed"
            except AdminError as err:  # the leader may have moved on meanwhile
                outcome = str(err)
            return second, outcome
        finally:
            cluster.kill(stopped, signal.SIGCONT)
            if first is not None and not first.done():
                first.cancel()
            await client.close()

    second, outcome = run(scenario())
    assert second.startswith("REQUEST_TIMED_OUT") and "one change at a time" in second, second
    expected = {n: d for n, d in before.items() if n != removed}
    cluster.wait_until(lambda: voters(cluster) == expected, 60, f"the first change ({outcome})")
    out = add_when_caught_up(cluster, removed)
    assert "added as a voter" in out, out
    assert voters(cluster) == before


def test_the_voter_set_survives_in_snapshots(tmp_path: Path) -> None:
    """Voter 4 is added while controller F is down; the log is then snapshotted
    and cut past the VotersRecord. F comes back and installs the leader's
    snapshot, and the leader restarts from its own: both know voter 4 from the
    snapshot alone (no log entry of theirs holds it)."""
    small = {
        "metadata.snapshot.max.new.record.bytes": "4096",
        "metadata.log.segment.bytes": "16384",
        "metadata.max.retention.bytes": "0",
    }
    with running_cluster(tmp_path, voters=3, observers=1, kraft_version=1, extra=small) as c:
        leader = c.wait_for_leader().leader_id
        down = next(n for n in (1, 2, 3) if n != leader)
        c.kill(down)
        c.wait_exit(down)
        out = add_when_caught_up(c, OBSERVER, by_config=True)
        assert "added as a voter at offset" in out, out
        assert voters(c)[OBSERVER] == c.directory_ids[OBSERVER]  # its meta.properties
        record_offset = int(out.split("at offset")[1].split()[0])
        offsets = c.write(400, size=200)
        assert c.describe(leader).log_start_offset > record_offset

        c.start(down)
        c.wait_until(
            lambda: c.describe(down).applied_offset > offsets[-1], 60, "the snapshot installed"
        )
        assert c.procs[down].metrics()["quorum_raft_snapshots_installed_total"] >= 1
        assert sorted(c.describe(down).voter_addresses) == [1, 2, 3, 4]

        c.kill(leader, signal.SIGTERM)
        c.wait_exit(leader)
        c.start(leader)
        c.wait_until(lambda: c.describe(leader).log_start_offset > record_offset, 60, "the restart")
        assert sorted(c.describe(leader).voter_addresses) == [1, 2, 3, 4]
        assert sorted(voters(c)) == [1, 2, 3, 4]
