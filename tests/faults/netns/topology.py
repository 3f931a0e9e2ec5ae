"""Network namespaces for the packet-level fault tests: one per node, a full mesh
of point-to-point links between them, and the test's own (root) namespace
linked to every node as the `client`.

Why a mesh rather than one bridge: a fault is a property of one *directed* link
(c1 -> c2 cut, c2 -> c1 intact), and with one interface per peer that link is
one interface's egress, which `tc netem` can impair without the classifiers
this kernel lacks. Two ways to build a link, chosen once per run:

- `netem`: one veth pair straight between the two namespaces; netem on each
  end's egress (used when the kernel accepts a netem qdisc);
- `wire`: the kernel refused netem, so each node's end pairs with an end in a
  namespace of the packet wire (`packet_wire.py`), which forwards frames between
  the two wire-side ends and applies the rules itself.

Either way a node has one address, 10.A.B.i (the client 10.A.B.254), on each of
its link interfaces, and a /32 route to every peer through the link to it. Names
carry the creating pid and a random tag (parallel workers never collide, and a
later run deletes what a killed run left); every /24 is drawn at random and
checked unused.
"""

from __future__ import annotations

import ctypes
import itertools
import os
import random
import re
import secrets
import shutil
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

CLIENT = "client"  # the test process's own (root) namespace
OFFLOADS = Path(__file__).with_name("offloads.py")
CLONE_NEWNET = 0x40000000
LIBC = ctypes.CDLL(None, use_errno=True)
_PICKER = random.SystemRandom()  # subnets: see free_subnet


class NamespacesUnavailable(RuntimeError):
    """This machine cannot give the test network namespaces; says what failed."""


