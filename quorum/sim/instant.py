"""A lossless, zero-latency cluster of cores for unit tests and the core benchmark.

Messages go through a FIFO queue and flushes complete at once, so a test can
drive an exact scenario and read the outcome without a scheduler.
"""

from __future__ import annotations

import random
from collections import deque

from quorum.raft.config import QuorumStateData, RaftConfig
from quorum.raft.effects import (
    Effect,
    FlushLog,
    PersistQuorumState,
    Role,
    SendMessage,
)
from quorum.raft.messages import Message
from quorum.raft.node import RaftNode


class InstantCluster:
    def __init__(self, voters: int = 3, observers: int = 0, seed: int = 0, **config: int) -> None:
        self.now = 0
        self.voter_ids = frozenset(range(1, voters + 1))
        self.nodes: dict[int, RaftNode] = {}
        self.persisted: dict[int, QuorumStateData] = {}
        self.effects: dict[int, list[Effect]] = {}
        self.cut: set[int] = set()
        self._inbox: deque[tuple[int, int, Message]] = deque()
        self._flushes: deque[tuple[int, FlushLog]] = deque()
        for node_id in range(1, voters + observers + 1):
            cfg = RaftConfig(node_id, self.voter_ids, **config)
            self.nodes[node_id] = RaftNode(cfg, random.Random(seed * 1000 + node_id), self.now)
            self.effects[node_id] = []

    def process(self, node_id: int) -> None:
        node = self.nodes[node_id]
        for effect in node.poll(self.now):
            self.effects[node_id].append(effect)
            if isinstance(effect, SendMessage):
                if node_id not in self.cut and effect.destination not in self.cut:
                    self._inbox.append((node_id, effect.destination, effect.message))
            elif isinstance(effect, FlushLog):
                self._flushes.append((node_id, effect))
            elif isinstance(effect, PersistQuorumState):
                self.persisted[node_id] = QuorumStateData(
                    effect.epoch, effect.voted_for, effect.leader_id
                )

    def settle(self, max_steps: int = 100_000) -> None:
        """Deliver messages and complete flushes until nothing is left to do."""
        for node_id in self.nodes:
            self.process(node_id)
        steps = 0
        while self._inbox or self._flushes:
            steps += 1
            if steps > max_steps:
                raise RuntimeError("cluster did not settle")
            if self._flushes:
                node_id, flush = self._flushes.popleft()
                self.nodes[node_id].on_flushed(flush.end_offset, flush.generation, self.now)
                self.process(node_id)
            else:
                src, dst, message = self._inbox.popleft()
                if dst not in self.cut:
                    self.nodes[dst].on_message(src, message, self.now)
                    self.process(dst)

    def advance(self, ms: int, step: int = 10) -> None:
        """Let `ms` of time pass in steps, ticking every node and settling."""
        end = self.now + ms
        while self.now < end:
            self.now = min(end, self.now + step)
            for node_id, node in self.nodes.items():
                if node_id not in self.cut:
                    node.on_tick(self.now)
            self.settle()

    def leader(self) -> RaftNode | None:
        leaders = [n for i, n in self.nodes.items() if n.role is Role.LEADER and i not in self.cut]
        return leaders[0] if len(leaders) == 1 else None

    def elect(self, timeout_ms: int = 10_000) -> RaftNode:
        waited = 0
        while waited < timeout_ms:
            self.advance(50)
            waited += 50
            leader = self.leader()
            if leader is not None and leader.high_watermark > 0:
                return leader
        raise AssertionError("no leader elected")
