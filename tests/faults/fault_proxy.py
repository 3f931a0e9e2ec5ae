"""A Toxiproxy-compatible fault proxy: asyncio TCP proxies behind Toxiproxy's HTTP API.

The fault tests drive faults with the real `toxiproxy-python` client. Toxiproxy
itself (a Go program) is not in the package registries these machines reach, so
this module serves the same API (the routes, status codes and JSON bodies of
Toxiproxy 2.x) over proxies of its own; when a `toxiproxy-server` binary is on
PATH the tests use that instead, unchanged.

Run it as a process: ``python tests/faults/fault_proxy.py --host 127.0.0.1 --port 0``
prints ``listening on HOST:PORT`` once the API answers.

Each accepted connection gets two *links*, upstream (client to server) and
downstream (server to client). A reader task stamps every chunk with its arrival
time and queues it; a writer task passes it through the link's toxics in the
order they were added, so `latency` delays each chunk from its arrival (chunks
in flight overlap, as in Toxiproxy) and toxics added or removed later act on
connections already open. Whether a toxic applies to a link is drawn once per
link from its `toxicity`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import socket
import struct
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

VERSION = "2.9.0-kraft-quorum"
CHUNK = 32 * 1024
STREAMS = ("upstream", "downstream")

# type -> its attributes (all integers, Toxiproxy's names and units)
TOXIC_ATTRIBUTES: dict[str, tuple[str, ...]] = {
    "latency": ("latency", "jitter"),  # ms
    "bandwidth": ("rate",),  # KB/s (1 KB = 1000 bytes)
    "slow_close": ("delay",),  # ms
    "timeout": ("timeout",),  # ms; 0 = never close, drop data until removed
    "reset_peer": ("timeout",),  # ms
    "slicer": ("average_size", "size_variation", "delay"),  # bytes, bytes, µs
    "limit_data": ("bytes",),
}


class ApiError(Exception):
    """An API failure with Toxiproxy's message and status code."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


PROXY_NOT_FOUND = ("proxy not found", 404)
PROXY_EXISTS = ("proxy already exists", 409)
TOXIC_NOT_FOUND = ("toxic not found", 404)
TOXIC_EXISTS = ("toxic already exists", 409)
BAD_BODY = ("bad request body", 400)
MISSING_FIELD = ("missing required field", 400)
INVALID_STREAM = ("stream was invalid, can be either upstream or downstream", 400)
INVALID_TYPE = ("invalid toxic type", 400)


def fail(error: tuple[str, int], detail: str = "") -> ApiError:
    message, status = error
    return ApiError(f"{message}: {detail}" if detail else message, status)


@dataclass
class Toxic:
    name: str
    type: str
    stream: str
    toxicity: float
    attributes: dict[str, int]

    def as_json(self) -> dict[str, Any]:
        return {
            "attributes": dict(self.attributes),
            "name": self.name,
            "type": self.type,
            "stream": self.stream,
            "toxicity": self.toxicity,
        }

    def attr(self, key: str) -> int:
        return self.attributes.get(key, 0)


def parse_toxic(body: Any, existing: Toxic | None = None) -> Toxic:
    """A toxic from a create (or, with `existing`, an update) body; 400 if invalid."""
    if not isinstance(body, dict):
        raise fail(BAD_BODY, "expected a JSON object")
    kind = body.get("type", existing.type if existing else "")
    if existing is not None and kind != existing.type:
        raise fail(BAD_BODY, "a toxic's type cannot change")
    if kind not in TOXIC_ATTRIBUTES:
        raise fail(INVALID_TYPE)
    stream = body.get("stream", existing.stream if existing else "downstream")
    if stream not in STREAMS:
        raise fail(INVALID_STREAM)
    toxicity = body.get("toxicity", existing.toxicity if existing else 1.0)
    if isinstance(toxicity, bool) or not isinstance(toxicity, int | float):
        raise fail(BAD_BODY, "toxicity must be a number")
    if not 0.0 <= float(toxicity) <= 1.0:
        raise fail(BAD_BODY, "toxicity must be between 0 and 1")
    raw = body.get("attributes", {})
    if not isinstance(raw, dict):
        raise fail(BAD_BODY, "attributes must be an object")
    attributes = dict(existing.attributes) if existing else dict.fromkeys(TOXIC_ATTRIBUTES[kind], 0)
    for key, value in raw.items():
        if key not in TOXIC_ATTRIBUTES[kind]:
            continue  # Toxiproxy ignores fields its toxic does not have
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise fail(BAD_BODY, f"attribute {key} must be a non-negative number")
        attributes[key] = int(value)
    name = body.get("name") or (existing.name if existing else f"{kind}_{stream}")
    if not isinstance(name, str):
        raise fail(BAD_BODY, "name must be a string")
    return Toxic(name, kind, stream, float(toxicity), attributes)


