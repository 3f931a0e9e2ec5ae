"""`topics describe`'s broker offsets when brokers misbehave, on real sockets: a
refused port, a broker that accepts and never answers (a SIGSTOPped process
looks so), one that answers garbage. Each leaves its values unknown; the call
returns, never raises. Lags are the leader's LEO minus each replica's."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from quorum.cli.partition_offsets import (
    BrokerAddress,
    PartitionOffsets,
    PartitionPlacement,
    fetch_offsets,
)
from tests.integration.controller_cluster import free_port

PLACEMENT = PartitionPlacement("orders", 0, leader=1, replicas=(1, 2))


@pytest.fixture
def silent() -> Iterator[int]:
    """Accepts connections (the kernel does it for a stopped process) and never answers."""
    server = socket.create_server(("127.0.0.1", 0))
    yield server.getsockname()[1]
    server.close()


@pytest.fixture
def garbage() -> Iterator[int]:
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                conn.recv(1 << 16)
                conn.sendall(b"\x00\x00\x00\x08" + b"\xff" * 8)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    server.close()


def test_refused_silent_and_garbage_brokers_leave_everything_unknown(
    silent: int, garbage: int
) -> None:
    for port in (free_port(), silent, garbage):
        brokers = {
            1: BrokerAddress("127.0.0.1", port),
            2: BrokerAddress("127.0.0.1", free_port()),
        }
        found = fetch_offsets([PLACEMENT], brokers, timeout_s=0.5)
        offsets = found[("orders", 0)]
        assert offsets == PartitionOffsets(None, None, {1: None, 2: None}), port


def test_a_broker_missing_from_the_cluster_is_unknown_too() -> None:
    found = fetch_offsets([PLACEMENT], {}, timeout_s=0.5)
    assert found[("orders", 0)].log_end_offsets == {1: None, 2: None}


def test_lag_is_the_leaders_leo_minus_the_replicas() -> None:
    offsets = PartitionOffsets(10, 0, {1: 12, 2: 9, 3: None})
    assert offsets.lag(1, 1) == 0
    assert offsets.lag(1, 2) == 3
    assert offsets.lag(1, 3) is None  # the replica did not answer
    assert PartitionOffsets(None, None, {1: None, 2: 9}).lag(1, 2) is None  # nor the leader
