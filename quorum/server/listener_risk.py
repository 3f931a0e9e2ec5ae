"""Name the risk of a controller listener that anyone on the network can reach.

Kafka's documentation puts the controller listener on a trusted network; without
client certificates any process that reaches it can send Raft requests claiming
to be a voter (README, "Security": what such a process can and cannot do). One
WARN at start-up says so when the listener is not on loopback.
"""

from __future__ import annotations

import ipaddress
import socket

from quorum.common.tls import ClientAuth, TlsSettings


def is_loopback(host: str) -> bool:
    """Whether every address `host` names is a loopback one (an unresolvable
    name, or a wildcard such as 0.0.0.0, is not)."""
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    return bool(infos) and all(
        ipaddress.ip_address(str(info[4][0]).split("%")[0]).is_loopback for info in infos
    )


def listener_warning(host: str, address: str, tls: TlsSettings | None) -> str | None:
    """The WARN line for a listener without client certificates off loopback, else None."""
    if tls is not None and tls.client_auth is not ClientAuth.NONE:
        return None
    if is_loopback(host):
        return None
    kind = "PLAINTEXT" if tls is None else "SSL without ssl.client.auth"
    return (
        f"the controller listener {address} is {kind} on a non-loopback address: any "
        "process that reaches it can send Raft requests claiming to be a voter (leader "
        "stickiness and controller.quorum.max.epoch.jump limit what they can do, but "
        "only mTLS binds a voter id to a certificate); keep it on a trusted network or "
        "set ssl.client.auth=required"
    )
