"""`quorumctl elect-leaders`: what `kafka-leader-election.sh` does."""

from __future__ import annotations

import click

from quorum.cli.admin_calls import call_admin, fail_on_item_errors, item_error
from quorum.cli.bootstrap import (
    connection_options,
    parse_bootstrap,
    print_rows,
)
from quorum.cli.params import PARTITION, KafkaChoice
from quorum.gen import admin_pb2 as api


@click.command("elect-leaders")
@click.option(
    "--election-type",
    type=KafkaChoice(["preferred", "unclean"]),
    required=True,
    help="preferred or unclean (any case, as kafka-leader-election.sh: PREFERRED).",
)
@click.option("--topic", help="The topic (with --partition).")
@click.option("--partition", type=PARTITION, help="The partition.")
@click.option("--all-topic-partitions", is_flag=True, help="Every partition of every topic.")
@connection_options
def elect_leaders(
    election_type: str,
    topic: str | None,
    partition: int | None,
    all_topic_partitions: bool,
    bootstrap: str | None,
    cluster_id: str,
    output: str,
) -> None:
    """Elect partition leaders: preferred (first replica) or unclean (outside the ISR).

    A partition that needs no election is reported and is not an error.

    \b
    Example:
      quorumctl elect-leaders --election-type preferred --all-topic-partitions
      quorumctl elect-leaders --election-type unclean --topic orders --partition 0
    """
    if all_topic_partitions == bool(topic):
        raise click.UsageError("give either --topic (with --partition) or --all-topic-partitions")
    if topic and partition is None:
        raise click.UsageError("--topic needs --partition")
    request = api.ElectLeadersRequest(
        election_type=api.UNCLEAN if election_type == "unclean" else api.PREFERRED
    )
    if topic:
        request.partitions.append(api.TopicPartitions(topic=topic, partitions=[partition or 0]))
    reply = call_admin(parse_bootstrap(bootstrap), cluster_id, "ElectLeaders", request)
    rows, failures = [], []
    for r in reply.results:
        message = item_error(r.error)
        if message and r.error.error_name != "ELECTION_NOT_NEEDED":
            failures.append((f"{r.topic}-{r.partition}", message))
            if r.error.error_name == "UNKNOWN_TOPIC_OR_PARTITION":
                continue  # on stderr only: a row would show a leader that does not exist
        rows.append(
            {
                "Topic": r.topic,
                "Partition": r.partition,
                "Leader": r.leader if r.leader >= 0 else "none",
                "Result": r.error.error_name or "ELECTED",
            }
        )
    print_rows(rows, output)
    fail_on_item_errors(failures)
