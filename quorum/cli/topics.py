"""`quorumctl topics`: what `kafka-topics.sh` does, against the admin API."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from quorum.cli.admin_calls import call_admin, fail_on_item_errors, item_error
from quorum.cli.bootstrap import (
    cli_tls,
    command_timeout,
    connection_options,
    parse_bootstrap,
    print_rows,
    render_json,
    with_stale_marker,
)
from quorum.cli.params import BROKER_ID, COUNT, config_pair, parse_int
from quorum.cli.partition_offsets import (
    BROKER_TIMEOUT_S,
    BrokerAddress,
    PartitionOffsets,
    PartitionPlacement,
    fetch_offsets,
)
from quorum.gen import admin_pb2 as api

CREATE_BATCH = 50


def parse_configs(pairs: tuple[str, ...]) -> dict[str, str]:
    """`--config k=v` (repeatable) as kafka-topics.sh takes it; a list value is
    written `cleanup.policy=[compact,delete]` (or bare, `compact,delete`)."""
    configs: dict[str, str] = {}
    for pair in pairs:
        key, value = config_pair(pair, "--config")
        configs[key] = value
    return configs


def topic_names(positional: tuple[str, ...], options: tuple[str, ...]) -> list[str]:
    """Names given either way: `topics create orders` or kafka-topics.sh's
    `--topic orders` (repeatable); both may be mixed, each name once."""
    return list(dict.fromkeys([*positional, *options]))


def parse_assignment(text: str) -> list[api.ReplicaAssignment]:
    """Kafka's `--replica-assignment 1:2:3,2:3:1`: partitions by comma, replicas by colon.
    An empty one is an error, not "no assignment": it would create a default topic."""
    if not text.strip():
        raise click.BadParameter(
            "is empty; give e.g. 1:2:3,2:3:1", param_hint="--replica-assignment"
        )
    assignments = []
    for index, part in enumerate(text.split(",")):
        try:
            brokers = [parse_int(b, BROKER_ID.low) for b in part.split(":")]
        except ValueError as err:
            raise click.BadParameter(
                f"{part!r} is not broker:broker:... ({err})", param_hint="--replica-assignment"
            ) from None
        assignments.append(api.ReplicaAssignment(partition_index=index, broker_ids=brokers))
    return assignments


@click.group("topics")
def topics_group() -> None:
    """Create, delete, list, describe and alter topics.

    \b
    Example:
      quorumctl topics create orders --partitions 6 --replication-factor 3
      quorumctl topics describe --topic orders
    """


@topics_group.command("create")
@click.argument("names", nargs=-1)
@click.option("--topic", "topic_options", multiple=True, help="A topic (as kafka-topics.sh).")
@click.option("--partitions", type=COUNT, help="Partition count (default: the cluster's).")
@click.option(
    "--replication-factor", type=COUNT, help="Replicas per partition (default: the cluster's)."
)
@click.option("--replica-assignment", help="Explicit replicas, e.g. 1:2:3,2:3:1.")
@click.option("--config", "configs", multiple=True, metavar="KEY=VALUE", help="Topic config.")
@click.option("--if-not-exists", is_flag=True, help="An existing topic is not an error.")
@click.option("--validate-only", is_flag=True, help="Check, create nothing.")
@click.option(
    "--from-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="One topic name per line (other options apply to each); progress on a terminal.",
)
@connection_options
def create(
    names: tuple[str, ...],
    topic_options: tuple[str, ...],
    partitions: int | None,
    replication_factor: int | None,
    replica_assignment: str | None,
    configs: tuple[str, ...],
    if_not_exists: bool,
    validate_only: bool,
    from_file: Path | None,
    bootstrap: str | None,
    cluster_id: str,
    output: str,
) -> None:
    """Create topics.

    \b
    Example:
      quorumctl topics create orders --partitions 6 --replication-factor 3 \\
          --config min.insync.replicas=2
      quorumctl topics create --topic events --config cleanup.policy=[compact,delete]
      quorumctl topics create --from-file topics.txt --partitions 3
    """
    wanted = topic_names(names, topic_options)
    if from_file is not None:
        wanted += [line.strip() for line in from_file.read_text().splitlines() if line.strip()]
    if not wanted:
        raise click.UsageError("name at least one topic (or --from-file)")
    if replica_assignment is not None and (partitions or replication_factor):
        raise click.UsageError(
            "--replica-assignment excludes --partitions and --replication-factor"
        )
    addresses = parse_bootstrap(bootstrap)
    topic_configs = parse_configs(configs)
    assignment = parse_assignment(replica_assignment) if replica_assignment is not None else []
    results: list[api.CreatableTopicResult] = []
    batches = [wanted[i : i + CREATE_BATCH] for i in range(0, len(wanted), CREATE_BATCH)]
    with click.progressbar(
        length=len(wanted),
        label="creating topics",
        file=sys.stderr,
        hidden=not sys.stderr.isatty() or len(batches) == 1,
    ) as bar:
        for batch in batches:
            request = api.CreateTopicsRequest(validate_only=validate_only)
            for name in batch:
                request.topics.append(
                    api.CreatableTopic(
                        name=name,
                        num_partitions=partitions or -1,
                        replication_factor=replication_factor or -1,
                        assignments=assignment,
                        configs=topic_configs,
                    )
                )
            reply = call_admin(addresses, cluster_id, "CreateTopics", request)
            results += list(reply.topics)
            bar.update(len(batch))
    failures = []
    rows = []
    for r in results:
        message = item_error(r.error)
        if message and not (if_not_exists and r.error.error_name == "TOPIC_ALREADY_EXISTS"):
            failures.append((f"topic {r.name}", message))
            continue
        state = "exists" if message else ("valid" if validate_only else "created")
        rows.append(
            {
                "Topic": r.name,
                "TopicId": r.topic_id,
                "Partitions": r.num_partitions,
                "ReplicationFactor": r.replication_factor,
                "Result": state,
            }
        )
        if r.warning:
            click.echo(f"warning: {r.warning}", err=True)
    print_rows(rows, output)
    fail_on_item_errors(failures)


@topics_group.command("delete")
@click.argument("names", nargs=-1)
@click.option("--topic", "topic_options", multiple=True, help="A topic (as kafka-topics.sh).")
@click.option("--if-exists", is_flag=True, help="A missing topic is not an error.")
@connection_options
def delete(
    names: tuple[str, ...],
    topic_options: tuple[str, ...],
    if_exists: bool,
    bootstrap: str | None,
    cluster_id: str,
    output: str,
) -> None:
    """Delete topics.

    \b
    Example:
      quorumctl topics delete orders payments
      quorumctl topics delete --topic orders
    """
    wanted = topic_names(names, topic_options)
    if not wanted:
        raise click.UsageError("name at least one topic (NAME... or --topic NAME)")
    reply = call_admin(
        parse_bootstrap(bootstrap),
        cluster_id,
        "DeleteTopics",
        api.DeleteTopicsRequest(names=wanted),
    )
    failures, rows = [], []
    for r in reply.topics:
        message = item_error(r.error)
        missing = r.error.error_name == "UNKNOWN_TOPIC_OR_PARTITION"
        if message and not (if_exists and missing):
            failures.append((f"topic {r.name}", message))
        else:
            rows.append(
                {
                    "Topic": r.name,
                    "TopicId": r.topic_id,
                    "Result": "absent" if message else "deleted",
                }
            )
    print_rows(rows, output)
    fail_on_item_errors(failures)


@topics_group.command("list")
@connection_options
def list_topics(bootstrap: str | None, cluster_id: str, output: str) -> None:
    """List topics (names in a table, full listings in JSON).

    \b
    Example:
      quorumctl topics list --output json
    """
    reply = call_admin(
        parse_bootstrap(bootstrap), cluster_id, "ListTopics", api.ListTopicsRequest()
    )
    listings = sorted(reply.topics, key=lambda t: t.name)
    if output == "json":
        click.echo(
            render_json(
                with_stale_marker(
                    [
                        {
                            "Topic": t.name,
                            "TopicId": t.topic_id,
                            "PartitionCount": t.partitions,
                            "ReplicationFactor": t.replication_factor,
                        }
                        for t in listings
                    ]
                )
            )
        )
        return
    for t in listings:
        click.echo(t.name)


@topics_group.command("describe")
@click.option("--topic", "topics", multiple=True, help="Topic to describe (default: all).")
@click.option("--under-replicated-partitions", is_flag=True, help="Only ISR < replicas.")
@click.option("--under-min-isr-partitions", is_flag=True, help="Only ISR < min.insync.replicas.")
@click.option("--unavailable-partitions", is_flag=True, help="Only partitions with no leader.")
@click.option(
    "--offsets/--no-offsets",
    default=True,
    show_default=True,
    help="Ask the brokers for each replica's LEO and lag, the HW and the log start offset.",
)
@connection_options
def describe(
    topics: tuple[str, ...],
    under_replicated_partitions: bool,
    under_min_isr_partitions: bool,
    unavailable_partitions: bool,
    offsets: bool,
    bootstrap: str | None,
    cluster_id: str,
    output: str,
) -> None:
    """Describe partitions: leader, leader epoch, replicas, ISR and health markers,
    and from the brokers the HW, log start offset, and each replica's LEO and lag
    behind the leader's LEO ("unknown" where a broker did not answer within 3 s).

    \b
    Example:
      quorumctl topics describe --topic orders
      quorumctl topics describe --under-min-isr-partitions
    """
    addresses = parse_bootstrap(bootstrap)
    reply = call_admin(
        addresses, cluster_id, "DescribeTopics", api.DescribeTopicsRequest(names=list(topics))
    )
    failures, chosen = [], []
    for t in reply.topics:
        message = item_error(t.error)
        if message:
            failures.append((f"topic {t.name}", message))
            continue
        for p in t.partitions:
            if under_replicated_partitions and not p.under_replicated:
                continue
            if under_min_isr_partitions and not p.under_min_isr:
                continue
            if unavailable_partitions and p.leader != -1:
                continue
            chosen.append((t, p))
    found = broker_offsets(addresses, cluster_id, chosen) if offsets and chosen else {}
    rows = [
        partition_row(t, p) | offset_columns(p, found.get((t.name, p.partition)), output)
        for t, p in chosen
    ]
    print_rows(rows, output)
    fail_on_item_errors(failures)


def broker_offsets(
    addresses: list[str],
    cluster_id: str,
    chosen: list[tuple[api.TopicDescription, api.PartitionDescription]],
) -> dict[tuple[str, int], PartitionOffsets]:
    cluster = call_admin(addresses, cluster_id, "DescribeCluster", api.DescribeClusterRequest())
    brokers = {
        b.broker_id: BrokerAddress(b.host, b.port, b.security_protocol or "PLAINTEXT")
        for b in cluster.brokers
        if b.host and b.port
    }
    placements = [
        PartitionPlacement(t.name, p.partition, p.leader, tuple(p.replicas)) for t, p in chosen
    ]
    timeout_s = min(BROKER_TIMEOUT_S, command_timeout())
    return fetch_offsets(placements, brokers, timeout_s, cli_tls())


def offset_columns(
    p: api.PartitionDescription, found: PartitionOffsets | None, output: str
) -> dict[str, Any]:
    """HW, log start, and per replica (in `Replicas` order) its LEO and lag; None
    (JSON null, "unknown" in a table) where no broker said."""
    found = found or PartitionOffsets()
    ends = [found.log_end_offsets.get(r) for r in p.replicas]
    lags = [found.lag(p.leader, r) if p.leader >= 0 else None for r in p.replicas]
    if output == "json":
        return {
            "HighWatermark": found.high_watermark,
            "LogStartOffset": found.log_start_offset,
            "LogEndOffsets": ends,
            "Lags": lags,
        }

    def shown(value: int | None) -> int | str:
        return "unknown" if value is None else value

    return {
        "HighWatermark": shown(found.high_watermark),
        "LogStartOffset": shown(found.log_start_offset),
        "LogEndOffsets": [shown(v) for v in ends],
        "Lags": [shown(v) for v in lags],
    }


def partition_row(t: api.TopicDescription, p: api.PartitionDescription) -> dict[str, Any]:
    markers = []
    if p.leader == -1:
        markers.append("Offline")
    if p.under_min_isr:
        markers.append("UnderMinIsr")
    if p.under_replicated:
        markers.append("UnderReplicated")
    return {
        "Topic": t.name,
        "TopicId": t.topic_id,
        "Partition": p.partition,
        "Leader": p.leader if p.leader != -1 else "none",
        "LeaderEpoch": p.leader_epoch,
        "Replicas": list(p.replicas),
        "Isr": list(p.isr),
        "OfflineReplicas": list(p.offline_replicas),
        "MinIsr": p.min_isr,
        "Status": ",".join(markers) or "ok",
    }


@topics_group.command("alter")
@click.option("--topic", required=True, help="The topic.")
@click.option("--partitions", type=COUNT, required=True, help="The new total partition count.")
@click.option("--validate-only", is_flag=True, help="Check, change nothing.")
@connection_options
def alter(
    topic: str,
    partitions: int,
    validate_only: bool,
    bootstrap: str | None,
    cluster_id: str,
    output: str,
) -> None:
    """Add partitions to a topic (the count only grows).

    \b
    Example:
      quorumctl topics alter --topic orders --partitions 12
    """
    reply = call_admin(
        parse_bootstrap(bootstrap),
        cluster_id,
        "CreatePartitions",
        api.CreatePartitionsRequest(
            topics=[api.CreatePartitionsTopic(name=topic, count=partitions)],
            validate_only=validate_only,
        ),
    )
    failures = [(f"topic {r.name}", m) for r in reply.topics if (m := item_error(r.error))]
    fail_on_item_errors(failures)
    print_rows(
        [
            {
                "Topic": topic,
                "Partitions": partitions,
                "Result": "valid" if validate_only else "altered",
            }
        ],
        output,
    )