def sh(*args: str, stdin: str | None = None) -> str:
    done = subprocess.run(args, input=stdin, capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise subprocess.CalledProcessError(done.returncode, args, done.stdout, done.stderr)
    return done.stdout


def refusal(err: subprocess.CalledProcessError) -> str:
    return f"`{' '.join(err.cmd)}` failed: {(err.stderr or '').strip() or err.returncode}"


def sweep_stale() -> None:
    """Delete namespaces (and with them their veths) left by a run whose process
    is gone, e.g. one killed before its finalizers ran."""
    for line in sh("ip", "netns", "list").splitlines():
        match = re.match(r"(qn(\d+)-\S+)", line)
        if match is None:
            continue
        try:
            os.kill(int(match.group(2)), 0)
        except ProcessLookupError:
            subprocess.run(["ip", "netns", "del", match.group(1)], capture_output=True, check=False)
        except PermissionError:
            pass


def free_subnet() -> str:
    used = sh("ip", "-4", "addr") + sh("ip", "-4", "route", "show", "table", "all")
    for _ in range(100):
        # OS entropy, not the global `random` that pytest-randomly reseeds per test:
        # concurrent runs with one seed must not race for one subnet.
        subnet = f"10.{_PICKER.randrange(100, 251)}.{_PICKER.randrange(256)}"
        if f"{subnet}." not in used:
            return subnet
    raise NamespacesUnavailable("no unused 10.x.y.0/24 found for the namespaces")


def netem_refusal(namespace: str) -> str | None:
    """None when the kernel accepts a netem qdisc (tried on a namespace's lo),
    else its refusal, word for word."""
    try:
        sh("tc", "-n", namespace, "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms")
    except subprocess.CalledProcessError as err:
        return refusal(err)
    except FileNotFoundError:
        return "no `tc` command (iproute2)"
    sh("tc", "-n", namespace, "qdisc", "del", "dev", "lo", "root")
    return None


@dataclass
class Topology:
    nodes: tuple[str, ...]
    tag: str
    subnet: str
    mode: Literal["netem", "wire"] = "wire"
    netem_refused: str | None = None
    created: list[str] = field(default_factory=list)  # namespaces, in creation order
    owner: int = field(default_factory=os.getpid)  # in the names, for sweep_stale

    # ------------------------------------------------------------------ names

    def index(self, node: str) -> int:
        return 254 if node == CLIENT else self.nodes.index(node) + 1

    def address(self, node: str) -> str:
        return f"{self.subnet}.{self.index(node)}"

    def namespace(self, node: str) -> str | None:
        """The node's namespace; None for the client (the root namespace)."""
        return None if node == CLIENT else f"qn{self.owner}-{self.tag}-{node}"

    @property
    def wire_namespace(self) -> str:
        return f"qn{self.owner}-{self.tag}-wire"

    def ifname(self, node: str, peer: str) -> str:
        """`node`'s interface towards `peer` (unique in the root namespace for the client)."""
        return f"q{self.tag}v{self.index(peer)}" if node == CLIENT else f"v{self.index(peer)}"

    def wire_ifname(self, node: str, peer: str) -> str:
        """The wire's end of `node`'s veth towards `peer`."""
        return f"w{self.index(node)}-{self.index(peer)}"

    def prefix(self, node: str) -> tuple[str, ...]:
        """What runs a command inside `node`'s namespace."""
        namespace = self.namespace(node)
        return () if namespace is None else ("ip", "netns", "exec", namespace)

    def peers(self, node: str) -> list[str]:
        """Who `node` has a link to: the client reaches every node, a node everyone."""
        if node == CLIENT:
            return list(self.nodes)
        return [CLIENT, *(n for n in self.nodes if n != node)]

    def links(self) -> list[tuple[str, str]]:
        """Every undirected link: each pair of nodes, and the client to each node."""
        return [*((CLIENT, n) for n in self.nodes), *itertools.combinations(self.nodes, 2)]

    # --------------------------------------------------------------- building

    @classmethod
    def create(cls, nodes: tuple[str, ...], links: str = "auto") -> Topology:
        """`links`: "auto" (netem if the kernel has it, else the wire), or "wire" or
        "netem" to build that layout whatever the kernel says."""
        if os.geteuid() != 0:
            raise NamespacesUnavailable(f"not root (euid {os.geteuid()}): `ip netns add` needs it")
        if shutil.which("ip") is None:
            raise NamespacesUnavailable("no `ip` command (iproute2) on PATH")
        sweep_stale()
        topology = cls(tuple(nodes), secrets.token_hex(3), free_subnet())
        try:
            topology.build(links)
        except BaseException:
            topology.destroy()
            raise
        return topology

    def build(self, links: str) -> None:
        for node in self.nodes:
            self.add_namespace(self.namespace(node))  # type: ignore[arg-type]
        self.netem_refused = netem_refusal(self.created[0])
        if links == "auto":
            self.mode = "wire" if self.netem_refused is not None else "netem"
        elif links in ("netem", "wire"):
            self.mode = links  # type: ignore[assignment]
        else:
            raise ValueError(f"links must be auto, netem or wire, not {links!r}")
        if self.mode == "wire":
            self.add_namespace(self.wire_namespace)
        for a, b in self.links():
            if self.mode == "netem":
                self.veth(a, self.ifname(a, b), b, self.ifname(b, a))
            else:
                self.veth(a, self.ifname(a, b), None, self.wire_ifname(a, b))
                self.veth(b, self.ifname(b, a), None, self.wire_ifname(b, a))
        for node in [CLIENT, *self.nodes]:
            self.configure(node)
        if self.mode == "wire":
            batch = ["link set lo up"] + [
                f"link set {self.wire_ifname(x, y)} up"
                for a, b in self.links()
                for x, y in ((a, b), (b, a))
            ]
            sh("ip", "-n", self.wire_namespace, "-batch", "-", stdin="\n".join(batch) + "\n")

    def add_namespace(self, namespace: str) -> None:
        try:
            sh("ip", "netns", "add", namespace)
        except subprocess.CalledProcessError as err:
            raise NamespacesUnavailable(refusal(err)) from err
        self.created.append(namespace)

    def veth(self, node: str, ifname: str, peer: str | None, peer_ifname: str) -> None:
        """A veth pair: `ifname` in `node`'s namespace, `peer_ifname` in `peer`'s
        (None: the wire's namespace)."""
        here = self.namespace(node)
        there = self.wire_namespace if peer is None else self.namespace(peer)
        args = ["ip", "link", "add", "name", ifname]
        if here is not None:
            args += ["netns", here]
        args += ["type", "veth", "peer", "name", peer_ifname]
        if there is not None:
            args += ["netns", there]
        sh(*args)

    def configure(self, node: str) -> None:
        mine = self.address(node)
        peers = self.peers(node)
        batch = [] if node == CLIENT else ["link set lo up"]
        for peer in peers:
            ifname = self.ifname(node, peer)
            batch += [
                f"addr add {mine}/32 dev {ifname}",
                f"link set {ifname} up",
                f"route add {self.address(peer)}/32 dev {ifname} src {mine}",
            ]
        namespace = self.namespace(node)
        where = () if namespace is None else ("-n", namespace)
        sh("ip", *where, "-batch", "-", stdin="\n".join(batch) + "\n")
        if self.mode == "wire":
            ifnames = [self.ifname(node, p) for p in peers]
            sh(*self.prefix(node), sys.executable, str(OFFLOADS), *ifnames)

    # --------------------------------------------------------------- clean-up

    def destroy(self) -> None:
        """Every namespace deleted (a veth goes with either end's namespace), then
        any client-side veth still present. Never raises."""
        for namespace in reversed(self.created):
            subprocess.run(["ip", "netns", "del", namespace], capture_output=True, check=False)
        self.created.clear()
        for node in self.nodes:
            ifname = self.ifname(CLIENT, node)
            subprocess.run(["ip", "link", "del", ifname], capture_output=True, check=False)


def socket_in(namespace: str | None, kind: int = socket.SOCK_STREAM) -> socket.socket:
    """An IPv4 socket created inside `namespace` (None: here) and usable from any
    thread: a socket stays in the namespace it was made in, so a short-lived
    thread switches namespace (setns applies to the calling thread only), makes
    it, and ends."""
    if namespace is None:
        return socket.socket(socket.AF_INET, kind)
    made: list[socket.socket | BaseException] = []

    def make() -> None:
        try:
            fd = os.open(f"/run/netns/{namespace}", os.O_RDONLY)
            try:
                if LIBC.setns(fd, CLONE_NEWNET) != 0:
                    raise OSError(ctypes.get_errno(), f"setns into {namespace}")
            finally:
                os.close(fd)
            made.append(socket.socket(socket.AF_INET, kind))
        except BaseException as err:
            made.append(err)

    thread = threading.Thread(target=make)
    thread.start()
    thread.join()
    if isinstance(made[0], BaseException):
        raise made[0]
    return made[0]
