"""The Toxiproxy server (ours, or the real one when on PATH) through `toxiproxy-python`.

API: routes, status codes and JSON bodies as Toxiproxy's. Toxics: each does what
Toxiproxy documents, measured on a real TCP echo through the proxy.
"""

from __future__ import annotations

import socket
import socketserver
import statistics
import threading
import time
from collections.abc import Iterator

import pytest
import requests
from toxiproxy import Toxiproxy
from toxiproxy.exceptions import InvalidToxic, NotFound, ProxyExists
from toxiproxy.proxy import Proxy
from toxiproxy_server import toxiproxy_server

from toxiproxy.api import APIConsumer  # isort: skip


class Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        while data := self.request.recv(65536):
            if data.startswith(b"CLOSE"):
                return  # the upstream closes: exercises slow_close
            self.request.sendall(data)


class Sink(socketserver.BaseRequestHandler):
    """Counts what arrives (the upstream of a bandwidth test), then says how much."""

    def handle(self) -> None:
        total = 0
        while data := self.request.recv(65536):
            total += len(data)
            if data.endswith(b"$"):
                self.request.sendall(b"%d" % total)
                return


@pytest.fixture(scope="module")
def toxiproxy() -> Iterator[Toxiproxy]:
    with toxiproxy_server() as server:
        yield server


def serve(handler: type[socketserver.BaseRequestHandler]) -> Iterator[str]:
    socketserver.ThreadingTCPServer.daemon_threads = True
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def echo() -> Iterator[str]:
    yield from serve(Echo)


@pytest.fixture
def proxy(toxiproxy: Toxiproxy, echo: str, request: pytest.FixtureRequest) -> Iterator[Proxy]:
    made = toxiproxy.create(upstream=echo, name=request.node.name[:40])
    try:
        yield made
    finally:
        made.destroy()


def connect(proxy: Proxy) -> socket.socket:
    host, _, port = proxy.listen.rpartition(":")
    sock = socket.create_connection((host, int(port)), timeout=5)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def round_trip(sock: socket.socket, payload: bytes = b"ping") -> float:
    start = time.monotonic()
    sock.sendall(payload)
    got = b""
    while len(got) < len(payload):
        chunk = sock.recv(65536)
        assert chunk, "connection closed"
        got += chunk
    assert got == payload
    return time.monotonic() - start


def api(method: str, path: str, **kwargs: object) -> requests.Response:
    url = f"http://{APIConsumer.host}:{APIConsumer.port}{path}"
    return requests.request(method, url, timeout=5, **kwargs)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- API


def test_version_and_empty_toxics(toxiproxy: Toxiproxy, proxy: Proxy) -> None:
    assert toxiproxy.version()
    assert proxy.toxics() == {}
    assert toxiproxy.get_proxy(proxy.name).upstream == proxy.upstream


