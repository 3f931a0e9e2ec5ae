"""A gate in front of a leader's Kafka listener: the real followers' fetches pass
one at a time, when a test says so.

The leader advertises the gate's port, so the follower brokers' fetchers connect
to it (as they connect to whatever the metadata names) and the gate relays
their bytes to the leader's real listener. Every request passes at once except
a follower's Fetch (`replica_id` >= 0), which waits until the test releases it;
the answers come back untouched. Nothing is rewritten or invented: the leader
sees the followers' own fetches, the followers get the leader's own answers,
only *when* each fetch reaches the leader is the test's choice. That is what a
test needs to replay a walk-through in which follower 1 fetches before
follower 2 (seed 001), which SIGSTOP/SIGCONT cannot do without racing.

A follower that gives up on a held fetch (its client times out) closes its
connection; the gate forgets that fetch, and the one it sends next is held.

A gate made with `topic` holds only the fetches naming that topic (others pass
as if there were no gate). `hold_answers()` stops relaying the leader's answers
to the followers, as a network that loses them: the gate keeps reading them and
drops them when the leader's side closes (a crashed leader's answers that never
arrived). seed 001's data-loss scenario needs followers that never learn the HW
their own fetches moved.
"""

from __future__ import annotations

import select
import socket
import struct
import threading
from dataclasses import dataclass, field

from broker_agent.kafka import codec
from broker_agent.kafka.versions import ApiKey
from tests.integration.controller_cluster import free_port

WAIT_S = 60.0  # generous: several helpers share two cores


@dataclass
class HeldFetch:
    """One follower Fetch the gate holds: who sent it, and at which offsets."""

    replica_id: int
    fetch_offsets: dict[tuple[str, int], int]
    released: threading.Event = field(default_factory=threading.Event)
    dropped: bool = False


class FetchGate:
    def __init__(self, topic: str | None = None) -> None:
        self.topic = topic
        self.port = free_port()
        self.upstream_port: int | None = None  # the leader's real listener, set before it starts
        self._server = socket.create_server(("127.0.0.1", self.port))
        self._cond = threading.Condition()
        self._held: list[HeldFetch] = []
        self._seen: dict[int, int] = {}  # follower id -> fetches held so far
        self._open = False
        self._closed = False
        self._answers_held = False
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, name="fetch-gate", daemon=True).start()

    # ------------------------------------------------------------- the test's side

    def held(self, replica_id: int) -> HeldFetch:
        """The fetch follower `replica_id` is waiting on (waits for it to arrive)."""
        with self._cond:
            ok = self._cond.wait_for(lambda: self._find(replica_id) is not None, WAIT_S)
            found = self._find(replica_id)
            assert ok and found is not None, f"no fetch from follower {replica_id} reached the gate"
            return found

    def release(self, replica_id: int) -> HeldFetch:
        """Let follower `replica_id`'s held fetch through, and return the next one it
        sends: it sends that only after it has applied the leader's answer."""
        with self._cond:
            current = self.held(replica_id)
            count = self._seen[replica_id]
            current.released.set()
            self._held.remove(current)
            ok = self._cond.wait_for(
                lambda: self._seen[replica_id] > count and self._find(replica_id) is not None,
                WAIT_S,
            )
            found = self._find(replica_id)
            assert ok and found is not None, f"follower {replica_id} sent no fetch after an answer"
            return found

    def let_through(self, replica_id: int) -> HeldFetch:
        """Let follower `replica_id`'s held fetch through without waiting for its next
        one (whose answer may never come: see `hold_answers`)."""
        with self._cond:
            current = self.held(replica_id)
            current.released.set()
            self._held.remove(current)
            return current

    def hold_answers(self) -> None:
        """From now on the followers get no answer through this gate (until `open`;
        a connection that lost an answer is closed then, as a broken link would be)."""
        with self._cond:
            self._answers_held = True

    def open(self) -> None:
        """Hold nothing any more: every held and later fetch passes, every later
        answer is relayed."""
        with self._cond:
            self._open = True
            self._answers_held = False
            for held in self._held:
                held.released.set()
            self._held.clear()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            for held in self._held:
                held.released.set()
        self._server.close()
        for s in list(self._sockets):
            s.close()

    def _find(self, replica_id: int) -> HeldFetch | None:
        return next((h for h in self._held if h.replica_id == replica_id and not h.dropped), None)

    # ------------------------------------------------------------------ relaying

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            try:
                assert self.upstream_port is not None, "the gate has no leader behind it yet"
                upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            except (AssertionError, OSError):
                client.close()  # the follower retries, as with a leader that is down
                continue
            self._sockets += [client, upstream]
            threading.Thread(target=self._requests, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._answers, args=(upstream, client), daemon=True).start()

    def _requests(self, client: socket.socket, upstream: socket.socket) -> None:
        try:
            while (frame := _read_frame(client)) is not None:
                api_key, api_version, _ = codec.peek_header(frame)
                if api_key == ApiKey.FETCH and not self._wait_turn(frame, api_version, client):
                    break
                upstream.sendall(struct.pack(">i", len(frame)) + frame)
        except OSError:
            pass
        finally:
            client.close()
            upstream.close()

    def _wait_turn(self, frame: bytes, api_version: int, client: socket.socket) -> bool:
        """Hold a follower's Fetch until released; False if its sender hung up."""
        body = codec.decode_request(frame, ApiKey.FETCH, api_version).body
        replica_id = int(body.replica_id)
        if replica_id < 0:
            return True  # a consumer's
        offsets = {
            (str(t.topic), int(p.partition)): int(p.fetch_offset)
            for t in body.topics
            for p in t.partitions
        }
        if self.topic is not None and all(topic != self.topic for topic, _ in offsets):
            return True  # not the gated topic's
        held = HeldFetch(replica_id, offsets)
        with self._cond:
            if self._open or self._closed:
                return not self._closed
            self._held.append(held)
            self._seen[replica_id] = self._seen.get(replica_id, 0) + 1
            self._cond.notify_all()
        while not held.released.wait(0.1):
            if _hung_up(client):
                with self._cond:
                    held.dropped = True
                    if held in self._held:
                        self._held.remove(held)
                return False
        return not self._closed

    def _answers(self, upstream: socket.socket, client: socket.socket) -> None:
        dropped = False
        try:
            while chunk := upstream.recv(1 << 16):
                if self._answers_held:
                    dropped = True  # lost, as on a network that failed
                elif dropped:
                    break  # the follower would read the tail of a frame: close instead
                else:
                    client.sendall(chunk)
        except OSError:
            pass
        finally:
            client.close()
            upstream.close()


def _read_frame(sock: socket.socket) -> bytes | None:
    size_bytes = _read(sock, 4)
    if size_bytes is None:
        return None
    return _read(sock, struct.unpack(">i", size_bytes)[0])


def _read(sock: socket.socket, n: int) -> bytes | None:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            return None
        out += chunk
    return out


def _hung_up(sock: socket.socket) -> bool:
    """The peer closed (a follower sends nothing else while its fetch is held)."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
        return bool(readable) and sock.recv(1, socket.MSG_PEEK) == b""
    except (OSError, ValueError):  # ValueError: closed meanwhile (its leader's side closed)
        return True