# ----------------------------------------------------------------------- links


@dataclass(eq=False)
class Connection:
    """One proxied TCP connection: the client side and the upstream side."""

    client: asyncio.StreamWriter
    server: asyncio.StreamWriter
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    links: list[Link] = field(default_factory=list)
    closed: bool = False

    def close(self, reset: bool = False) -> None:
        if self.closed:
            return
        self.closed = True
        for writer in (self.client, self.server):
            sock = writer.get_extra_info("socket")
            if reset and sock is not None:
                with contextlib.suppress(OSError):  # SO_LINGER 0: close sends RST
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort() if reset else writer.close()
        for task in self.tasks:
            if task is not asyncio.current_task():
                task.cancel()


class Link:
    """One direction of a connection, with its own view of the proxy's toxics."""

    def __init__(self, proxy: Proxy, conn: Connection, stream: str) -> None:
        self.proxy = proxy
        self.conn = conn
        self.stream = stream
        self.applies: dict[int, bool] = {}  # id(toxic) -> drawn from toxicity
        self.sent: dict[int, int] = {}  # id(limit_data toxic) -> bytes passed
        self.timers: dict[int, asyncio.TimerHandle] = {}
        self.bandwidth_free_at = 0.0

    def active(self) -> list[Toxic]:
        """The toxics that apply to this link now (drawing toxicity on first sight),
        arming the timers of `timeout` and `reset_peer`."""
        current = [t for t in self.proxy.toxics if t.stream == self.stream]
        live = {id(t) for t in current}
        for key in [k for k in self.timers if k not in live]:
            self.timers.pop(key).cancel()
        chosen = []
        for toxic in current:
            if id(toxic) not in self.applies:
                self.applies[id(toxic)] = random.random() < toxic.toxicity
                if self.applies[id(toxic)]:
                    self._arm(toxic)
            if self.applies[id(toxic)]:
                chosen.append(toxic)
        return chosen

    def _arm(self, toxic: Toxic) -> None:
        """`timeout` closes the connection once no data came for `timeout` ms."""
        if toxic.type == "timeout" and toxic.attr("timeout") > 0:
            if (old := self.timers.pop(id(toxic), None)) is not None:
                old.cancel()
            loop = asyncio.get_running_loop()
            self.timers[id(toxic)] = loop.call_later(toxic.attr("timeout") / 1000, self.conn.close)

    def removed(self, toxic: Toxic) -> None:
        """Removing a `timeout` that held this link closes the connection (as
        Toxiproxy's cleanup does): the data it dropped would corrupt the stream."""
        if (timer := self.timers.pop(id(toxic), None)) is not None:
            timer.cancel()
        if toxic.type == "timeout" and self.applies.get(id(toxic)):
            self.conn.close()

    async def pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()
        feeder = asyncio.create_task(self._read(reader, queue))
        self.conn.tasks.append(feeder)
        self.active()  # arm timers for toxics present when the link opens
        try:
            while True:
                arrived, data = await queue.get()
                if not data:
                    await self._closing()
                    return
                for toxic in self.active():
                    data = await self._apply(toxic, arrived, data, writer)
                    if not data:
                        break
                if data:
                    writer.write(data)
                    await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            self.conn.close()

    async def _read(
        self, reader: asyncio.StreamReader, queue: asyncio.Queue[tuple[float, bytes]]
    ) -> None:
        try:
            while data := await reader.read(CHUNK):
                await queue.put((time.monotonic(), data))
        except (ConnectionError, OSError):
            pass
        await queue.put((time.monotonic(), b""))

    async def _closing(self) -> None:
        """The source closed: `slow_close` holds the close back."""
        delays = [t.attr("delay") for t in self.active() if t.type == "slow_close"]
        if delays:
            await asyncio.sleep(max(delays) / 1000)

    async def _apply(
        self, toxic: Toxic, arrived: float, data: bytes, writer: asyncio.StreamWriter
    ) -> bytes:
        """Run one chunk through one toxic: what it passes on (b"" when it drops it)."""
        kind = toxic.type
        if kind == "latency":
            jitter = toxic.attr("jitter")
            delay = toxic.attr("latency") + (random.randint(-jitter, jitter) if jitter else 0)
            await asyncio.sleep(max(0.0, arrived + delay / 1000 - time.monotonic()))
        elif kind == "bandwidth" and toxic.attr("rate") > 0:
            rate = toxic.attr("rate") * 1000  # bytes per second
            start = max(time.monotonic(), self.bandwidth_free_at)
            piece = max(1, rate // 10)  # Toxiproxy sends slow links in 100 ms pieces
            while len(data) > piece:
                await asyncio.sleep(max(0.0, start + piece / rate - time.monotonic()))
                start += piece / rate
                writer.write(data[:piece])
                await writer.drain()
                data = data[piece:]
            self.bandwidth_free_at = start + len(data) / rate
            await asyncio.sleep(max(0.0, self.bandwidth_free_at - time.monotonic()))
        elif kind == "timeout":
            self._arm(toxic)
            return b""  # dropped on the floor
        elif kind == "reset_peer":
            await asyncio.sleep(toxic.attr("timeout") / 1000)
            self.conn.close(reset=True)
            return b""
        elif kind == "limit_data":
            passed = self.sent.get(id(toxic), 0)
            room = toxic.attr("bytes") - passed
            if len(data) >= room:
                if room > 0:
                    writer.write(data[:room])
                    await writer.drain()
                self.conn.close()
                return b""
            self.sent[id(toxic)] = passed + len(data)
        elif kind == "slicer":
            data = await self._slice(toxic, data, writer)
        return data

    async def _slice(self, toxic: Toxic, data: bytes, writer: asyncio.StreamWriter) -> bytes:
        """Write all but the last slice (each its own write, `delay` µs apart)."""
        average, variation = max(1, toxic.attr("average_size")), toxic.attr("size_variation")
        while True:
            size = max(1, average + random.randint(-variation, variation))
            if len(data) <= size:
                return data
            writer.write(data[:size])
            await writer.drain()
            data = data[size:]
            await asyncio.sleep(toxic.attr("delay") / 1_000_000)


# --------------------------------------------------------------------- proxies


class Proxy:
    def __init__(self, name: str, listen: str, upstream: str) -> None:
        self.name = name
        self.listen = listen
        self.upstream = upstream
        self.enabled = False
        self.toxics: list[Toxic] = []
        self.server: asyncio.Server | None = None
        self.connections: set[Connection] = set()

    def remove_toxic(self, toxic: Toxic) -> None:
        self.toxics.remove(toxic)
        for conn in list(self.connections):
            for link in conn.links:
                link.removed(toxic)

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "listen": self.listen,
            "upstream": self.upstream,
            "enabled": self.enabled,
            "toxics": [t.as_json() for t in self.toxics],
        }

    async def start(self) -> None:
        if self.enabled:
            return
        host, _, port = self.listen.rpartition(":")
        try:
            self.server = await asyncio.start_server(self._accept, host or "127.0.0.1", int(port))
        except (OSError, ValueError) as err:
            raise ApiError(f"listen tcp {self.listen}: {err}", 500) from err
        bound = self.server.sockets[0].getsockname()
        self.listen = f"{bound[0]}:{bound[1]}"
        self.enabled = True

    async def stop(self) -> None:
        """Stop listening and drop every connection (Toxiproxy's `enabled: false`)."""
        if self.server is not None:
            self.server.close()
            self.server = None
        for conn in list(self.connections):
            conn.close()
        self.connections.clear()
        self.enabled = False

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        host, _, port = self.upstream.rpartition(":")
        try:
            up_reader, up_writer = await asyncio.open_connection(host, int(port))
        except (OSError, ValueError):
            writer.close()
            return
        for w in (writer, up_writer):
            sock = w.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = Connection(writer, up_writer)
        self.connections.add(conn)
        conn.links = [Link(self, conn, "upstream"), Link(self, conn, "downstream")]
        conn.tasks = [
            asyncio.create_task(conn.links[0].pump(reader, up_writer)),
            asyncio.create_task(conn.links[1].pump(up_reader, writer)),
        ]
        try:
            await asyncio.gather(*conn.tasks, return_exceptions=True)
        finally:
            conn.close()
            self.connections.discard(conn)


