"""`quorumctl groups`: what `kafka-consumer-groups.sh` does (list, describe, delete,
reset-offsets), with its flags and columns.

Consumer groups live on the brokers (their group coordinators), so these commands
ask the controllers for the brokers (DescribeCluster) and then speak Kafka's
protocol to them (`kafka_client.py`): FindCoordinator, ListGroups,
DescribeGroups, OffsetFetch, ListOffsets, OffsetCommit, DeleteGroups.
"""

from __future__ import annotations

import struct
import sys
from typing import Any

import click
from kio.schema.delete_groups.v2.request import DeleteGroupsRequest
from kio.schema.describe_groups.v5.request import DescribeGroupsRequest
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v3.request import FindCoordinatorRequest
from kio.schema.list_groups.v4.request import ListGroupsRequest
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.offset_commit.v8.request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kio.schema.offset_fetch.v7.request import OffsetFetchRequest
from kio.static.primitive import i8, i32, i64

from quorum.cli.bootstrap import connection_options, parse_bootstrap, print_rows, render_json
from quorum.cli.brokers import describe_from_active
from quorum.cli.kafka_client import KafkaClientError, KafkaConnection
from quorum.cli.partition_offsets import list_offsets_request

EARLIEST, LATEST = -2, -1
INACTIVE = ("Empty", "Dead")


@click.group("groups")
def groups_group() -> None:
    """List, describe, delete consumer groups and reset their offsets.

    \b
    Example:
      quorumctl groups list --state
      quorumctl groups describe --group billing
      quorumctl groups describe --group billing --members
      quorumctl groups reset-offsets --group billing --topic orders --to-earliest --execute
      quorumctl groups delete --group billing
    """


# ------------------------------------------------------------------ plumbing


def _brokers(bootstrap: str | None, cluster_id: str) -> dict[int, tuple[str, int]]:
    reply = describe_from_active(parse_bootstrap(bootstrap), cluster_id)
    found = {b.broker_id: (b.host, b.port) for b in reply.brokers if not b.fenced}
    if not found:
        raise click.ClickException("no live broker is registered")
    return found


def _any(brokers: dict[int, tuple[str, int]]) -> KafkaConnection:
    errors = []
    for host, port in brokers.values():
        try:
            return KafkaConnection(host, port)
        except KafkaClientError as err:
            errors.append(str(err))
    raise click.ClickException("; ".join(errors))


def _coordinator(brokers: dict[int, tuple[str, int]], group: str) -> tuple[int, KafkaConnection]:
    with _any(brokers) as conn:
        answer = conn.request(FindCoordinatorRequest(key=group, key_type=i8(0)))
    if answer.error_code != ErrorCode.none:
        raise click.ClickException(
            f"no coordinator for group {group!r}: {ErrorCode(answer.error_code).name.upper()}"
        )
    return int(answer.node_id), KafkaConnection(answer.host, int(answer.port))


def _describe(conn: KafkaConnection, group: str) -> Any:
    [described] = conn.request(
        DescribeGroupsRequest(groups=(group,), include_authorized_operations=False)
    ).groups
    if described.error_code != ErrorCode.none:
        raise click.ClickException(
            f"cannot describe group {group!r}: {ErrorCode(described.error_code).name.upper()}"
        )
    return described


def _committed(conn: KafkaConnection, group: str) -> dict[tuple[str, int], int]:
    answer = conn.request(OffsetFetchRequest(group_id=group, topics=None, require_stable=False))
    if answer.error_code != ErrorCode.none:
        raise click.ClickException(
            f"cannot fetch offsets of {group!r}: {ErrorCode(answer.error_code).name.upper()}"
        )
    return {
        (t.name, int(p.partition_index)): int(p.committed_offset)
        for t in answer.topics
        for p in t.partitions
        if p.committed_offset >= 0
    }


