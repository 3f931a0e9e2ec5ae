"""The active controller SIGKILLed in the middle of a burst of 50 CreateTopics
sent through a broker with librdkafka's AdminClient: the broker retries on the
new active controller inside each request's timeout, so every call answers
success or a definite Kafka error (never NOT_CONTROLLER, never silence), and
every topic a call was told is created exists afterwards, exactly once in the
committed metadata log."""

from __future__ import annotations

import collections
import json
import signal
import time
from concurrent.futures import Future, wait
from pathlib import Path
from typing import Any

import pytest

from tests.integration.controller_cluster import (
    cluster_with_online_brokers,
    ctl_json,
    quorumctl,
)

pytestmark = pytest.mark.slow
BROKERS = (101, 102, 103)
BURST = 50
OPERATION_TIMEOUT_S = 20
# A retried create whose first attempt committed before the kill finds its topic:
# a definite answer (the topic exists), as Kafka's forwarding answers it.
DEFINITE = {"TOPIC_ALREADY_EXISTS", "REQUEST_TIMED_OUT"}


def topic_records(log_dir: Path) -> list[tuple[str, int]]:
    """(name, leader epoch) of every TopicRecord in a controller's log."""
    dumped = quorumctl("log", "dump", "--dir", str(log_dir), "--output", "json")
    assert dumped.returncode == 0, dumped.stderr
    names = []
    for batch in json.loads(dumped.stdout):
        for record in batch["Records"]:
            if record["Type"] == "topic":
                names.append((record["Record"]["name"], batch["Epoch"]))
    return names


def test_a_controller_killed_during_a_create_burst(tmp_path: Path) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    with cluster_with_online_brokers(tmp_path, *BROKERS) as cluster:
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{cluster.brokers[101].port}"})
        leader = cluster.wait_for_leader().leader_id
        futures: dict[str, Future[Any]] = {}
        started = time.monotonic()
        for i in range(BURST):
            name = f"burst-{i:02d}"
            (futures[name],) = admin.create_topics(
                [NewTopic(name, 1, 1)],
                operation_timeout=OPERATION_TIMEOUT_S,
                request_timeout=OPERATION_TIMEOUT_S + 10,
            ).values()
            if i == BURST // 3:
                cluster.kill(leader, signal.SIGKILL)
            time.sleep(0.02)
        _, pending = wait(futures.values(), timeout=OPERATION_TIMEOUT_S + 15)
        assert not pending, f"{len(pending)} calls never answered"
        elapsed = time.monotonic() - started

        outcomes: dict[str, str] = {}
        for name, future in futures.items():
            try:
                future.result()
                outcomes[name] = "OK"
            except KafkaException as err:
                outcomes[name] = err.args[0].name()
        unexpected = {n: o for n, o in outcomes.items() if o != "OK" and o not in DEFINITE}
        assert not unexpected, f"indefinite or wrong answers: {unexpected}"
        assert elapsed < OPERATION_TIMEOUT_S + 15

        survivors = [n for n in cluster.procs if n != leader]
        assert cluster.wait_for_leader(among=survivors).leader_id in survivors
        listed = {t["Topic"] for t in ctl_json(cluster, "topics", "list")}
        created = [n for n, o in outcomes.items() if o in ("OK", "TOPIC_ALREADY_EXISTS")]
        assert set(created) <= listed
        assert "OK" in outcomes.values()
        print(sorted(collections.Counter(outcomes.values()).items()), f"{elapsed:.1f}s")
        records = topic_records(cluster.procs[survivors[0]].data_dir)
        names = [name for name, _ in records]
        for name in listed:
            assert names.count(name) == 1, name
        # The kill fell inside the burst: its topics were written in two epochs.
        assert len({epoch for name, epoch in records if name.startswith("burst-")}) >= 2