class Collection:
    def __init__(self) -> None:
        self.proxies: dict[str, Proxy] = {}

    def get(self, name: str) -> Proxy:
        if name not in self.proxies:
            raise fail(PROXY_NOT_FOUND)
        return self.proxies[name]

    async def create(self, body: Any) -> Proxy:
        if not isinstance(body, dict):
            raise fail(BAD_BODY, "expected a JSON object")
        for key in ("name", "upstream"):
            if not isinstance(body.get(key), str) or not body[key]:
                raise fail(MISSING_FIELD, key)
        if body["name"] in self.proxies:
            raise fail(PROXY_EXISTS)
        proxy = Proxy(body["name"], body.get("listen") or "127.0.0.1:0", body["upstream"])
        if body.get("enabled", True):
            await proxy.start()
        self.proxies[proxy.name] = proxy
        return proxy

    async def update(self, proxy: Proxy, body: Any) -> None:
        if not isinstance(body, dict):
            raise fail(BAD_BODY, "expected a JSON object")
        moved = body.get("listen", proxy.listen) != proxy.listen
        if moved or body.get("upstream", proxy.upstream) != proxy.upstream:
            await proxy.stop()
            proxy.listen = body.get("listen", proxy.listen)
            proxy.upstream = body.get("upstream", proxy.upstream)
        if body.get("enabled", proxy.enabled):
            await proxy.start()
        else:
            await proxy.stop()

    async def reset(self) -> None:
        for proxy in self.proxies.values():
            for toxic in list(proxy.toxics):
                proxy.remove_toxic(toxic)
            await proxy.start()


