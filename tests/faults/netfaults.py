"""Every link between two processes through a proxy of its own, and the faults a
scenario puts on them, all through the `toxiproxy-python` client.

A link is directed: `a->b` (proxy `a-b`) is the proxy `a` dials to reach `b` (its requests go
*upstream*, `b`'s answers *downstream*). gRPC runs both ways over the connection
its client opened, so "a cannot hear b" means dropping `b`'s answers on `a->b`
and `b`'s requests on `b->a`.

A cut is Toxiproxy's `timeout` toxic with timeout 0 on both streams: data is
dropped and connections stay open, as in a real partition (nothing is refused,
nothing is reset); removing it closes the connections it held, so healing is a
reconnect.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable

from toxiproxy import Toxiproxy
from toxiproxy.proxy import Proxy

UP, DOWN = "upstream", "downstream"


class Network:
    def __init__(self, toxiproxy: Toxiproxy) -> None:
        self.toxiproxy = toxiproxy
        self.links: dict[tuple[str, str], Proxy] = {}

    def link(self, src: str, dst: str, upstream: str) -> str:
        """A proxy for `src` dialing `dst` at `upstream`; returns the address to dial."""
        proxy = self.toxiproxy.create(upstream=upstream, name=f"{src}-{dst}")
        self.links[(src, dst)] = proxy
        return str(proxy.listen)

    def nodes(self) -> set[str]:
        return {n for pair in self.links for n in pair}

    def _toxic(self, src: str, dst: str, stream: str, kind: str, **attributes: int) -> None:
        proxy = self.links.get((src, dst))
        if proxy is None:
            return
        name = f"{kind}_{stream}"
        if name in proxy.toxics():
            proxy.destroy_toxic(name)
        proxy.add_toxic(name=name, type=kind, stream=stream, attributes=attributes)

    # ---------------------------------------------------------------- faults

    def drop(self, src: str, dst: str) -> None:
        """Nothing `src` sends reaches `dst` (requests on src->dst, answers on dst->src)."""
        self._toxic(src, dst, UP, "timeout", timeout=0)
        self._toxic(dst, src, DOWN, "timeout", timeout=0)

    def partition(self, a: str, b: str) -> None:
        self.drop(a, b)
        self.drop(b, a)

    def isolate(self, node: str, others: Iterable[str] | None = None) -> None:
        for other in others if others is not None else self.nodes() - {node}:
            self.partition(node, other)

    def deafen(self, node: str) -> None:
        """`node` can send but hears nothing."""
        for other in self.nodes() - {node}:
            self.drop(other, node)

    def mute(self, node: str) -> None:
        """`node` hears everything but nothing it sends arrives."""
        for other in self.nodes() - {node}:
            self.drop(node, other)

    def slow(self, node: str, latency_ms: int, jitter_ms: int = 0) -> None:
        """Every message to or from `node` delayed `latency_ms` ± `jitter_ms`."""
        for (src, dst), _ in self.links.items():
            if node in (src, dst):
                for stream in (UP, DOWN):
                    self._toxic(src, dst, stream, "latency", latency=latency_ms, jitter=jitter_ms)

    def throttle(self, src: str, dst: str, rate_kb_s: int) -> None:
        for stream in (UP, DOWN):
            self._toxic(src, dst, stream, "bandwidth", rate=rate_kb_s)

    def add(self, src: str, dst: str, stream: str, kind: str, **attributes: int) -> None:
        self._toxic(src, dst, stream, kind, **attributes)

    def remove(self, kind: str) -> None:
        """Every toxic of one type removed (the others stay)."""
        for proxy in self.links.values():
            for toxic in proxy.toxics().values():
                if toxic.type == kind:
                    proxy.destroy_toxic(toxic.name)

    def heal(self) -> None:
        """Every toxic removed, every proxy enabled."""
        self.toxiproxy.reset()

    def pairs(self) -> list[tuple[str, str]]:
        return list(itertools.permutations(sorted(self.nodes()), 2))
