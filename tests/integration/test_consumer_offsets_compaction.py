"""`__consumer_offsets` stays bounded (issue 34): 200,000 offset commits of one
group, written by the real group coordinator (standalone OffsetCommit requests
of 250 partitions each, from four connections at once), leave every replica of
the group's offsets partition, once its cleaner has run, holding at most
`2 x keys` records below its active segment and less than `4 x segment.bytes`
on disk, against ~14 MB committed; then the coordinator's broker is killed and
the new coordinator, loading the compacted log, serves every partition's latest
offset. `quorumctl topics cleaner` shows the partition's cleaner state."""

from __future__ import annotations

import json
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker_agent.groups.placement import OFFSETS_TOPIC, partition_for
from broker_agent.kafka.versions import ApiKey
from broker_agent.partitions.compare import stored_batches
from broker_agent.partitions.record_codec import records_of
from tests.integration.controller_cluster import Cluster, ctl_json, quorumctl, running_cluster
from tests.integration.groups_cluster import (
    BROKERS,
    GROUP_SETTINGS,
    OFFSETS_PARTITIONS,
    find_coordinator,
    live_brokers,
    wait_all_online,
)
from tests.integration.kafka_wire import KafkaSocket

pytestmark = pytest.mark.slow
GROUP = "billing"
TOPIC = "orders"
TOPIC_PARTITIONS = 1_000  # the offsets partition's keys: one per (group, topic, partition)
CONNECTIONS = 4
PER_REQUEST = TOPIC_PARTITIONS // CONNECTIONS  # each connection commits its own quarter
COMMITS = 200_000
ROUNDS = COMMITS // TOPIC_PARTITIONS
SEGMENT_BYTES = 256 * 1024


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(tmp_path_factory.mktemp("offsets-compaction")) as c:
        c.add_brokers(
            *BROKERS,
            **GROUP_SETTINGS,
            offsets__topic__segment__bytes=str(SEGMENT_BYTES),
            log__cleaner__backoff__ms="200",
        )
        c.start_brokers()
        wait_all_online(c)
        yield c


def commit_values(partitions: range, offset: int) -> dict[str, Any]:
    return {
        "group_id": GROUP,
        "generation_id_or_member_epoch": -1,  # a standalone consumer's commit
        "member_id": "",
        "group_instance_id": None,
        "topics": [
            {
                "name": TOPIC,
                "partitions": [
                    {
                        "partition_index": p,
                        "committed_offset": offset,
                        "committed_leader_epoch": -1,
                        "committed_metadata": None,
                    }
                    for p in partitions
                ],
            }
        ],
    }


def commit_rounds(cluster: Cluster, coordinator: int, partitions: range, errors: list[str]) -> None:
    with KafkaSocket("127.0.0.1", cluster.brokers[coordinator].port, timeout_s=60) as s:
        for round_ in range(1, ROUNDS + 1):
            answer = s.request(ApiKey.OFFSET_COMMIT, 8, commit_values(partitions, round_))
            codes = {p.error_code for t in answer.topics for p in t.partitions}
            if codes != {ErrorCode.none}:
                errors.append(f"round {round_}: {codes}")
                return


def replica_dir(cluster: Cluster, broker: int, partition: int) -> Path:
    return cluster.brokers[broker].data_dir / f"{OFFSETS_TOPIC}-{partition}"


def held(directory: Path) -> tuple[int, int]:
    """(records below the active segment, bytes of all segments) of one replica."""
    bases = sorted(int(p.name.split(".")[0]) for p in directory.glob("*.log"))
    below = sum(
        len(records_of(data)[1]) for base, _, data in stored_batches(directory) if base < bases[-1]
    )
    return below, sum(p.stat().st_size for p in directory.glob("*.log"))


def committed(cluster: Cluster, broker: int) -> dict[int, int]:
    with KafkaSocket("127.0.0.1", cluster.brokers[broker].port, timeout_s=30) as s:
        answer = s.request(
            ApiKey.OFFSET_FETCH,
            7,
            {"group_id": GROUP, "topics": None, "require_stable": False},
        )
    assert answer.error_code == ErrorCode.none, answer
    return {
        p.partition_index: p.committed_offset
        for t in answer.topics
        if t.name == TOPIC
        for p in t.partitions
        if p.error_code == ErrorCode.none
    }


def coordinating(cluster: Cluster, broker: int) -> bool:
    with KafkaSocket("127.0.0.1", cluster.brokers[broker].port, timeout_s=30) as s:
        answer = s.request(
            ApiKey.OFFSET_FETCH,
            7,
            {"group_id": GROUP, "topics": None, "require_stable": False},
        )
    retriable = (ErrorCode.not_coordinator, ErrorCode.coordinator_load_in_progress)
    assert answer.error_code in (ErrorCode.none, *retriable), answer
    return bool(answer.error_code == ErrorCode.none)