# ------------------------------------------------------------------------- API

Handler = Callable[..., Any]


class Api:
    """Toxiproxy's routes over a minimal HTTP/1.1 server (keep-alive, JSON bodies)."""

    def __init__(self) -> None:
        self.collection = Collection()

    async def route(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        parts = [unquote(p) for p in path.split("?")[0].split("/") if p]
        c = self.collection
        match (method, parts):
            case ("GET", ["version"]):
                return 200, {"version": VERSION}
            case ("POST", ["reset"]):
                await c.reset()
                return 204, None
            case ("GET", ["proxies"]):
                return 200, {name: p.as_json() for name, p in c.proxies.items()}
            case ("POST", ["proxies"]):
                return 201, (await c.create(body)).as_json()
            case ("POST", ["populate"]):
                return await self.populate(body)
            case ("GET", ["proxies", name]):
                return 200, c.get(name).as_json()
            case ("POST" | "PATCH", ["proxies", name]):
                proxy = c.get(name)
                await c.update(proxy, body)
                return 200, proxy.as_json()
            case ("DELETE", ["proxies", name]):
                await c.get(name).stop()
                del c.proxies[name]
                return 204, None
            case ("GET", ["proxies", name, "toxics"]):
                return 200, [t.as_json() for t in c.get(name).toxics]
            case ("POST", ["proxies", name, "toxics"]):
                proxy = c.get(name)
                toxic = parse_toxic(body)
                if any(t.name == toxic.name for t in proxy.toxics):
                    raise fail(TOXIC_EXISTS)
                proxy.toxics.append(toxic)
                return 200, toxic.as_json()
            case ("GET", ["proxies", name, "toxics", toxic_name]):
                return 200, self._toxic(c.get(name), toxic_name).as_json()
            case ("POST" | "PATCH", ["proxies", name, "toxics", toxic_name]):
                proxy = c.get(name)
                old = self._toxic(proxy, toxic_name)
                new = parse_toxic({**body, "name": old.name}, existing=old)
                # a fresh object: every link draws toxicity and arms timers again
                proxy.toxics[proxy.toxics.index(old)] = new
                return 200, new.as_json()
            case ("DELETE", ["proxies", name, "toxics", toxic_name]):
                proxy = c.get(name)
                proxy.remove_toxic(self._toxic(proxy, toxic_name))
                return 204, None
        return 404, "404 page not found\n"

    @staticmethod
    def _toxic(proxy: Proxy, name: str) -> Toxic:
        for toxic in proxy.toxics:
            if toxic.name == name:
                return toxic
        raise fail(TOXIC_NOT_FOUND)

    async def populate(self, body: Any) -> tuple[int, Any]:
        if not isinstance(body, list):
            raise fail(BAD_BODY, "expected a JSON array")
        made = []
        for item in body:
            name = item.get("name", "") if isinstance(item, dict) else ""
            old = self.collection.proxies.get(name)
            if old is not None:
                await old.stop()
                del self.collection.proxies[old.name]
            made.append((await self.collection.create(item)).as_json())
        return 201, {"proxies": made}

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                request = await reader.readline()
                if not request:
                    return
                method, path, _ = request.decode("latin-1").split(" ", 2)
                headers: dict[str, str] = {}
                while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
                    key, _, value = line.decode("latin-1").partition(":")
                    headers[key.strip().lower()] = value.strip()
                raw = await reader.readexactly(int(headers.get("content-length", "0") or 0))
                status, payload = await self.answer(method, path, raw, headers)
                writer.write(render(status, payload))
                await writer.drain()
                if headers.get("connection", "").lower() == "close":
                    return
        except (ConnectionError, ValueError, asyncio.IncompleteReadError):
            return
        finally:
            writer.close()

    async def answer(
        self, method: str, path: str, raw: bytes, headers: dict[str, str]
    ) -> tuple[int, Any]:
        if headers.get("user-agent", "").startswith("Mozilla/"):
            return 403, "User agent not allowed\n"
        try:
            body = json.loads(raw) if raw.strip() else {}
        except ValueError as err:
            return 400, {"error": f"bad request body: {err}", "status": 400}
        try:
            return await self.route(method, path, body)
        except ApiError as err:
            return err.status, {"error": err.message, "status": err.status}


REASONS = {200: "OK", 201: "Created", 204: "No Content", 400: "Bad Request", 403: "Forbidden"}
REASONS |= {404: "Not Found", 409: "Conflict", 500: "Internal Server Error"}


def render(status: int, payload: Any) -> bytes:
    if payload is None:
        body, kind = b"", "text/plain"
    elif isinstance(payload, str):
        body, kind = payload.encode(), "text/plain; charset=utf-8"
    else:
        body, kind = (json.dumps(payload) + "\n").encode(), "application/json"
    head = (
        f"HTTP/1.1 {status} {REASONS.get(status, 'Error')}\r\n"
        f"Content-Type: {kind}\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def main_async(host: str, port: int) -> None:
    api = Api()
    server = await asyncio.start_server(api.serve, host, port)
    bound = server.sockets[0].getsockname()
    print(f"listening on {bound[0]}:{bound[1]}", flush=True)
    parent = os.getppid()
    async with server:
        while os.getppid() == parent:  # a test or bench that died leaves no proxy behind
            await asyncio.sleep(1)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8474)
    args = parser.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main_async(args.host, args.port))


if __name__ == "__main__":
    sys.exit(main())
