"""Seed 002's phases observed over the wire on real brokers: FindCoordinator follows
the hash rule and any broker answers it; JoinGroup hands out `client_id-UUID`
member ids after MEMBER_ID_REQUIRED, the first joiner leads, the protocol follows
the votes, only the leader gets the member list; SyncGroup hands every member
its share after the assignment is in `__consumer_offsets`; bad input gets Kafka's
error codes and writes nothing."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker_agent.groups import records as rec
from broker_agent.groups.placement import partition_for
from broker_agent.kafka import codec
from broker_agent.kafka.versions import ApiKey
from tests.integration.controller_cluster import Cluster, ctl_json
from tests.integration.groups_cluster import (
    BROKERS,
    OFFSETS_PARTITIONS,
    dump_offsets_partition,
    find_coordinator,
    groups_cluster,
    offsets_leader,
)
from tests.integration.kafka_wire import KafkaSocket

pytestmark = pytest.mark.slow
SESSION_MS = 10_000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with groups_cluster(tmp_path_factory.mktemp("groups-wire")) as c:
        ctl_json(c, "topics", "create", "events", "--partitions", "4", "--replication-factor", "3")
        yield c


def sock(cluster: Cluster, broker: int) -> KafkaSocket:
    return KafkaSocket("127.0.0.1", cluster.brokers[broker].port, timeout_s=30)


def join_values(
    group: str,
    member_id: str = "",
    protocols: list[tuple[str, bytes]] | None = None,
    session_ms: int = SESSION_MS,
) -> dict[str, Any]:
    return {
        "group_id": group,
        "session_timeout": session_ms,
        "rebalance_timeout": 20_000,
        "member_id": member_id,
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocols": [{"name": n, "metadata": m} for n, m in (protocols or [("range", b"x")])],
        "reason": None,
    }


def read_answer(s: KafkaSocket, api_key: int, version: int) -> Any:
    _, body = codec.decode_response(s.read_frame(), api_key, version)
    return body


# ---------------------------------------------------------------- FindCoordinator


def test_find_coordinator_follows_the_hash_rule_from_every_broker(cluster: Cluster) -> None:
    groups = ["a", "abc", "group", "console-consumer-12345", "polygenelubricants"]
    for group in groups:
        coordinator = find_coordinator(cluster, group)
        assert coordinator == offsets_leader(cluster, partition_for(group, OFFSETS_PARTITIONS))
        for broker in BROKERS:
            assert find_coordinator(cluster, group, via=broker) == coordinator
    # v4: batched keys, one answer per key, in order
    with sock(cluster, BROKERS[1]) as s:
        answer = s.request(ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": groups})
    assert [c.key for c in answer.coordinators] == groups
    assert all(c.error_code == ErrorCode.none for c in answer.coordinators)
    for c in answer.coordinators:
        assert c.node_id == offsets_leader(cluster, partition_for(c.key, OFFSETS_PARTITIONS))
        assert c.port == cluster.brokers[int(c.node_id)].port


def test_offsets_topic_is_compacted_and_replicated(cluster: Cluster) -> None:
    find_coordinator(cluster, "any")
    configs = ctl_json(
        cluster,
        "configs",
        "describe",
        "--entity-type",
        "topics",
        "--entity-name",
        "__consumer_offsets",
    )
    assert "compact" in str(configs)  # cleanup.policy=compact
    partitions = ctl_json(cluster, "topics", "describe", "--topic", "__consumer_offsets")
    assert len(partitions) == OFFSETS_PARTITIONS
    assert all(len(p["Replicas"]) == 3 for p in partitions), partitions


# --------------------------------------------------------------- seed 002 phases


def test_seed_002_phases_over_the_wire(cluster: Cluster) -> None:
    group = "seed-002"
    coordinator = find_coordinator(cluster, group)
    votes = {
        "a": [("roundrobin", b"a-rr"), ("range", b"a-range")],
        "b": [("range", b"b-range"), ("roundrobin", b"b-rr")],
        "c": [("range", b"c-range"), ("roundrobin", b"c-rr")],
    }
    socks = {name: sock(cluster, coordinator) for name in votes}
    try:
        member_ids = {}
        for name, s in socks.items():
            s.send_request(ApiKey.JOIN_GROUP, 5, join_values(group, "", votes[name]))
            first = read_answer(s, ApiKey.JOIN_GROUP, 5)
            assert first.error_code == ErrorCode.member_id_required
            client, _, suffix = first.member_id.partition("-")
            assert client == "tests" and len(suffix) == 36
            member_ids[name] = first.member_id
        # a joins first, then b and c; nobody is answered before everyone has joined
        for name, s in socks.items():
            s.send_request(ApiKey.JOIN_GROUP, 5, join_values(group, member_ids[name], votes[name]))
        joined = {name: read_answer(s, ApiKey.JOIN_GROUP, 5) for name, s in socks.items()}
        assert all(j.error_code == ErrorCode.none for j in joined.values())
        assert {j.leader for j in joined.values()} == {member_ids["a"]}
        assert {j.protocol_name for j in joined.values()} == {"range"}  # 2 votes to 1
        leader_list = {m.member_id: m.metadata for m in joined["a"].members}
        assert leader_list == {member_ids[n]: f"{n}-range".encode() for n in votes}
        assert joined["b"].members == () and joined["c"].members == ()
        generation = joined["a"].generation_id

        def sync(name: str, assignments: list[dict[str, Any]]) -> None:
            socks[name].send_request(
                ApiKey.SYNC_GROUP,
                3,
                {
                    "group_id": group,
                    "generation_id": generation,
                    "member_id": member_ids[name],
                    "group_instance_id": None,
                    "assignments": assignments,
                },
            )

        sync("b", [])
        sync("c", [])
        sync(
            "a", [{"member_id": member_ids[n], "assignment": f"share-{n}".encode()} for n in votes]
        )
        shares = {n: read_answer(s, ApiKey.SYNC_GROUP, 3) for n, s in socks.items()}
        assert {n: (a.error_code, a.assignment) for n, a in shares.items()} == {
            n: (ErrorCode.none, f"share-{n}".encode()) for n in votes
        }
        # the assignment is in __consumer_offsets, as Kafka's GroupMetadata record
        records = dump_offsets_partition(cluster, group)
        stored = [v for k, v in records if k == rec.GroupKey(group) and v is not None]
        value = rec.parse_group_value(stored[-1])
        assert value.generation == generation and value.protocol == "range"
        assert value.leader == member_ids["a"]
        assert {m.member_id: m.assignment for m in value.members} == {
            member_ids[n]: f"share-{n}".encode() for n in votes
        }
        # HEARTBEAT keeps them in; the group is Stable
        for name, s in socks.items():
            beat = s.request(
                ApiKey.HEARTBEAT,
                3,
                {
                    "group_id": group,
                    "generation_id": generation,
                    "member_id": member_ids[name],
                    "group_instance_id": None,
                },
            )
            assert beat.error_code == ErrorCode.none
        with sock(cluster, coordinator) as s:
            described = s.request(
                ApiKey.DESCRIBE_GROUPS,
                5,
                {"groups": [group], "include_authorized_operations": False},
            )
        [g] = described.groups
        assert g.group_state == "Stable" and g.protocol_data == "range"
        assert {m.member_id for m in g.members} == set(member_ids.values())
        metrics = cluster.brokers[coordinator].metrics()
        assert metrics['quorum_broker_groups{state="Stable"}'] >= 1
        assert metrics["quorum_broker_group_rebalances_total"] >= 1
        assert metrics["quorum_broker_group_rebalance_seconds_count"] >= 1
        assert metrics['quorum_broker_group_offsets_partitions{phase="active"}'] >= 1
        # the leader leaves: the others are told to rejoin, and b becomes the leader
        left = socks["a"].request(
            ApiKey.LEAVE_GROUP,
            3,
            {
                "group_id": group,
                "members": [{"member_id": member_ids["a"], "group_instance_id": None}],
            },
        )
        assert left.error_code == ErrorCode.none
        beat = socks["b"].request(
            ApiKey.HEARTBEAT,
            3,
            {
                "group_id": group,
                "generation_id": generation,
                "member_id": member_ids["b"],
                "group_instance_id": None,
            },
        )
        assert beat.error_code == ErrorCode.rebalance_in_progress
        for name in ("b", "c"):
            socks[name].send_request(
                ApiKey.JOIN_GROUP, 5, join_values(group, member_ids[name], votes[name])
            )
        rejoined = {n: read_answer(socks[n], ApiKey.JOIN_GROUP, 5) for n in ("b", "c")}
        assert {j.leader for j in rejoined.values()} == {member_ids["b"]}
        assert {j.generation_id for j in rejoined.values()} == {generation + 1}
    finally:
        for s in socks.values():
            s.close()


# ------------------------------------------------------------------ bad input


def test_bad_input_gets_kafkas_errors_and_writes_nothing(cluster: Cluster) -> None:
    group = "hostile"
    coordinator = find_coordinator(cluster, group)
    other = next(b for b in BROKERS if b != coordinator)
    before = dump_offsets_partition(cluster, group)
    with sock(cluster, coordinator) as s:
        empty = s.request(ApiKey.JOIN_GROUP, 5, join_values(""))
        assert empty.error_code == ErrorCode.invalid_group_id
        for session in (999, 1_800_001):
            bad = s.request(ApiKey.JOIN_GROUP, 5, join_values(group, session_ms=session))
            assert bad.error_code == ErrorCode.invalid_session_timeout
        huge = s.request(
            ApiKey.JOIN_GROUP, 5, join_values(group, protocols=[("range", b"x" * (2 << 20))])
        )
        assert huge.error_code == ErrorCode.invalid_request
        beat = s.request(
            ApiKey.HEARTBEAT,
            3,
            {
                "group_id": group,
                "generation_id": 1,
                "member_id": "ghost",
                "group_instance_id": None,
            },
        )
        assert beat.error_code == ErrorCode.unknown_member_id
        sync = s.request(
            ApiKey.SYNC_GROUP,
            3,
            {
                "group_id": group,
                "generation_id": 1,
                "member_id": "ghost",
                "group_instance_id": None,
                "assignments": [],
            },
        )
        assert sync.error_code == ErrorCode.unknown_member_id
        commit = s.request(
            ApiKey.OFFSET_COMMIT,
            8,
            {
                "group_id": group,
                "generation_id_or_member_epoch": 3,
                "member_id": "ghost",
                "group_instance_id": None,
                "topics": [
                    {
                        "name": "events",
                        "partitions": [
                            {
                                "partition_index": 0,
                                "committed_offset": 5,
                                "committed_leader_epoch": -1,
                                "committed_metadata": None,
                            }
                        ],
                    }
                ],
            },
        )
        assert commit.topics[0].partitions[0].error_code == ErrorCode.illegal_generation
        unknown_topic = s.request(
            ApiKey.OFFSET_COMMIT,
            8,
            {
                "group_id": group,
                "generation_id_or_member_epoch": -1,
                "member_id": "",
                "group_instance_id": None,
                "topics": [
                    {
                        "name": "no-such-topic",
                        "partitions": [
                            {
                                "partition_index": 0,
                                "committed_offset": 5,
                                "committed_leader_epoch": -1,
                                "committed_metadata": None,
                            }
                        ],
                    }
                ],
            },
        )
        assert (
            unknown_topic.topics[0].partitions[0].error_code == ErrorCode.unknown_topic_or_partition
        )
    with sock(cluster, other) as s:
        wrong = s.request(ApiKey.JOIN_GROUP, 5, join_values(group))
        assert wrong.error_code == ErrorCode.not_coordinator
    assert dump_offsets_partition(cluster, group) == before


def test_stale_generation_commit_is_refused_and_changes_nothing(cluster: Cluster) -> None:
    group = "stale-commit"
    coordinator = find_coordinator(cluster, group)
    with sock(cluster, coordinator) as s:
        member = s.request(ApiKey.JOIN_GROUP, 5, join_values(group)).member_id
        joined = s.request(ApiKey.JOIN_GROUP, 5, join_values(group, member))
        generation = joined.generation_id
        s.request(
            ApiKey.SYNC_GROUP,
            3,
            {
                "group_id": group,
                "generation_id": generation,
                "member_id": member,
                "group_instance_id": None,
                "assignments": [{"member_id": member, "assignment": b""}],
            },
        )

        def commit(gen: int, offset: int) -> ErrorCode:
            answer = s.request(
                ApiKey.OFFSET_COMMIT,
                8,
                {
                    "group_id": group,
                    "generation_id_or_member_epoch": gen,
                    "member_id": member,
                    "group_instance_id": None,
                    "topics": [
                        {
                            "name": "events",
                            "partitions": [
                                {
                                    "partition_index": 1,
                                    "committed_offset": offset,
                                    "committed_leader_epoch": -1,
                                    "committed_metadata": "m",
                                }
                            ],
                        }
                    ],
                },
            )
            return ErrorCode(answer.topics[0].partitions[0].error_code)

        def fetched() -> int:
            answer = s.request(
                ApiKey.OFFSET_FETCH,
                7,
                {
                    "group_id": group,
                    "topics": [{"name": "events", "partition_indexes": [1]}],
                    "require_stable": False,
                },
            )
            return int(answer.topics[0].partitions[0].committed_offset)

        commits = cluster.brokers[coordinator].metrics()["quorum_broker_group_offset_commits_total"]
        assert commit(generation, 17) == ErrorCode.none
        metrics = cluster.brokers[coordinator].metrics()
        assert metrics["quorum_broker_group_offset_commits_total"] == commits + 1
        before = dump_offsets_partition(cluster, group)
        assert commit(generation - 1, 99) == ErrorCode.illegal_generation
        assert fetched() == 17
        assert dump_offsets_partition(cluster, group) == before
        keys = [k for k, v in before if isinstance(k, rec.OffsetKey)]
        assert rec.OffsetKey(group, "events", 1) in keys
        # OffsetFetch v8: batched groups
        answer = s.request(
            ApiKey.OFFSET_FETCH,
            8,
            {"groups": [{"group_id": group, "topics": None}], "require_stable": False},
        )
        [g] = answer.groups
        assert [
            (t.name, p.partition_index, p.committed_offset) for t in g.topics for p in t.partitions
        ] == [("events", 1, 17)]