def _partitions(
    brokers: dict[int, tuple[str, int]], topics: list[str]
) -> dict[tuple[str, int], int]:
    """(topic, partition) -> leader id of every partition of `topics`."""
    with _any(brokers) as conn:
        answer = conn.request(
            MetadataRequest(
                topics=tuple(MetadataRequestTopic(topic_id=None, name=t) for t in topics),
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )
        )
    out = {}
    for t in answer.topics:
        if t.error_code != ErrorCode.none:
            raise click.ClickException(f"topic {t.name!r}: {ErrorCode(t.error_code).name.upper()}")
        for p in t.partitions:
            out[(str(t.name), int(p.partition_index))] = int(p.leader_id)
    return out


def _offsets_at(
    brokers: dict[int, tuple[str, int]], leaders: dict[tuple[str, int], int], timestamp: int
) -> dict[tuple[str, int], int]:
    """ListOffsets (EARLIEST or LATEST) of each partition, asked of its leader."""
    out: dict[tuple[str, int], int] = {}
    by_leader: dict[int, list[tuple[str, int]]] = {}
    for tp, leader in leaders.items():
        by_leader.setdefault(leader, []).append(tp)
    for leader, tps in by_leader.items():
        if leader not in brokers:
            continue
        with KafkaConnection(*brokers[leader]) as conn:
            answer = conn.request(list_offsets_request(-1, timestamp, tps))
        for t in answer.topics:
            for p in t.partitions:
                if p.error_code == ErrorCode.none:
                    out[(str(t.name), int(p.partition_index))] = int(p.offset)
    return out


def assignment_partitions(data: bytes) -> list[tuple[str, int]]:
    """The partitions of a ConsumerProtocolAssignment (version int16, then topics
    with their partitions; every version starts so)."""
    out: list[tuple[str, int]] = []
    try:
        pos = 2
        (topics,) = struct.unpack_from(">i", data, pos)
        pos += 4
        for _ in range(max(topics, 0)):
            (n,) = struct.unpack_from(">h", data, pos)
            topic = data[pos + 2 : pos + 2 + n].decode()
            pos += 2 + n
            (count,) = struct.unpack_from(">i", data, pos)
            pos += 4
            for _ in range(max(count, 0)):
                (partition,) = struct.unpack_from(">i", data, pos)
                pos += 4
                out.append((topic, partition))
    except (struct.error, UnicodeDecodeError):
        return out
    return out


def _state_row(
    group: str, coordinator: int, brokers: dict[int, tuple[str, int]], d: Any
) -> dict[str, Any]:
    host, port = brokers.get(coordinator, ("?", 0))
    return {
        "GROUP": group,
        "COORDINATOR (ID)": f"{host}:{port} ({coordinator})",
        "ASSIGNMENT-STRATEGY": d.protocol_data or "",
        "STATE": d.group_state,
        "#MEMBERS": len(d.members),
    }


# ------------------------------------------------------------------ commands


@groups_group.command("list")
@click.option("--state", "with_state", is_flag=True, help="Show each group's state too.")
@connection_options
def list_groups(with_state: bool, bootstrap: str | None, cluster_id: str, output: str) -> None:
    """Every consumer group (ListGroups to every broker).

    \b
    Example:
      quorumctl groups list
      quorumctl groups list --state --output json
    """
    brokers = _brokers(bootstrap, cluster_id)
    names: set[str] = set()
    for host, port in brokers.values():
        try:
            with KafkaConnection(host, port) as conn:
                answer = conn.request(ListGroupsRequest(states_filter=()))
        except KafkaClientError as err:
            click.echo(f"warning: {err}", err=True)
            continue
        names |= {str(g.group_id) for g in answer.groups}
    if not with_state:
        if output == "json":
            click.echo(render_json(sorted(names)))
        else:
            for name in sorted(names):
                click.echo(name)
        return
    rows = []
    for name in sorted(names):
        coordinator, conn = _coordinator(brokers, name)
        with conn:
            rows.append(_state_row(name, coordinator, brokers, _describe(conn, name)))
    print_rows(rows, output)


