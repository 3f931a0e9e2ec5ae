"""`quorumctl topics cleaner`: the log cleaner's state per compacted partition, as
each broker's metrics endpoint reports it (what Kafka operators read from the
`kafka.log:type=LogCleaner*` MBeans).

The cleaner runs on the brokers, each over its own replicas, so its state is
the brokers', not the controllers': this command reads the Prometheus text of
the brokers' `metrics.listener` endpoints given with `--metrics` (the operator
knows them, as a Prometheus scrape config does) and prints per partition the
dirty ratio when last checked, when a cleaning round last completed and the
bytes cleaning reclaimed, then per broker Kafka's cleaner summary metrics
(max-dirty-percent, cleaner-recopy-percent, max-clean-time-secs, uncleanable
partitions).
"""

from __future__ import annotations

import datetime
import urllib.error
import urllib.request
from typing import Any

import click
from prometheus_client.parser import text_string_to_metric_families

from quorum.cli.bootstrap import print_rows, render_json

PREFIX = "quorum_broker_log_cleaner_"
SUMMARY = {
    "MaxDirtyPercent": "max_dirty_percent",
    "RecopyPercent": "recopy_percent",
    "MaxCleanTimeSecs": "max_clean_time_seconds",
    "UncleanablePartitions": "uncleanable_partitions",
    "Runs": "runs",
    "ReclaimedBytes": "reclaimed_bytes",
}


def scrape(url: str, timeout_s: float = 10.0) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Every sample of the cleaner's metrics at `url`, by metric name."""
    target = url if url.rstrip("/").endswith("/metrics") else url.rstrip("/") + "/metrics"
    try:
        with urllib.request.urlopen(target, timeout=timeout_s) as reply:
            text = reply.read().decode()
    except (urllib.error.URLError, OSError, ValueError) as err:
        raise click.ClickException(f"cannot read the metrics at {target}: {err}") from err
    samples: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.startswith(PREFIX):
                name = sample.name[len(PREFIX) :].removesuffix("_total")
                samples.setdefault(name, []).append((dict(sample.labels), sample.value))
    if not samples:
        raise click.ClickException(f"{target} reports no log cleaner (not a broker's metrics?)")
    return samples


def _when(seconds: float) -> str:
    if seconds <= 0:
        return "never"
    moment = datetime.datetime.fromtimestamp(seconds, datetime.UTC)
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def partition_rows(broker: str, samples: dict[str, Any], topic: str | None) -> list[dict[str, Any]]:
    def by_partition(name: str) -> dict[tuple[str, int], float]:
        return {
            (labels["topic"], int(labels["partition"])): value
            for labels, value in samples.get(name, [])
            if "topic" in labels
        }

    dirty = by_partition("partition_dirty_ratio")
    last = by_partition("partition_last_run_timestamp_seconds")
    reclaimed = by_partition("partition_reclaimed_bytes")
    return [
        {
            "Broker": broker,
            "Topic": t,
            "Partition": p,
            "DirtyRatio": round(dirty[(t, p)], 3),
            "LastRun": _when(last.get((t, p), 0.0)),
            "ReclaimedBytes": int(reclaimed.get((t, p), 0)),
        }
        for t, p in sorted(dirty)
        if topic is None or t == topic
    ]


def summary_row(broker: str, samples: dict[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = {"Broker": broker}
    for column, name in SUMMARY.items():
        values = [v for labels, v in samples.get(name, []) if not labels]
        value = values[0] if values else 0.0
        row[column] = (
            round(value, 3) if isinstance(value, float) and not value.is_integer() else int(value)
        )
    return row


@click.command("cleaner")
@click.option(
    "--metrics",
    "urls",
    multiple=True,
    required=True,
    metavar="URL",
    help="A broker's metrics.listener, e.g. http://10.0.0.5:9101 (repeatable).",
)
@click.option("--topic", help="Only this topic's partitions (e.g. __consumer_offsets).")
@click.option("--output", type=click.Choice(["table", "json"]), default="table")
def cleaner_command(urls: tuple[str, ...], topic: str | None, output: str) -> None:
    """The log cleaner per compacted partition: dirty ratio, last run, bytes reclaimed.

    \b
    Example:
      quorumctl topics cleaner --metrics http://broker-1:9101 --metrics http://broker-2:9101
      quorumctl topics cleaner --metrics http://broker-1:9101 --topic __consumer_offsets
    """
    partitions: list[dict[str, Any]] = []
    brokers: list[dict[str, Any]] = []
    for url in urls:
        samples = scrape(url)
        name = url.split("://", 1)[-1].rstrip("/").removesuffix("/metrics")
        partitions += partition_rows(name, samples, topic)
        brokers.append(summary_row(name, samples))
    if output == "json":
        click.echo(render_json({"partitions": partitions, "brokers": brokers}))
        return
    print_rows(partitions, output)
    if partitions:
        click.echo()
    print_rows(brokers, output)
