"""The links between namespaces do what netem documents: a TCP echo between two
namespaces measures the configured delay, UDP datagrams are lost at the
configured rate, a cut drops everything and healing restores a connection that
was open across it. Run against whichever backend the kernel allows (the packet
wire on this machine)."""

from __future__ import annotations

import contextlib
import os
import socket
import statistics
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from links import CUT, Impairment, Links, WireLinks, namespaced_links
from topology import CLIENT, NamespacesUnavailable, socket_in

pytestmark = pytest.mark.slow

PORT = 7007
SO_RCVBUFFORCE = 33


@pytest.fixture(scope="module")
def links(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Links]:
    with contextlib.ExitStack() as stack:
        try:
            workdir = tmp_path_factory.mktemp("wire")
            links = stack.enter_context(namespaced_links(("a", "b"), workdir))
        except NamespacesUnavailable as err:
            pytest.skip(f"network namespaces unavailable: {err}")
        yield links


@pytest.fixture(autouse=True)
def healed(links: Links) -> Iterator[None]:
    yield
    links.heal()


@pytest.fixture(scope="module")
def echo_b(links: Links) -> Iterator[tuple[str, int]]:
    """A TCP echo server in b's namespace (threads of this process)."""
    topology = links.topology
    server = socket_in(topology.namespace("b"))
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind((topology.address("b"), PORT))
    server.listen()

    def echo(conn: socket.socket) -> None:
        with conn:
            while data := conn.recv(65536):
                conn.sendall(data)

    def accept() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=echo, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    yield topology.address("b"), PORT
    server.close()


def connect(links: Links, node: str, to: tuple[str, int], timeout_s: float = 3) -> socket.socket:
    conn = socket_in(links.topology.namespace(node))
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    conn.settimeout(timeout_s)
    conn.connect(to)
    return conn


def round_trip(conn: socket.socket) -> float:
    start = time.monotonic()
    conn.sendall(b"ping")
    assert conn.recv(16) == b"ping"
    return time.monotonic() - start


def test_delay_between_namespaces_is_measured_within_tolerance(
    links: Links, echo_b: tuple[str, int]
) -> None:
    with connect(links, "a", echo_b) as conn:
        base = statistics.median(round_trip(conn) for _ in range(20))
        links.set("a", "b", Impairment(delay_ms=100, jitter_ms=20))
        one_way = [round_trip(conn) for _ in range(30)]
        links.set("b", "a", Impairment(delay_ms=50))
        both = [round_trip(conn) for _ in range(10)]
    print(f"echo a->b: {base * 1000:.2f} ms plain; 100±20 ms on a->b: "
          f"{min(one_way) * 1000:.0f}-{max(one_way) * 1000:.0f} ms, mean "
          f"{statistics.mean(one_way) * 1000:.0f}; plus 50 ms on b->a: "
          f"median {statistics.median(both) * 1000:.0f} ms")  # fmt: skip
    assert base < 0.01
    assert all(0.078 <= t <= 0.150 for t in one_way), one_way
    assert 0.090 <= statistics.mean(one_way) <= 0.115  # ±8.5 ms is 4 sd of 30 draws
    assert statistics.stdev(one_way) > 0.005  # jitter, drawn for each frame
    assert all(0.128 <= t <= 0.200 for t in both), both


def test_loss_rate_is_within_tolerance(links: Links) -> None:
    topology = links.topology
    receiver = socket_in(topology.namespace("b"), socket.SOCK_DGRAM)
    sender = socket_in(topology.namespace("a"), socket.SOCK_DGRAM)
    with receiver, sender:
        receiver.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 16 << 20)  # read at the end
        receiver.bind((topology.address("b"), PORT + 1))
        receiver.settimeout(1)
        sender.sendto(b"arp", (topology.address("b"), PORT + 1))  # resolve b before any loss
        assert receiver.recv(64) == b"arp"
        counted = links.dropped("a", "b")
        links.set("a", "b", Impairment(loss=0.2))
        sent = 2000
        for i in range(sent):
            sender.sendto(b"%d" % i, (topology.address("b"), PORT + 1))
            if i % 50 == 0:
                time.sleep(0.002)  # stay below the receive buffer
        received = 0
        receiver.settimeout(0.5)
        try:
            while True:
                receiver.recv(64)
                received += 1
        except TimeoutError:
            pass
    lost = 1 - received / sent
    counted = links.dropped("a", "b") - counted
    print(f"loss 20% on a->b: {sent - received} of {sent} datagrams lost ({lost:.1%}), "
          f"{counted} frames dropped by the link")  # fmt: skip
    assert 0.16 <= lost <= 0.24  # ±4 points: over 5 standard deviations at n=2000
    assert abs(counted - (sent - received)) <= 5  # the rule lost them, nothing else