@groups_group.command("describe")
@click.option("--group", "group", required=True, help="The consumer group.")
@click.option("--members", is_flag=True, help="Members: consumer id, host, client id, #partitions.")
@click.option("--state", "with_state", is_flag=True, help="Coordinator, strategy, state, #members.")
@connection_options
def describe_group(
    group: str,
    members: bool,
    with_state: bool,
    bootstrap: str | None,
    cluster_id: str,
    output: str,
) -> None:
    """Offsets and lag per partition, with the member that holds it.

    \b
    Example:
      quorumctl groups describe --group billing
      quorumctl groups describe --group billing --members
    """
    brokers = _brokers(bootstrap, cluster_id)
    coordinator, conn = _coordinator(brokers, group)
    with conn:
        described = _describe(conn, group)
        committed = _committed(conn, group)
    if with_state:
        print_rows([_state_row(group, coordinator, brokers, described)], output)
        return
    owners: dict[tuple[str, int], Any] = {}
    for m in described.members:
        for tp in assignment_partitions(bytes(m.member_assignment)):
            owners[tp] = m
    if members:
        rows = [
            {
                "GROUP": group,
                "CONSUMER-ID": m.member_id,
                "HOST": m.client_host,
                "CLIENT-ID": m.client_id,
                "#PARTITIONS": sum(1 for o in owners.values() if o is m),
            }
            for m in described.members
        ]
        print_rows(rows, output)
        return
    wanted = sorted(set(committed) | set(owners))
    topics = sorted({t for t, _ in wanted})
    ends = _offsets_at(brokers, _partitions(brokers, topics), LATEST) if topics else {}
    rows = []
    for tp in wanted:
        current, end, owner = committed.get(tp), ends.get(tp), owners.get(tp)
        rows.append(
            {
                "GROUP": group,
                "TOPIC": tp[0],
                "PARTITION": tp[1],
                "CURRENT-OFFSET": current if current is not None else "-",
                "LOG-END-OFFSET": end if end is not None else "-",
                "LAG": end - current if end is not None and current is not None else "-",
                "CONSUMER-ID": owner.member_id if owner else "-",
                "HOST": owner.client_host if owner else "-",
                "CLIENT-ID": owner.client_id if owner else "-",
            }
        )
    if not described.members and output != "json":
        click.echo(f"Consumer group '{group}' has no active members.", err=True)
    print_rows(rows, output)


@groups_group.command("delete")
@click.option("--group", "groups", required=True, multiple=True, help="A group (repeatable).")
@connection_options
def delete_groups(
    groups: tuple[str, ...], bootstrap: str | None, cluster_id: str, output: str
) -> None:
    """Delete empty groups and their committed offsets (NON_EMPTY_GROUP otherwise).

    \b
    Example:
      quorumctl groups delete --group billing
    """
    brokers = _brokers(bootstrap, cluster_id)
    rows = []
    for group in groups:
        _, conn = _coordinator(brokers, group)
        with conn:
            [result] = conn.request(DeleteGroupsRequest(groups_names=(group,))).results
        error = ErrorCode(result.error_code)
        rows.append(
            {"GROUP": group, "ERROR": "-" if error is ErrorCode.none else error.name.upper()}
        )
    failed = [r["GROUP"] for r in rows if r["ERROR"] != "-"]
    if output == "json":
        click.echo(render_json(rows))
    else:
        ok = [r["GROUP"] for r in rows if r["ERROR"] == "-"]
        if ok:
            names = ", ".join(f"'{g}'" for g in ok)
            click.echo(f"Deletion of requested consumer groups ({names}) was successful.")
        for r in rows:
            if r["ERROR"] != "-":
                click.echo(f"Group '{r['GROUP']}' could not be deleted: {r['ERROR']}", err=True)
    if failed:
        sys.exit(1)