def serving_coordinator(cluster: Cluster) -> int:
    """The group's coordinator once it serves: the broker FindCoordinator names may
    not have loaded the offsets partition yet (NOT_COORDINATOR meanwhile, as a
    clean-clone run saw on every connection's first commit); clients ask again."""
    found: dict[str, int] = {}

    def serving() -> bool:
        found["id"] = find_coordinator(cluster, GROUP)
        return coordinating(cluster, found["id"])

    cluster.wait_until(serving, 60, "the group's coordinator serving")
    return found["id"]


def test_offsets_partition_stays_bounded_and_fails_over_compacted(cluster: Cluster) -> None:
    ctl_json(cluster, "topics", "create", TOPIC, "--partitions", str(TOPIC_PARTITIONS),
             "--replication-factor", "1")  # fmt: skip
    coordinator = serving_coordinator(cluster)
    partition = partition_for(GROUP, OFFSETS_PARTITIONS)
    errors: list[str] = []
    threads = [
        threading.Thread(
            target=commit_rounds,
            args=(cluster, coordinator, range(c * PER_REQUEST, (c + 1) * PER_REQUEST), errors),
        )
        for c in range(CONNECTIONS)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert committed(cluster, coordinator) == dict.fromkeys(range(TOPIC_PARTITIONS), ROUNDS)

    # Every replica cleans its own log; all three end up bounded.
    dirs = [replica_dir(cluster, b, partition) for b in BROKERS]

    def bounded() -> bool:
        return all(
            below <= 2 * TOPIC_PARTITIONS and size < 4 * SEGMENT_BYTES
            for below, size in (held(d) for d in dirs)
        )

    cluster.wait_until(bounded, 180, f"every replica compacted: {[held(d) for d in dirs]}")
    log_end = max(end for d in dirs for _, end, _ in stored_batches(d))
    assert log_end >= COMMITS  # 200,000 commit records went through this partition
    operator_view_shows_the_cleaning(cluster, partition)

    # The coordinator's broker dies; the new one loads the compacted log.
    proc = cluster.brokers[coordinator]
    assert proc.popen is not None
    proc.popen.send_signal(signal.SIGKILL)
    proc.popen.wait(30)
    try:
        survivor = next(b for b in BROKERS if b != coordinator)
        cluster.wait_until(
            lambda: find_coordinator(cluster, GROUP, via=survivor) != coordinator,
            90, "a new coordinator",
        )  # fmt: skip
        new = find_coordinator(cluster, GROUP, via=survivor)
        assert new in live_brokers(cluster)
        # The survivor's metadata may name the new leader before that broker has
        # applied it and loaded the group: it answers NOT_COORDINATOR or
        # COORDINATOR_LOAD_IN_PROGRESS meanwhile, and a client asks again.
        cluster.wait_until(lambda: coordinating(cluster, new), 30, "the new coordinator serving")
        assert committed(cluster, new) == dict.fromkeys(range(TOPIC_PARTITIONS), ROUNDS)
    finally:
        cluster.start_brokers(coordinator)
        wait_all_online(cluster)


def operator_view_shows_the_cleaning(cluster: Cluster, partition: int) -> None:
    """`quorumctl topics cleaner` over every broker's metrics endpoint."""
    urls = [f"http://127.0.0.1:{cluster.brokers[b].metrics_port}" for b in BROKERS]
    done = quorumctl("topics", "cleaner", *(a for u in urls for a in ("--metrics", u)),
                     "--topic", OFFSETS_TOPIC, "--output", "json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    view = json.loads(done.stdout)
    rows = [r for r in view["partitions"] if r["Partition"] == partition]
    assert len(rows) == len(BROKERS)  # every replica cleans its own log
    for row in rows:
        assert row["Topic"] == OFFSETS_TOPIC and row["LastRun"] != "never", row
        assert row["ReclaimedBytes"] > 1_000_000 and 0 <= row["DirtyRatio"] <= 1, row
    assert len(view["brokers"]) == len(BROKERS)
    for summary in view["brokers"]:
        assert summary["Runs"] > 0 and summary["UncleanablePartitions"] == 0, summary
    table = quorumctl("topics", "cleaner", "--metrics", urls[0])
    assert table.returncode == 0 and "ReclaimedBytes" in table.stdout, table
    refused = quorumctl("topics", "cleaner", "--metrics", "http://127.0.0.1:1")
    assert refused.returncode != 0 and "cannot read the metrics" in refused.stderr
