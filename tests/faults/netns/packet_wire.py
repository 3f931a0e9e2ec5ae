"""A user-space packet wire: the kernel here has no `netem`, so this process plays
its part on the veth links between network namespaces.

Every link between two nodes is a *cable*: two veth pairs, each with one end in
a node's namespace and the other here, in the wire's own namespace, opened with
an AF_PACKET raw socket. The wire copies each Ethernet frame read on one end out
of the other, after applying the rule of that directed link, with netem's
semantics: a frame is dropped with probability `loss` (or always, when the link
is `cut`), else held `delay ± jitter` (uniform, drawn for each frame on its own,
so jitter reorders frames as netem does). TCP runs end to end between the
namespaces: its retransmissions, timeouts and reordering are the kernel's.

It runs as its own process (timing without the test's GIL) and is controlled by
JSON lines on stdin, one JSON reply per line on stdout:

    {"op": "set", "src": "c1", "dst": "c2", "delay_ms": 200, "jitter_ms": 50,
     "loss": 0.05, "cut": false}
    {"op": "heal"}            every rule removed
    {"op": "stats"}           per directed link: frames forwarded, dropped by
                              the rule, failed (the kernel refused the send)

Usage: python packet_wire.py CONFIG.json, where the config is
{"cables": [{"a": "c1", "a_if": "w1-2", "b": "c2", "b_if": "w2-1"}, ...], "seed": 7}:
frames read on `a_if` come from node `a` and leave on `b_if` towards `b`.
"""

from __future__ import annotations

import contextlib
import heapq
import json
import os
import random
import selectors
import socket
import sys
import time
from dataclasses import dataclass, field

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_IGNORE_OUTGOING = 23  # our own sends are not read back
FRAME_MAX = 65536


@dataclass
class Rule:
    delay_s: float = 0.0
    jitter_s: float = 0.0
    loss: float = 0.0
    cut: bool = False


@dataclass
class Counters:
    forwarded: int = 0
    dropped: int = 0  # by the link's rule
    failed: int = 0  # by the kernel refusing our send (a full queue, a vanished peer)


@dataclass
class Port:
    """One wire-side veth end: frames read here come from `src`, go to `dst`."""

    src: str
    dst: str
    sock: socket.socket
    out: socket.socket | None = None


@dataclass(order=True)
class Held:
    due: float
    seq: int
    frame: bytes = field(compare=False)
    out: socket.socket = field(compare=False)
    link: tuple[str, str] = field(compare=False)


def open_port(ifname: str) -> socket.socket:
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    sock.bind((ifname, 0))
    sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
    for option in (33, 32):  # SO_RCVBUFFORCE, SO_SNDBUFFORCE: bursts are not our loss
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, option, 8 << 20)
    sock.setblocking(False)
    return sock


class Wire:
    def __init__(self, cables: list[dict[str, str]], seed: int) -> None:
        self.rng = random.Random(seed)
        self.rules: dict[tuple[str, str], Rule] = {}
        self.counters: dict[tuple[str, str], Counters] = {}
        self.held: list[Held] = []
        self.seq = 0
        self.selector = selectors.DefaultSelector()
        for cable in cables:
            a = Port(cable["a"], cable["b"], open_port(cable["a_if"]))
            b = Port(cable["b"], cable["a"], open_port(cable["b_if"]))
            a.out, b.out = b.sock, a.sock
            for port in (a, b):
                self.selector.register(port.sock, selectors.EVENT_READ, port)
                self.counters[(port.src, port.dst)] = Counters()
        self.selector.register(sys.stdin.fileno(), selectors.EVENT_READ, None)
        self.pending = b""

    # ---------------------------------------------------------------- frames

    def receive(self, port: Port, now: float) -> None:
        link = (port.src, port.dst)
        rule = self.rules.get(link)
        counters = self.counters[link]
        assert port.out is not None
        while True:
            try:
                frame = port.sock.recv(FRAME_MAX)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # the namespace went away: the run is ending
                return
            if rule is None:
                self.send(port.out, frame, counters)
                continue
            if rule.cut or (rule.loss > 0 and self.rng.random() < rule.loss):
                counters.dropped += 1
                continue
            delay = rule.delay_s
            if rule.jitter_s > 0:
                delay += self.rng.uniform(-rule.jitter_s, rule.jitter_s)
            if delay <= 0:
                self.send(port.out, frame, counters)
                continue
            self.seq += 1
            heapq.heappush(self.held, Held(now + delay, self.seq, frame, port.out, link))

    def send(self, out: socket.socket, frame: bytes, counters: Counters) -> None:
        try:
            out.send(frame)
            counters.forwarded += 1
        except OSError:  # a full queue or a vanished peer drops, as a NIC would
            counters.failed += 1

    def release(self, now: float) -> None:
        while self.held and self.held[0].due <= now:
            held = heapq.heappop(self.held)
            self.send(held.out, held.frame, self.counters[held.link])

    # --------------------------------------------------------------- control

    def control(self) -> bool:
        """Handle whole command lines from stdin; False once stdin closed."""
        data = os.read(sys.stdin.fileno(), 65536)
        if not data:
            return False
        self.pending += data
        while b"\n" in self.pending:
            line, self.pending = self.pending.split(b"\n", 1)
            if line.strip():
                reply = self.command(json.loads(line))
                sys.stdout.write(json.dumps(reply) + "\n")
                sys.stdout.flush()
        return True

    def command(self, cmd: dict[str, object]) -> dict[str, object]:
        op = cmd.get("op")
        if op == "set":
            link = (str(cmd["src"]), str(cmd["dst"]))
            if link not in self.counters:
                return {"ok": False, "error": f"no link {link[0]}->{link[1]}"}
            self.rules[link] = Rule(
                float(cmd.get("delay_ms", 0)) / 1000,  # type: ignore[arg-type]
                float(cmd.get("jitter_ms", 0)) / 1000,  # type: ignore[arg-type]
                float(cmd.get("loss", 0)),  # type: ignore[arg-type]
                bool(cmd.get("cut", False)),
            )
            return {"ok": True}
        if op == "heal":
            self.rules.clear()
            return {"ok": True}
        if op == "stats":
            links = {
                f"{src}>{dst}": {"forwarded": c.forwarded, "dropped": c.dropped, "failed": c.failed}
                for (src, dst), c in self.counters.items()
            }
            return {"ok": True, "links": links}
        return {"ok": False, "error": f"unknown op {op!r}"}

    # ------------------------------------------------------------------ loop

    def run(self) -> None:
        sys.stdout.write(json.dumps({"ready": True}) + "\n")
        sys.stdout.flush()
        while True:
            now = time.monotonic()
            timeout = max(0.0, self.held[0].due - now) if self.held else None
            for key, _ in self.selector.select(timeout):
                if key.data is None:
                    if not self.control():
                        return
                else:
                    self.receive(key.data, time.monotonic())
            self.release(time.monotonic())


def main() -> None:
    with open(sys.argv[1]) as f:
        config = json.load(f)
    with contextlib.suppress(OSError):
        os.nice(-10)  # a network is not starved by the processes it connects
    Wire(config["cables"], int(config.get("seed", 0))).run()


if __name__ == "__main__":
    main()