def test_cut_drops_everything_and_heal_restores_the_connection(
    links: Links, echo_b: tuple[str, int]
) -> None:
    with connect(links, "a", echo_b) as conn:
        round_trip(conn)
        links.partition("a", "b")
        conn.settimeout(1.5)
        conn.sendall(b"ping")
        with pytest.raises(TimeoutError):
            conn.recv(16)  # below TCP: retransmitted, never answered
        with pytest.raises(TimeoutError):
            connect(links, "a", echo_b, timeout_s=1)
        with connect(links, CLIENT, echo_b) as side:  # only the cut link is cut
            round_trip(side)
        links.heal()
        conn.settimeout(10)  # TCP's own retransmission timer delivers it
        assert conn.recv(16) == b"ping"
        assert round_trip(conn) < 0.05
    with connect(links, "a", echo_b) as fresh:
        round_trip(fresh)


def test_a_one_way_cut_leaves_the_other_direction(links: Links) -> None:
    """a -> b cut: b's datagrams still reach a, a's never reach b."""
    topology = links.topology
    at_a = socket_in(topology.namespace("a"), socket.SOCK_DGRAM)
    at_b = socket_in(topology.namespace("b"), socket.SOCK_DGRAM)
    with at_a, at_b:
        at_a.bind((topology.address("a"), PORT + 2))
        at_b.bind((topology.address("b"), PORT + 2))
        for sock, peer in ((at_a, "b"), (at_b, "a")):  # resolve both ways first
            sock.sendto(b"arp", (topology.address(peer), PORT + 2))
        at_a.settimeout(1)
        at_b.settimeout(1)
        at_a.recv(16)
        at_b.recv(16)
        links.set("a", "b", CUT)
        for _ in range(20):
            at_a.sendto(b"a", (topology.address("b"), PORT + 2))
            at_b.sendto(b"b", (topology.address("a"), PORT + 2))
        assert at_a.recv(16) == b"b"
        with pytest.raises(TimeoutError):
            at_b.recv(16)


def test_the_fixture_names_its_backend(links: Links) -> None:
    """Left to choose, the fixture uses the wire only where the kernel refused
    netem, and keeps the refusal word for word."""
    topology = links.topology
    if os.environ.get("FAULT_NETNS_LINKS", "auto") == "auto":
        assert topology.mode == ("wire" if topology.netem_refused else "netem")
    if topology.netem_refused:
        assert "netem" in topology.netem_refused
        print(f"kernel refused netem: {topology.netem_refused}")
    assert topology.subnet.startswith("10.")
    assert Path(f"/run/netns/{topology.namespace('a')}").exists()


def test_a_bulk_transfer_crosses_intact(links: Links, echo_b: tuple[str, int]) -> None:
    """4 MB each way through an unimpaired link, every byte back in order; the
    wire itself fails no send (TCP would hide a lost frame, its counters do not)."""
    payload = bytes(range(256)) * 16384
    with connect(links, "a", echo_b, timeout_s=20) as conn:
        received = bytearray()

        def drain() -> None:
            while len(received) < len(payload):
                chunk = conn.recv(1 << 16)
                if not chunk:
                    return
                received.extend(chunk)

        reader = threading.Thread(target=drain)
        reader.start()
        start = time.monotonic()
        conn.sendall(payload)
        reader.join(30)
        took = time.monotonic() - start
    print(f"4 MB echoed a->b->a in {took:.2f}s ({2 * len(payload) / took / 1e6:.0f} MB/s)")
    assert bytes(received) == payload
    if isinstance(links, WireLinks):
        failed = {link: c["failed"] for link, c in links.stats().items() if c["failed"]}
        assert not failed, failed