def test_status_codes_and_bodies(toxiproxy: Toxiproxy, proxy: Proxy) -> None:
    with pytest.raises(ProxyExists):  # the client checks the list itself ...
        toxiproxy.create(upstream=proxy.upstream, name=proxy.name)
    again = api("POST", "/proxies", json={"name": proxy.name, "upstream": proxy.upstream})
    assert again.status_code == 409  # ... and the server answers 409 too
    assert again.json() == {"error": "proxy already exists", "status": 409}
    missing = api("GET", "/proxies/no-such-proxy")
    assert missing.status_code == 404
    assert missing.json() == {"error": "proxy not found", "status": 404}
    with pytest.raises(NotFound):
        Proxy(name="no-such-proxy", upstream="x:1", enabled=True, listen="x:2").toxics()
    with pytest.raises(InvalidToxic):
        proxy.add_toxic(type="no_such_toxic")
    body = {"type": "latency", "stream": "x"}
    bad_stream = api("POST", f"/proxies/{proxy.name}/toxics", json=body)
    assert bad_stream.status_code == 400
    assert bad_stream.json()["error"].startswith("stream was invalid")
    no_name = api("POST", "/proxies", json={"upstream": "127.0.0.1:1"})
    assert no_name.status_code == 400
    assert no_name.json()["error"].startswith("missing required field")
    proxy.add_toxic(type="latency", attributes={"latency": 5})
    with pytest.raises(ProxyExists):  # the client raises ProxyExists for any 409
        proxy.add_toxic(type="latency", attributes={"latency": 5})
    assert api("GET", f"/proxies/{proxy.name}/toxics/nope").status_code == 404
    shown = api("GET", f"/proxies/{proxy.name}/toxics/latency_downstream").json()
    assert shown == {
        "attributes": {"latency": 5, "jitter": 0},
        "name": "latency_downstream",
        "type": "latency",
        "stream": "downstream",
        "toxicity": 1.0,
    }
    jitter = {"attributes": {"jitter": 2}}
    updated = api("POST", f"/proxies/{proxy.name}/toxics/latency_downstream", json=jitter)
    assert updated.status_code == 200
    assert updated.json()["attributes"] == {"latency": 5, "jitter": 2}
    assert api("DELETE", f"/proxies/{proxy.name}/toxics/latency_downstream").status_code == 204
    assert proxy.toxics() == {}


def test_proxies_listing_reset_and_delete(toxiproxy: Toxiproxy, echo: str) -> None:
    made = toxiproxy.create(upstream=echo, name="listed")
    made.add_toxic(type="timeout", stream="upstream", attributes={"timeout": 0})
    made.disable()
    listed = api("GET", "/proxies").json()["listed"]
    assert listed["enabled"] is False and listed["toxics"][0]["type"] == "timeout"
    assert toxiproxy.reset()
    after = toxiproxy.get_proxy("listed")
    assert after.enabled is True and after.toxics() == {}
    round_trip(connect(after))
    assert made.destroy()
    assert "listed" not in toxiproxy.proxies()
    assert api("DELETE", "/proxies/listed").status_code == 404


# ------------------------------------------------------------------------ toxics


def test_plain_proxy_passes_bytes_both_ways(proxy: Proxy) -> None:
    with connect(proxy) as sock:
        payload = bytes(range(256)) * 1000
        round_trip(sock, payload)


def test_latency_delays_each_direction(proxy: Proxy) -> None:
    with connect(proxy) as sock:
        base = min(round_trip(sock) for _ in range(5))
        proxy.add_toxic(type="latency", stream="downstream", attributes={"latency": 100})
        down = [round_trip(sock) for _ in range(5)]
        proxy.add_toxic(type="latency", stream="upstream", attributes={"latency": 50})
        both = [round_trip(sock) for _ in range(5)]
    assert base < 0.05
    assert all(0.095 <= d <= 0.16 for d in down), down
    assert all(0.145 <= d <= 0.22 for d in both), both


def test_latency_jitter_spreads_delays(proxy: Proxy) -> None:
    proxy.add_toxic(type="latency", attributes={"latency": 100, "jitter": 50})
    with connect(proxy) as sock:
        samples = [round_trip(sock) for _ in range(30)]
    assert all(0.045 <= s <= 0.2 for s in samples), samples
    assert statistics.pstdev(samples) > 0.01, samples  # not one fixed delay
    assert 0.08 <= statistics.mean(samples) <= 0.13, samples


def test_bandwidth_limits_rate(toxiproxy: Toxiproxy) -> None:
    for sink in serve(Sink):
        made = toxiproxy.create(upstream=sink, name="bandwidth")
        try:
            made.add_toxic(type="bandwidth", stream="upstream", attributes={"rate": 200})
            with connect(made) as sock:
                payload = b"x" * 99_999 + b"$"
                start = time.monotonic()
                sock.sendall(payload)
                assert sock.recv(100) == b"100000"
                elapsed = time.monotonic() - start
        finally:
            made.destroy()
    rate = 100_000 / elapsed / 1000  # KB/s
    assert 150 <= rate <= 210, rate  # 200 KB/s, within 25% below and 5% above