@groups_group.command("reset-offsets")
@click.option("--group", "group", required=True, help="The consumer group (must be inactive).")
@click.option("--topic", "topics", multiple=True, help="A topic (repeatable).")
@click.option("--all-topics", is_flag=True, help="Every topic the group has offsets for.")
@click.option("--to-earliest", is_flag=True, help="Reset to each partition's earliest offset.")
@click.option("--to-latest", is_flag=True, help="Reset to each partition's log end offset.")
@click.option("--to-offset", type=int, default=None, help="Reset to this offset (clamped).")
@click.option("--dry-run", is_flag=True, help="Only show the new offsets (the default).")
@click.option("--execute", is_flag=True, help="Commit the new offsets.")
@connection_options
def reset_offsets(
    group: str,
    topics: tuple[str, ...],
    all_topics: bool,
    to_earliest: bool,
    to_latest: bool,
    to_offset: int | None,
    dry_run: bool,
    execute: bool,
    bootstrap: str | None,
    cluster_id: str,
    output: str,
) -> None:
    """Reset an inactive group's committed offsets, as kafka-consumer-groups.sh
    --reset-offsets does; without --execute nothing is committed.

    \b
    Example:
      quorumctl groups reset-offsets --group billing --topic orders --to-earliest --dry-run
      quorumctl groups reset-offsets --group billing --all-topics --to-offset 42 --execute
    """
    if sum((to_earliest, to_latest, to_offset is not None)) != 1:
        raise click.UsageError("give exactly one of --to-earliest, --to-latest, --to-offset")
    if bool(topics) == all_topics:
        raise click.UsageError("give --topic (repeatable) or --all-topics")
    if dry_run and execute:
        raise click.UsageError("--dry-run and --execute exclude each other")
    brokers = _brokers(bootstrap, cluster_id)
    _, conn = _coordinator(brokers, group)
    with conn:
        described = _describe(conn, group)
        if described.group_state not in INACTIVE:
            raise click.ClickException(
                f"Assignments can only be reset if the group '{group}' is inactive, "
                f"but the current state is {described.group_state}."
            )
        committed = _committed(conn, group)
        names = sorted({t for t, _ in committed}) if all_topics else list(topics)
        leaders = _partitions(brokers, names) if names else {}
        earliest = _offsets_at(brokers, leaders, EARLIEST)
        latest = _offsets_at(brokers, leaders, LATEST)
        new = {}
        for tp in sorted(leaders):
            low, high = earliest.get(tp, 0), latest.get(tp, 0)
            if to_earliest:
                new[tp] = low
            elif to_latest:
                new[tp] = high
            else:
                assert to_offset is not None
                new[tp] = min(max(to_offset, low), high)
        if execute and new:
            by_topic: dict[str, list[tuple[int, int]]] = {}
            for (topic, partition), offset in new.items():
                by_topic.setdefault(topic, []).append((partition, offset))
            answer = conn.request(
                OffsetCommitRequest(
                    group_id=group,
                    generation_id_or_member_epoch=i32(-1),
                    member_id="",
                    group_instance_id=None,
                    topics=tuple(
                        OffsetCommitRequestTopic(
                            name=t,
                            partitions=tuple(
                                OffsetCommitRequestPartition(
                                    partition_index=i32(p),
                                    committed_offset=i64(o),
                                    committed_leader_epoch=i32(-1),
                                    committed_metadata="",
                                )
                                for p, o in ps
                            ),
                        )
                        for t, ps in by_topic.items()
                    ),
                )
            )
            errors = [
                f"{t.name}-{p.partition_index}: {ErrorCode(p.error_code).name.upper()}"
                for t in answer.topics
                for p in t.partitions
                if p.error_code != ErrorCode.none
            ]
            if errors:
                raise click.ClickException("offsets not reset: " + ", ".join(errors))
    rows = [
        {"GROUP": group, "TOPIC": t, "PARTITION": p, "NEW-OFFSET": o} for (t, p), o in new.items()
    ]
    print_rows(rows, output)
