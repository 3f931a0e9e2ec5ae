"""`/metrics`, `/healthz` and `/readyz` over HTTPS (`metrics.listener=https://...`
with `metrics.listener.ssl.client.auth=required`): a real controller and broker
agent scraped with urllib and the CA; a plaintext scrape, a scrape without a
client certificate and one trusting another CA are all refused."""

from __future__ import annotations

import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.client import RemoteDisconnected
from pathlib import Path

import pytest

from quorum.common.local_ca import IssuedFiles, LocalCa
from quorum.controller_config import ConfigError, parse_config
from tests.integration.controller_cluster import Cluster, free_port
from tests.security.secure_cluster import add_mtls_brokers, create_mtls_cluster, tls_properties

CLIENT_AUTH = "metrics.listener.ssl.client.auth"


@pytest.fixture(scope="module")
def ca() -> LocalCa:
    return LocalCa("metrics CA")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, ca: LocalCa) -> Iterator[Cluster]:
    root = Path(tmp_path_factory.mktemp("metrics-https"))
    c = create_mtls_cluster(root, ca, voters=1)
    # Serve the controller's metrics over HTTPS, scrapers presenting certificates.
    config = c.procs[1].config
    text = config.read_text().replace("metrics.listener=http://", "metrics.listener=https://")
    config.write_text(f"{text}{CLIENT_AUTH}=required\n")
    broker_port = free_port()
    add_mtls_brokers(
        c,
        ca,
        101,
        metrics__listener=f"https://127.0.0.1:{broker_port}",
        metrics__listener__ssl__client__auth="required",
    )
    c.brokers[101].metrics_port = broker_port
    c.start()
    try:
        c.wait_for_leader(timeout_s=30)
        c.start_brokers()
        yield c
    finally:
        c.stop_all()


def scraper(files: IssuedFiles | None, ca_file: Path) -> ssl.SSLContext:
    """What Prometheus's tls_config does: trust the CA, present a certificate."""
    context = ssl.create_default_context(cafile=str(ca_file))
    if files is not None:
        context.load_cert_chain(str(files.certificate), str(files.key))
    return context


def get(url: str, context: ssl.SSLContext | None) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5, context=context) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def test_a_scrape_with_the_ca_and_a_certificate_reads_every_path(
    cluster: Cluster, ca: LocalCa
) -> None:
    prometheus = ca.write(cluster.root / "certs", "prometheus")
    context = scraper(prometheus, prometheus.ca)
    base = f"https://127.0.0.1:{cluster.procs[1].metrics_port}"
    status, page = get(f"{base}/metrics", context)
    assert status == 200 and "quorum_raft_current_leader 1.0" in page
    assert get(f"{base}/healthz", context) == (200, "ok\n")
    assert get(f"{base}/readyz", context)[0] == 200
    broker = f"https://127.0.0.1:{cluster.brokers[101].metrics_port}/metrics"
    cluster.wait_until(
        lambda: 'quorum_broker_state{state="ONLINE"} 1.0' in get(broker, context)[1],
        timeout_s=30,
        what="broker ONLINE on its HTTPS metrics",
    )


def test_a_plaintext_scrape_is_refused(cluster: Cluster) -> None:
    for port in (cluster.procs[1].metrics_port, cluster.brokers[101].metrics_port):
        with pytest.raises((RemoteDisconnected, ConnectionError, urllib.error.URLError)):
            get(f"http://127.0.0.1:{port}/metrics", None)
    for proc in (cluster.procs[1], cluster.brokers[101]):
        assert proc.alive() and "Traceback" not in proc.log_text()


def test_a_scrape_without_a_client_certificate_is_refused(cluster: Cluster, ca: LocalCa) -> None:
    files = ca.write(cluster.root / "certs", "anonymous")
    with pytest.raises((ssl.SSLError, ConnectionError, urllib.error.URLError)):
        get(f"https://127.0.0.1:{cluster.procs[1].metrics_port}/metrics", scraper(None, files.ca))


def test_a_scraper_that_trusts_another_ca_refuses_the_server(
    cluster: Cluster, tmp_path: Path
) -> None:
    other = LocalCa("another CA").write(tmp_path, "prometheus")
    with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
        get(f"https://127.0.0.1:{cluster.procs[1].metrics_port}/metrics", scraper(other, other.ca))
    assert cluster.procs[1].alive()


BASE = {
    "node.id": "1",
    "process.roles": "controller",
    "controller.quorum.voters": "1@127.0.0.1:9093",
    "listeners": "CONTROLLER://127.0.0.1:9093",
    "metadata.log.dir": "/tmp/unused",
}


def test_https_metrics_need_the_nodes_certificate() -> None:
    with pytest.raises(ConfigError) as refused:
        parse_config({**BASE, "metrics.listener": "https://127.0.0.1:9190"})
    assert refused.value.key == "metrics.listener"
    assert "ssl.certificate.location" in str(refused.value)


def test_client_auth_needs_an_https_listener(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as refused:
        parse_config({**BASE, "metrics.listener": "http://127.0.0.1:9190", CLIENT_AUTH: "required"})
    assert refused.value.key == CLIENT_AUTH
    files = LocalCa().write(tmp_path, "controller-1")
    tls = {**BASE, **tls_properties(files, None), "metrics.listener": "https://127.0.0.1:9190"}
    with pytest.raises(ConfigError, match="must be required, requested or none"):
        parse_config({**tls, CLIENT_AUTH: "optional"})
    config = parse_config({**tls, CLIENT_AUTH: "required"})
    assert config.metrics_tls is not None
    effective = config.as_properties()
    assert effective["metrics.listener"] == "https://127.0.0.1:9190"
    assert effective[CLIENT_AUTH] == "required"
    assert parse_config(effective) == config
