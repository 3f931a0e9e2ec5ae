"""Faults on the namespaces' links, one directed link at a time, by `tc netem`
where the kernel has it and by the packet wire where it does not; the scenarios
call the same methods either way.

A directed link `a -> b` carries what `a` sends to `b` (its requests and its
answers alike: below TCP there is no "upstream"), so "a cannot hear b" is one
rule on `b -> a`, and a partition is two rules.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import re
import select
import subprocess
import sys
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from process_logs import watch
from topology import CLIENT, Topology, sh

PACKET_WIRE = Path(__file__).with_name("packet_wire.py")
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Impairment:
    """netem's vocabulary: each frame delayed `delay_ms` ± `jitter_ms` (uniform),
    or lost with probability `loss`; `cut` loses every frame."""

    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    loss: float = 0.0
    cut: bool = False


CUT = Impairment(cut=True)


def netem_args(impairment: Impairment) -> list[str]:
    """The `tc qdisc ... netem` arguments for one impairment."""
    if impairment.cut:
        return ["loss", "100%"]
    args: list[str] = []
    if impairment.delay_ms or impairment.jitter_ms:
        args += ["delay", f"{impairment.delay_ms:g}ms"]
        if impairment.jitter_ms:
            args.append(f"{impairment.jitter_ms:g}ms")
    if impairment.loss:
        args += ["loss", f"{impairment.loss * 100:g}%"]
    return args or ["delay", "0ms"]


class Links(ABC):
    def __init__(self, topology: Topology) -> None:
        self.topology = topology

    @abstractmethod
    def set(self, src: str, dst: str, impairment: Impairment) -> None:
        """Impair what `src` sends to `dst` (replacing any earlier rule there)."""

    @abstractmethod
    def heal(self) -> None:
        """Every rule removed."""

    @abstractmethod
    def dropped(self, src: str, dst: str) -> int:
        """Frames lost so far on `src -> dst` (to show a fault took effect)."""

    @abstractmethod
    def close(self) -> None: ...

    # ---------------------------------------------------------- the scenarios'

    def partition(self, a: str, b: str) -> None:
        self.set(a, b, CUT)
        self.set(b, a, CUT)

    def isolate(self, node: str, others: Iterable[str] | None = None) -> None:
        """Cut `node` off from the other nodes (the client still reaches it)."""
        for other in others if others is not None else self.others(node):
            self.partition(node, other)

    def impair_node(self, node: str, impairment: Impairment) -> None:
        """Both directions of every link between `node` and the other nodes."""
        for other in self.others(node):
            self.set(node, other, impairment)
            self.set(other, node, impairment)

    def others(self, node: str) -> list[str]:
        return [n for n in self.topology.nodes if n != node]


class NetemLinks(Links):
    """netem on the egress of `src`'s interface towards `dst`."""

    def __init__(self, topology: Topology) -> None:
        super().__init__(topology)
        self.impaired: set[tuple[str, str]] = set()

    def tc(self, src: str, *args: str) -> None:
        namespace = self.topology.namespace(src)
        sh("tc", *(() if namespace is None else ("-n", namespace)), "qdisc", *args)

    def set(self, src: str, dst: str, impairment: Impairment) -> None:
        dev = self.topology.ifname(src, dst)
        self.tc(src, "replace", "dev", dev, "root", "netem", *netem_args(impairment))
        self.impaired.add((src, dst))

    def dropped(self, src: str, dst: str) -> int:
        """netem counts its losses as the qdisc's drops (gone once healed)."""
        namespace = self.topology.namespace(src)
        where = () if namespace is None else ("-n", namespace)
        shown = sh("tc", *where, "-s", "qdisc", "show", "dev", self.topology.ifname(src, dst))
        return sum(int(n) for n in re.findall(r"dropped (\d+)", shown))

    def heal(self) -> None:
        for src, dst in sorted(self.impaired):
            self.tc(src, "del", "dev", self.topology.ifname(src, dst), "root")
        self.impaired.clear()

    def close(self) -> None:
        """Nothing to stop: the qdiscs go with the namespaces."""


