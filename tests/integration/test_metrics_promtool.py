"""Metrics an alert can trust: every endpoint passes `promtool check metrics`
(Prometheus's own linter: no gauge named like a counter or histogram part, base
units), and the names docs/metrics.md maps to Kafka's are the ones served. Real
controllers and a broker agent; promtool from Debian's `prometheus` package
(`make test` installs it)."""

from __future__ import annotations

import re
import shutil
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from controller_cluster import Cluster, running_cluster

BROKER = 51
DOCS = Path(__file__).parents[2] / "docs" / "metrics.md"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(Path(tmp_path_factory.mktemp("promtool"))) as c:
        c.write(3)
        c.add_brokers(BROKER, broker__heartbeat__interval__ms="500")
        c.start_brokers()
        c.wait_until(
            lambda: scrape(c.brokers[BROKER].metrics_port).count(
                'quorum_broker_state{state="ONLINE"} 1.0'
            ),
            20,
            "the broker ONLINE",
        )
        yield c


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
        return str(answer.read().decode())


def promtool() -> str:
    found = shutil.which("promtool")
    assert found, "promtool is missing: `make test` installs Debian's prometheus package"
    return found


def test_every_endpoint_passes_promtool(cluster: Cluster) -> None:
    ports = [p.metrics_port for p in cluster.procs.values()]
    ports.append(cluster.brokers[BROKER].metrics_port)
    for port in ports:
        text = scrape(port)
        done = subprocess.run(
            [promtool(), "check", "metrics"], input=text, capture_output=True, text=True,
            timeout=60, check=False,
        )  # fmt: skip
        assert done.returncode == 0 and not done.stdout.strip(), (port, done.stdout, done.stderr)


def test_served_names_are_the_documented_ones(cluster: Cluster) -> None:
    leader = cluster.wait_for_leader().leader_id
    served = set()
    for port in (cluster.procs[leader].metrics_port, cluster.brokers[BROKER].metrics_port):
        for line in scrape(port).splitlines():
            if line.startswith("# TYPE ") and not line.split()[2].endswith("_created"):
                # prometheus_client names a counter's TYPE line with `_total`, and adds
                # a `_created` timestamp gauge per counter and histogram.
                served.add(line.split()[2].removesuffix("_total"))
    table = DOCS.read_text().split("Renamed in issue 22", 1)[0]
    documented = {n.removesuffix("_total") for n in re.findall(r"`(quorum_[a-z_]+)", table)}
    ours = {name for name in served if name.startswith("quorum_")}
    assert ours - documented == set(), "served but not in docs/metrics.md"
    assert documented - ours == set(), "in docs/metrics.md but not served"
    assert not [n for n in ours if n.endswith("_count") or n.endswith("_ms")]


def test_process_build_and_raft_metrics_have_their_values(cluster: Cluster) -> None:
    view = cluster.wait_for_leader()
    leader = cluster.procs[view.leader_id].metrics()
    assert leader["quorum_raft_current_vote"] == view.leader_id  # it voted for itself
    assert leader["quorum_raft_log_end_epoch"] == view.leader_epoch
    assert leader["quorum_raft_voters"] == 3
    assert leader["quorum_raft_unknown_voter_connections"] == 0
    assert leader["process_resident_memory_bytes"] > 0 and leader["process_open_fds"] > 0
    assert leader["quorum_controller_timed_out_broker_heartbeats_total"] == 0
    build = [k for k in leader if k.startswith("quorum_build_info{")]
    assert len(build) == 1 and f'cluster_id="{cluster.cluster_id}"' in build[0]
    broker = scrape(cluster.brokers[BROKER].metrics_port)
    assert f'node_id="{BROKER}"' in broker and 'process_roles="broker"' in broker
    values = cluster.brokers[BROKER].metrics()
    assert values["quorum_broker_metadata_load_errors_total"] == 0
    assert values["quorum_broker_metadata_apply_errors_total"] == 0
    # No snapshot was needed to catch up on a young log: the histogram is empty.
    assert values["quorum_broker_metadata_snapshot_load_seconds_count"] == 0


def test_every_applied_offset_is_the_last_record_applied(cluster: Cluster) -> None:
    """One meaning per name: the last record applied (Kafka's), never the next offset."""
    view = cluster.wait_for_leader()
    leader = cluster.procs[view.leader_id]
    cluster.wait_until(
        lambda: (
            leader.metrics()["quorum_controller_last_applied_record_offset"]
            >= view.high_watermark - 1
        ),
        what="the leader to apply its committed log",
    )
    metrics = leader.metrics()
    assert "quorum_raft_applied_offset" not in metrics
    assert metrics["quorum_controller_last_applied_record_timestamp_seconds"] > 1.7e9
    assert 0 <= metrics["quorum_controller_last_applied_record_lag_seconds"] < 3600
    broker = cluster.brokers[BROKER].metrics()
    assert "quorum_broker_metadata_applied_offset" not in broker
    cluster.wait_until(
        lambda: (
            cluster.brokers[BROKER].metrics()["quorum_broker_metadata_last_applied_record_offset"]
            == cluster.describe(view.leader_id).high_watermark - 1
        ),
        what="the broker to apply up to the high watermark",
    )
