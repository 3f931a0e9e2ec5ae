"""The brokers' SSL Kafka listeners: TLS with the broker's certificate, client
certificates required (`ssl.client.auth=required`), beside a PLAINTEXT listener;
Metadata answers with the endpoints of the listener the request came on."""

from __future__ import annotations

import contextlib
import json
import socket
import ssl
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from broker_agent.kafka.listener import principal_of
from quorum.common.local_ca import IssuedFiles, LocalCa
from tests.integration.controller_cluster import (
    Cluster,
    ctl_json,
    free_port,
    running_cluster,
)

pytestmark = pytest.mark.slow
BROKER = 101


@dataclass
class SslBroker:
    cluster: Cluster
    plaintext_port: int
    ssl_port: int
    client: IssuedFiles


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SslBroker]:
    root = tmp_path_factory.mktemp("kafka-ssl")
    ca = LocalCa("kafka listener CA")
    server = ca.write(root / "certs", f"broker-{BROKER}")
    client = ca.write(root / "certs", "client-app")
    with running_cluster(root) as cluster:
        plaintext_port, ssl_port = free_port(), free_port()
        cluster.add_brokers(
            BROKER,
            broker__heartbeat__interval__ms="500",
            listeners=f"PLAINTEXT://127.0.0.1:{plaintext_port},SSL://127.0.0.1:{ssl_port}",
            listener__security__protocol__map="PLAINTEXT:PLAINTEXT,SSL:SSL,CONTROLLER:PLAINTEXT",
            ssl__certificate__location=str(server.certificate),
            ssl__key__location=str(server.key),
            ssl__ca__location=str(server.ca),
            ssl__client__auth="required",
        )
        cluster.start_brokers()
        cluster.wait_until(
            lambda: [r["State"] for r in ctl_json(cluster, "brokers", "list")] == ["ONLINE"],
            20,
            "the broker ONLINE",
        )
        ctl_json(cluster, "topics", "create", "secure", "--partitions", "1",
                 "--replication-factor", "1")  # fmt: skip
        yield SslBroker(cluster, plaintext_port, ssl_port, client)


def ssl_config(broker: SslBroker) -> dict[str, str]:
    return {
        "bootstrap.servers": f"127.0.0.1:{broker.ssl_port}",
        "security.protocol": "SSL",
        "ssl.ca.location": str(broker.client.ca),
        "ssl.certificate.location": str(broker.client.certificate),
        "ssl.key.location": str(broker.client.key),
    }


def test_confluent_kafka_over_mtls_sees_the_ssl_endpoints(broker: SslBroker) -> None:
    from confluent_kafka.admin import AdminClient

    listing = AdminClient(ssl_config(broker)).list_topics(timeout=20)
    assert {b.id: b.port for b in listing.brokers.values()} == {BROKER: broker.ssl_port}
    assert "secure" in listing.topics


def test_the_plaintext_listener_advertises_its_own_port(broker: SslBroker) -> None:
    from confluent_kafka.admin import AdminClient

    plain = AdminClient({"bootstrap.servers": f"127.0.0.1:{broker.plaintext_port}"})
    listing = plain.list_topics(timeout=20)
    assert {b.id: b.port for b in listing.brokers.values()} == {BROKER: broker.plaintext_port}


def test_kcat_over_mtls(broker: SslBroker) -> None:
    cfg = ssl_config(broker)
    done = subprocess.run(
        ["kcat", "-b", cfg["bootstrap.servers"], "-L", "-J",
         "-X", "security.protocol=SSL", "-X", f"ssl.ca.location={cfg['ssl.ca.location']}",
         "-X", f"ssl.certificate.location={cfg['ssl.certificate.location']}",
         "-X", f"ssl.key.location={cfg['ssl.key.location']}"],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert [b["id"] for b in json.loads(done.stdout)["brokers"]] == [BROKER]


def test_a_client_without_a_certificate_is_refused_at_the_handshake(broker: SslBroker) -> None:
    context = ssl.create_default_context(cafile=str(broker.client.ca))
    with (
        socket.create_connection(("127.0.0.1", broker.ssl_port), timeout=10) as raw,
        pytest.raises((ssl.SSLError, ConnectionError, OSError)),
        context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        tls.sendall(b"\0\0\0\x0a" + b"\0" * 10)
        assert tls.recv(1) == b""  # TLS 1.3 reports the refusal on first read
        raise ConnectionError("closed")


def test_plaintext_bytes_on_the_ssl_listener_close_only_that_connection(
    broker: SslBroker,
) -> None:
    with socket.create_connection(("127.0.0.1", broker.ssl_port), timeout=10) as raw:
        raw.sendall(b"\0\0\0\x0a" + b"\0" * 10)
        with contextlib.suppress(ConnectionResetError):
            assert raw.recv(100) is not None  # an alert or EOF, then closed
    test_confluent_kafka_over_mtls_sees_the_ssl_endpoints(broker)


def test_the_principal_is_the_certificate_subject() -> None:
    cert = {"subject": ((("organizationName", "acme"),), (("commonName", "app-1"),))}
    assert principal_of(cert) == "User:CN=app-1,O=acme"
    assert principal_of(None) == "User:ANONYMOUS"
    assert principal_of({}) == "User:ANONYMOUS"
