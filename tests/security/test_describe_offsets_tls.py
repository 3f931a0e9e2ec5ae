"""`quorumctl topics describe` in a cluster with TLS everywhere: the controllers
require client certificates, the brokers' only Kafka listener is SSL with client
certificates required, and the offsets asked of the brokers come back over it
with the same `--ssl-*` files that reach the controllers."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from quorum.common.local_ca import LocalCa
from quorum.gen import admin_pb2 as api
from tests.integration.controller_cluster import Cluster, free_port, quorumctl
from tests.security.secure_cluster import create_mtls_cluster

pytestmark = pytest.mark.slow
BROKERS = (111, 112)
TOPIC = "sealed"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, dict[int, int]]]:
    ca = LocalCa("describe offsets CA")
    c = create_mtls_cluster(Path(tmp_path_factory.mktemp("describe-tls")), ca)
    c.start()
    ports: dict[int, int] = {}
    try:
        c.wait_for_leader(timeout_s=30)
        for broker in BROKERS:
            files = ca.write(c.root / "certs", f"broker-{broker}")
            ports[broker] = free_port()
            c.add_brokers(
                broker,
                listeners=f"SSL://127.0.0.1:{ports[broker]}",
                listener__security__protocol__map="CONTROLLER:SSL,SSL:SSL",
                ssl__certificate__location=str(files.certificate),
                ssl__key__location=str(files.key),
                ssl__ca__location=str(files.ca),
                ssl__client__auth="required",
                broker__heartbeat__interval__ms="500",
            )
        c.start_brokers()

        def online() -> bool:
            reply = c.call("admin", "DescribeCluster", api.DescribeClusterRequest())
            return sorted(b.broker_id for b in reply.brokers if b.state == "ONLINE") == list(
                BROKERS
            )

        c.wait_until(online, 40, "brokers ONLINE over mTLS")
        yield c, ports
    finally:
        c.stop_all()


def ctl_tls(c: Cluster, *args: str) -> Any:
    certs = c.root / "certs"
    done = quorumctl(
        *args, "--bootstrap-controller", ",".join(c.voter_addresses()),
        "--ssl-ca-location", str(certs / "ca.pem"),
        "--ssl-certificate-location", str(certs / "admin.pem"),
        "--ssl-key-location", str(certs / "admin.key"),
        "--output", "json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_describe_reads_the_offsets_over_the_ssl_listeners(
    cluster: tuple[Cluster, dict[int, int]],
) -> None:
    from confluent_kafka import Producer

    c, ports = cluster
    ctl_tls(c, "topics", "create", TOPIC, "--partitions", "1", "--replication-factor", "2")
    certs = c.root / "certs"
    producer = Producer({
        "bootstrap.servers": ",".join(f"127.0.0.1:{p}" for p in ports.values()),
        "security.protocol": "SSL",
        "ssl.ca.location": str(certs / "ca.pem"),
        "ssl.certificate.location": str(certs / "admin.pem"),
        "ssl.key.location": str(certs / "admin.key"),
        "acks": "all",
    })  # fmt: skip
    for i in range(3):
        producer.produce(TOPIC, value=b"sealed-%d" % i, partition=0)
    assert producer.flush(60) == 0

    def settled() -> bool:
        [row] = ctl_tls(c, "topics", "describe", "--topic", TOPIC)
        return (
            row["HighWatermark"] == 3
            and row["LogStartOffset"] == 0
            and row["LogEndOffsets"] == [3, 3]
            and row["Lags"] == [0, 0]
        )

    c.wait_until(settled, 40, "offsets over SSL: HW 3, LEO 3 on both replicas")
