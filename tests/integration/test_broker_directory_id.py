"""Brokers report their DirectoryId (KIP-858), as Kafka's do: the broker agent reads
`directory.id` from its meta.properties (giving the directory one, once, if it was
formatted without), registers with it, and `quorumctl quorum describe
--replication` shows it on the broker's Observer row. A malformed, reserved,
repeated or another broker's id is refused with INVALID_REGISTRATION and changes
nothing. Real controllers and broker agents, quorumctl by subprocess.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from controller_cluster import Cluster, ctl, ctl_json, running_cluster

from quorum.admin_client import AdminError
from quorum.common.meta_properties import random_uuid
from quorum.gen import admin_pb2 as api
from quorum.gen import broker_pb2 as bpb

FORMATTED = 51  # formatted by `quorumctl storage format`, which writes a directory.id
LEGACY = 52  # formatted before directory ids: its meta.properties has none
ZERO_ID = "AAAAAAAAAAAAAAAAAAAAAA"  # Kafka's Uuid.ZERO_UUID: "unassigned"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(Path(tmp_path_factory.mktemp("directory-id"))) as c:
        c.add_brokers(FORMATTED, LEGACY, broker__heartbeat__interval__ms="500")
        meta = c.brokers[LEGACY].data_dir / "meta.properties"
        meta.write_text(re.sub(r"directory\.id=.*\n", "", meta.read_text()))
        c.start_brokers()
        wait_online(c, FORMATTED, LEGACY)
        yield c


def directory_id(cluster: Cluster, broker_id: int) -> str | None:
    text = (cluster.brokers[broker_id].data_dir / "meta.properties").read_text()
    found = re.search(r"^directory\.id=(.*)$", text, re.MULTILINE)
    return found.group(1) if found else None


def brokers(cluster: Cluster) -> dict[int, api.BrokerDescription]:
    reply = cluster.call("admin", "DescribeCluster", api.DescribeClusterRequest())
    return {b.broker_id: b for b in reply.brokers}


def registrations(cluster: Cluster) -> dict[int, tuple[Any, ...]]:
    """What the registrations say (the session's heartbeat age moves on its own)."""
    return {
        b.broker_id: (b.broker_epoch, b.incarnation_id, b.state, tuple(b.log_dirs))
        for b in brokers(cluster).values()
    }


def wait_online(cluster: Cluster, *broker_ids: int) -> None:
    cluster.wait_until(
        lambda: all(brokers(cluster)[b].reported_state == "ONLINE" for b in broker_ids),
        30,
        f"brokers {broker_ids} ONLINE",
    )


def observer_rows(cluster: Cluster) -> dict[int, dict[str, Any]]:
    rows = ctl_json(cluster, "quorum", "describe", "--replication")
    return {r["NodeId"]: r for r in rows if r["Status"] == "Observer"}


def test_describe_replication_shows_each_brokers_directory_id(cluster: Cluster) -> None:
    observers = observer_rows(cluster)
    for broker_id in (FORMATTED, LEGACY):
        expected = directory_id(cluster, broker_id)
        assert expected is not None and len(expected) == 22
        assert observers[broker_id]["DirectoryId"] == expected
        assert list(brokers(cluster)[broker_id].log_dirs) == [expected]
    assert observers[FORMATTED]["DirectoryId"] != observers[LEGACY]["DirectoryId"]
    table = ctl(cluster, "quorum", "describe", "--replication")
    assert table.returncode == 0, table.stderr
    header, *lines = table.stdout.splitlines()
    assert header.split()[:2] == ["NodeId", "DirectoryId"]
    row = next(line.split() for line in lines if line.split()[0] == str(FORMATTED))
    assert row[1] == directory_id(cluster, FORMATTED) and row[-1] == "Observer"


@pytest.mark.slow
def test_a_restart_keeps_the_directory_id(cluster: Cluster) -> None:
    """The legacy directory got its id at the first start; a restart reads it back."""
    before = {b: directory_id(cluster, b) for b in (FORMATTED, LEGACY)}
    incarnations = {b: brokers(cluster)[b].incarnation_id for b in before}
    for broker_id in before:
        popen = cluster.brokers[broker_id].popen
        assert popen is not None
        popen.send_signal(signal.SIGTERM)
        assert popen.wait(30) == 0
    cluster.start_brokers(*before)
    wait_online(cluster, *before)
    after = brokers(cluster)
    for broker_id, expected in before.items():
        assert after[broker_id].incarnation_id != incarnations[broker_id]  # registered anew
        assert directory_id(cluster, broker_id) == expected
        assert list(after[broker_id].log_dirs) == [expected]
        assert observer_rows(cluster)[broker_id]["DirectoryId"] == expected


@pytest.mark.parametrize(
    ("log_dirs", "says"),
    [
        (["not-a-directory-id"], "URL-safe base64"),
        (["AAAAAAAAAAAAAAAAAAAAAB"], "URL-safe base64"),  # not canonical: spare bits set
        ([ZERO_ID], "reserved"),
        (["AAAAAAAAAAAAAAAAAAAAAQ"], "reserved"),  # Kafka's ONE_UUID
        (["Jp7Fpx3hQy2b7mzT4a0yIg", "Jp7Fpx3hQy2b7mzT4a0yIg"], "twice"),
        (["x" * 5000], "URL-safe base64"),
    ],
)
def test_a_hostile_directory_id_is_refused_and_changes_nothing(
    cluster: Cluster, log_dirs: list[str], says: str
) -> None:
    before = registrations(cluster)
    high_watermark = cluster.describe(cluster.wait_for_leader().leader_id).high_watermark
    error = register(cluster, 61, log_dirs)
    assert error.name == "INVALID_REGISTRATION" and says in str(error), error
    assert len(str(error)) < 300  # a refusal never echoes a huge field back
    assert registrations(cluster) == before
    assert cluster.describe(cluster.wait_for_leader().leader_id).high_watermark == high_watermark


def test_another_brokers_directory_id_is_refused(cluster: Cluster) -> None:
    """A copied data directory: two brokers would claim one disk."""
    taken = directory_id(cluster, FORMATTED)
    assert taken is not None
    before = registrations(cluster)
    error = register(cluster, 61, [taken])
    assert error.name == "INVALID_REGISTRATION"
    assert f"broker {FORMATTED} is already registered with directory {taken}" in str(error)
    assert registrations(cluster) == before


def test_an_agent_whose_meta_properties_hold_a_bad_id_does_not_start(cluster: Cluster) -> None:
    cluster.add_brokers(62)
    proc = cluster.brokers[62]
    meta = proc.data_dir / "meta.properties"
    for bad in ("not-a-directory-id", ZERO_ID):
        meta.write_text(re.sub(r"directory\.id=.*", f"directory.id={bad}", meta.read_text()))
        cluster.start_brokers(62)
        assert proc.popen is not None and proc.popen.wait(30) == 1
        assert f"invalid directory.id '{bad}'" in proc.log_text()
    assert 62 not in brokers(cluster)


def register(cluster: Cluster, broker_id: int, log_dirs: list[str]) -> AdminError:
    request = bpb.RegisterBrokerRequest(
        broker_id=broker_id,
        incarnation_id=random_uuid(),
        listeners=[
            bpb.Listener(
                name="PLAINTEXT", host="127.0.0.1", port=9092, security_protocol="PLAINTEXT"
            )
        ],
        log_dirs=log_dirs,
    )
    with pytest.raises(AdminError) as refused:
        cluster.call("broker", "RegisterBroker", request, deadline_s=10)
    return refused.value