class WireLinks(Links):
    """The packet wire as a process in its own namespace, driven over its stdin."""

    def __init__(self, topology: Topology, workdir: Path, seed: int = 0) -> None:
        super().__init__(topology)
        cables = [
            {
                "a": a,
                "a_if": topology.wire_ifname(a, b),
                "b": b,
                "b_if": topology.wire_ifname(b, a),
            }
            for a, b in topology.links()
        ]
        config = workdir / "wire.json"
        config.write_text(json.dumps({"cables": cables, "seed": seed}))
        watch(workdir / "wire.log", "packet wire")
        self.stderr = (workdir / "wire.log").open("wb")
        self.lock = threading.Lock()
        self.popen = subprocess.Popen(
            ["ip", "netns", "exec", topology.wire_namespace,
             sys.executable, str(PACKET_WIRE), str(config)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr,
        )  # fmt: skip
        try:
            ready = self.reply(timeout_s=15)
            assert ready.get("ready"), ready
        except BaseException:
            self.close()
            raise

    def reply(self, timeout_s: float = 5.0) -> dict[str, object]:
        assert self.popen.stdout is not None
        readable, _, _ = select.select([self.popen.stdout], [], [], timeout_s)
        line = self.popen.stdout.readline() if readable else b""
        if not line:
            raise RuntimeError(f"the packet wire did not answer (exit {self.popen.poll()})")
        answer: dict[str, object] = json.loads(line)
        return answer

    def call(self, **command: object) -> dict[str, object]:
        with self.lock:
            assert self.popen.stdin is not None
            self.popen.stdin.write(json.dumps(command).encode() + b"\n")
            self.popen.stdin.flush()
            answer = self.reply()
        if not answer.get("ok"):
            raise RuntimeError(f"the packet wire refused {command}: {answer}")
        return answer

    def set(self, src: str, dst: str, impairment: Impairment) -> None:
        self.call(
            op="set", src=src, dst=dst, delay_ms=impairment.delay_ms,
            jitter_ms=impairment.jitter_ms, loss=impairment.loss, cut=impairment.cut,
        )  # fmt: skip

    def heal(self) -> None:
        self.call(op="heal")

    def dropped(self, src: str, dst: str) -> int:
        return self.stats()[f"{src}>{dst}"]["dropped"]

    def stats(self) -> dict[str, dict[str, int]]:
        links: dict[str, dict[str, int]] = self.call(op="stats")["links"]  # type: ignore[assignment]
        return links

    def close(self) -> None:
        if self.popen.stdin is not None:
            self.popen.stdin.close()  # the wire leaves when its stdin closes
        try:
            self.popen.wait(5)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait(5)
        if self.popen.stdout is not None:
            self.popen.stdout.close()
        self.stderr.close()


@contextlib.contextmanager
def namespaced_links(
    nodes: tuple[str, ...], workdir: Path, kind: str | None = None
) -> Iterator[Links]:
    """Namespaces for `nodes` (plus the client) and their links' fault control;
    all removed on exit. `kind` (default: FAULT_NETNS_LINKS, else "auto") may
    ask for the wire even where netem exists, to compare the two. The wire's
    losses and delays are drawn from FAULT_SEED when set (else a logged random
    seed). Raises NamespacesUnavailable when namespaces cannot be made."""
    kind = kind or os.environ.get("FAULT_NETNS_LINKS", "auto")
    topology = Topology.create(nodes, links=kind)
    links: Links | None = None
    try:
        if topology.mode == "netem":
            log.warning("links: veth pairs between the namespaces, impaired by tc netem")
            links = NetemLinks(topology)
        else:
            refused = topology.netem_refused or "netem available, but the wire was asked for"
            seed = int(os.environ.get("FAULT_SEED", str(random.randrange(1 << 30))))
            # stderr: a bench's stdout is its measurements
            log.warning("using the packet wire (FAULT_SEED=%d): %s", seed, refused)
            links = WireLinks(topology, workdir, seed)
        yield links
    finally:
        if links is not None:
            links.close()
        topology.destroy()


__all__ = ["CLIENT", "CUT", "Impairment", "Links", "namespaced_links"]
