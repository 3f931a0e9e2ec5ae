"""The netem layout (one veth pair straight between two namespaces, netem on
each end's egress), built whatever the kernel says: its links carry TCP, and an
impairment is a `tc qdisc ... netem` that either takes effect (the delay is
measured) or fails with the same refusal the fixture recorded."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
from collections.abc import Iterator

import pytest
from links import CUT, Impairment, Links, namespaced_links, netem_args
from topology import CLIENT, NamespacesUnavailable, socket_in

PORT = 7009


@pytest.fixture(scope="module")
def links(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Links]:
    with contextlib.ExitStack() as stack:
        try:
            workdir = tmp_path_factory.mktemp("netem")
            links = stack.enter_context(namespaced_links(("a", "b"), workdir, kind="netem"))
        except NamespacesUnavailable as err:
            pytest.skip(f"network namespaces unavailable: {err}")
        yield links


def test_netem_arguments_follow_tc_netem() -> None:
    assert netem_args(Impairment(delay_ms=200, jitter_ms=50)) == ["delay", "200ms", "50ms"]
    assert netem_args(Impairment(loss=0.08)) == ["loss", "8%"]
    assert netem_args(Impairment(delay_ms=5, loss=0.5)) == ["delay", "5ms", "loss", "50%"]
    assert netem_args(CUT) == ["loss", "100%"]


def round_trip(links: Links, src: str, dst: str) -> float:
    topology = links.topology
    with socket_in(topology.namespace(dst)) as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # the last one's TIME_WAIT
        server.bind((topology.address(dst), PORT))
        server.listen()
        with socket_in(topology.namespace(src)) as client:
            client.settimeout(3)
            start = time.monotonic()
            client.connect((topology.address(dst), PORT))  # one SYN, one SYN-ACK
            took = time.monotonic() - start
            server.accept()[0].close()
    return took


def test_direct_links_carry_tcp_between_every_pair(links: Links) -> None:
    assert links.topology.mode == "netem"
    for src, dst in (("a", "b"), ("b", "a"), (CLIENT, "a"), ("b", CLIENT)):
        assert round_trip(links, src, dst) < 0.05, (src, dst)


def test_an_impairment_takes_effect_or_fails_with_the_kernels_refusal(links: Links) -> None:
    refused = links.topology.netem_refused
    try:
        if refused is not None:
            with pytest.raises(subprocess.CalledProcessError) as failure:
                links.set("a", "b", Impairment(delay_ms=80))
            assert failure.value.stderr.strip() in refused
            print(f"netem refused, as probed: {failure.value.stderr.strip()}")
        else:
            links.set("a", "b", Impairment(delay_ms=80))
            assert 0.075 <= round_trip(links, "a", "b") <= 0.2
            assert round_trip(links, "b", CLIENT) < 0.05
    finally:
        links.heal()
    assert round_trip(links, "a", "b") < 0.05


def test_sockets_are_made_in_the_namespace_asked_for(links: Links) -> None:
    """Each namespace holds only its own address: a socket made for a's binds a's
    address and not b's; one made here binds the client's."""
    topology = links.topology
    with socket_in(topology.namespace("a")) as sock:
        sock.bind((topology.address("a"), 0))
    with socket_in(topology.namespace("a")) as sock, pytest.raises(OSError):
        sock.bind((topology.address("b"), 0))
    with socket_in(None) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((topology.address(CLIENT), 0))
