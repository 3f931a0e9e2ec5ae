"""Topics created per second through a broker's Kafka listener (librdkafka's
AdminClient, forwarded to the active controller) beside the same straight to
the controllers over gRPC (`quorum.admin_client.AdminClient`, what quorumctl
uses, without quorumctl's process start), in the same run on the same cluster.

Three controllers and three brokers on loopback (the integration tests'
launcher), default settings. Each round creates `--topics` topics of one
partition and one replica, in CreateTopics requests of `batch` topics, one
request at a time (each answered once committed; through a broker, a Metadata
request right after would wait for that broker's image: the read fence of
`broker_agent/kafka/forwarding.py`), then deletes them. Rounds alternate
between the two paths so the machine's drift hits both alike.

With `validate_only` the same requests are validated by the active controller
and answered without a write: the forwarding hop alone, without the commit and
without the brokers applying the new topics.

    .venv/bin/python bench/admin.py [--topics 300 --rounds 3 --batches 1,100]

One JSON object per measurement on stdout: path, batch, round, topics/s, and
per path and batch the mean and the forwarding cost (1 - kafka / grpc).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # process_logs

from report import emit, say

from quorum.admin_client import AdminClient
from quorum.gen import admin_pb2 as api
from tests.integration.controller_cluster import Cluster, cluster_with_online_brokers

BROKERS = (101, 102, 103)


def names(prefix: str, count: int, batch: int) -> list[list[str]]:
    all_names = [f"{prefix}-{i:05d}" for i in range(count)]
    return [all_names[i : i + batch] for i in range(0, count, batch)]


def kafka_round(
    cluster: Cluster, prefix: str, count: int, batch: int, validate_only: bool
) -> float:
    from confluent_kafka.admin import AdminClient as KafkaAdmin
    from confluent_kafka.admin import NewTopic

    admin = KafkaAdmin({"bootstrap.servers": f"127.0.0.1:{cluster.brokers[101].port}"})
    admin.list_topics(timeout=10)  # connected before the clock starts
    started = time.perf_counter()
    for group in names(prefix, count, batch):
        futures = admin.create_topics(
            [NewTopic(n, 1, 1) for n in group], operation_timeout=30, validate_only=validate_only
        )
        for future in futures.values():
            future.result()
    elapsed = time.perf_counter() - started
    for group in names(prefix, count, 100) if not validate_only else []:
        for future in admin.delete_topics(group, operation_timeout=30).values():
            future.result()
    return count / elapsed


def grpc_round(cluster: Cluster, prefix: str, count: int, batch: int, validate_only: bool) -> float:
    async def go() -> float:
        client = AdminClient(cluster.voter_addresses(), cluster.cluster_id)
        try:
            await client.admin("ListTopics", api.ListTopicsRequest())
            started = time.perf_counter()
            for group in names(prefix, count, batch):
                reply = await client.admin(
                    "CreateTopics",
                    api.CreateTopicsRequest(validate_only=validate_only, topics=[
                        api.CreatableTopic(name=n, num_partitions=1, replication_factor=1)
                        for n in group
                    ]),
                )  # fmt: skip
                assert all(t.error.error_code == 0 for t in reply.topics), reply
            elapsed = time.perf_counter() - started
            for group in names(prefix, count, 100) if not validate_only else []:
                await client.admin("DeleteTopics", api.DeleteTopicsRequest(names=group))
            return count / elapsed
        finally:
            await client.close()

    return asyncio.run(go())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batches", default="1,100")
    args = parser.parse_args()
    batches = [int(b) for b in args.batches.split(",")]
    with (
        tempfile.TemporaryDirectory(prefix="bench-admin-") as root,
        cluster_with_online_brokers(Path(root), *BROKERS) as cluster,
    ):
        for validate_only, batch in [(v, b) for v in (False, True) for b in batches]:
            rates: dict[str, list[float]] = {"kafka": [], "grpc": []}
            for round_ in range(args.rounds):
                for path, run in (("kafka", kafka_round), ("grpc", grpc_round)):
                    say(f"batch {batch}, validate_only {validate_only}, round {round_ + 1}: {path}")
                    prefix = f"{path}-{batch}-{round_}"
                    rate = run(cluster, prefix, args.topics, batch, validate_only)
                    rates[path].append(rate)
                    emit(path=path, batch=batch, validate_only=validate_only, round=round_ + 1,
                         topics_per_s=round(rate, 1))  # fmt: skip
            kafka, grpc = statistics.mean(rates["kafka"]), statistics.mean(rates["grpc"])
            emit(
                batch=batch,
                validate_only=validate_only,
                kafka_topics_per_s=round(kafka, 1),
                grpc_topics_per_s=round(grpc, 1),
                forwarding_cost=round(1 - kafka / grpc, 3),
                load_average=[round(x, 1) for x in os.getloadavg()],
            )


if __name__ == "__main__":
    main()