def test_timeout_zero_blackholes_until_removed(proxy: Proxy) -> None:
    with connect(proxy) as sock:
        round_trip(sock)
        proxy.add_toxic(type="timeout", stream="upstream", attributes={"timeout": 0})
        sock.sendall(b"lost")
        sock.settimeout(0.5)
        with pytest.raises(TimeoutError):  # no data, and the connection stays open
            sock.recv(10)
        proxy.destroy_toxic("timeout_upstream")
        sock.settimeout(5)
        assert sock.recv(10) == b""  # removing it closes what it held, as Toxiproxy does
    with connect(proxy) as fresh:
        round_trip(fresh)


def test_timeout_closes_after_the_delay(proxy: Proxy) -> None:
    proxy.add_toxic(type="timeout", attributes={"timeout": 300})
    with connect(proxy) as sock:
        start = time.monotonic()
        sock.sendall(b"hello")
        assert sock.recv(10) == b""
        assert 0.28 <= time.monotonic() - start <= 0.6


def test_reset_peer_sends_rst(proxy: Proxy) -> None:
    proxy.add_toxic(type="reset_peer", stream="upstream", attributes={"timeout": 200})
    with connect(proxy) as sock:
        start = time.monotonic()
        sock.sendall(b"hello")
        with pytest.raises(ConnectionResetError):
            sock.recv(10)
        assert 0.18 <= time.monotonic() - start <= 0.5


def test_slow_close_delays_the_close(proxy: Proxy) -> None:
    proxy.add_toxic(type="slow_close", attributes={"delay": 400})
    with connect(proxy) as sock:
        round_trip(sock)
        start = time.monotonic()
        sock.sendall(b"CLOSE")  # the echo server hangs up
        assert sock.recv(10) == b""
        assert 0.38 <= time.monotonic() - start <= 0.8


def test_limit_data_closes_after_the_limit(proxy: Proxy) -> None:
    proxy.add_toxic(type="limit_data", attributes={"bytes": 10})
    with connect(proxy) as sock:
        sock.sendall(b"abcdef")
        got = b""
        while chunk := sock.recv(100):
            got += chunk
            if len(got) == 6:
                sock.sendall(b"ghijklmnop")
        assert got == b"abcdefghij"


def test_slicer_slices_and_spaces_writes(proxy: Proxy) -> None:
    proxy.add_toxic(
        type="slicer", attributes={"average_size": 100, "size_variation": 20, "delay": 20_000}
    )
    with connect(proxy) as sock:
        start = time.monotonic()
        sock.sendall(b"y" * 2000)
        reads = []
        total = 0
        while total < 2000:
            chunk = sock.recv(65536)
            reads.append(len(chunk))
            total += len(chunk)
        elapsed = time.monotonic() - start
    assert len(reads) >= 10, reads  # about 20 slices of 80-120 bytes
    assert max(reads) <= 240, reads
    assert 0.25 <= elapsed <= 1.0, elapsed  # ~19 gaps of 20 ms


def test_toxicity_applies_to_a_share_of_connections(proxy: Proxy) -> None:
    proxy.add_toxic(type="latency", toxicity=0.5, attributes={"latency": 60})
    slow = 0
    for _ in range(40):
        with connect(proxy) as sock:
            slow += round_trip(sock) > 0.05
    assert 6 <= slow <= 34, slow
    proxy.destroy_toxic("latency_downstream")
    proxy.add_toxic(type="latency", toxicity=0.0, attributes={"latency": 60})
    with connect(proxy) as sock:
        assert round_trip(sock) < 0.05


def test_disabled_proxy_refuses_and_drops(proxy: Proxy) -> None:
    sock = connect(proxy)
    round_trip(sock)
    proxy.disable()
    assert sock.recv(10) == b""  # the open connection is dropped
    sock.close()
    with pytest.raises(ConnectionRefusedError):
        connect(proxy)
    proxy.enable()
    with connect(proxy) as again:
        round_trip(again)
