"""The client workload of the fault scenarios, recorded for the checkers.

Appenders write unique NoOp records to the log (`QuorumLog.Write`), registers
write and read one cluster config value (`log.retention.ms`) through the admin
API. Every attempt is one call to one controller at its real address (the
clients are never behind a fault; only the controllers' and brokers' links
are), with a fresh payload or value, so each record in the history is exactly
one call and its outcome: acknowledged, refused with a definite error (the
controller said it is not the leader, so it proposed nothing, or its proposal was
truncated), or in doubt (timed out, connection lost).

A register read is made linearizable the way Raft's ReadIndex is, by the client:
it commits a NoOp at controller X (the barrier), waits until X has applied past
it, then reads X's committed image. With `stale_reads_from` set, that node's
image is read with no barrier, and the registers only read: the planted bug the
checker must catch.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import grpc
from checkers import FAIL, INFO, OK, Append, RegisterOp

from quorum.common.channels import open_channel
from quorum.controller.record_codec import noop
from quorum.gen import admin_pb2 as api
from quorum.gen import admin_pb2_grpc as api_grpc
from quorum.gen import raft_pb2 as pb
from quorum.gen import raft_pb2_grpc as pb_grpc
from quorum.rpc.wire_errors import wire_error

REGISTER_KEY = "log.retention.ms"
REGISTER_INITIAL = 604800000
DEFINITE = {"NOT_LEADER_OR_FOLLOWER", "NOT_CONTROLLER", "BROKER_NOT_AVAILABLE"}


@dataclass
class Stats:
    attempted: int = 0
    acknowledged: int = 0
    failed: int = 0
    in_doubt: int = 0


@dataclass
class Workload:
    cluster_id: str
    addresses: Mapping[int, str]  # controller id -> real address
    appenders: int = 2
    registers: int = 3
    attempt_timeout_s: float = 1.0
    stale_reads_from: int | None = None
    appends: list[Append] = field(default_factory=list)
    register: list[RegisterOp] = field(default_factory=list)
    refused: list[RegisterOp] = field(default_factory=list)  # register writes refused
    _channels: dict[int, grpc.aio.Channel] = field(default_factory=dict)
    _stop: asyncio.Event = field(default_factory=asyncio.Event)

    def channel(self, node: int) -> grpc.aio.Channel:
        if node not in self._channels:
            self._channels[node] = open_channel(self.addresses[node])
        return self._channels[node]

    def next_node(self, node: int, err: grpc.aio.AioRpcError | None = None) -> int:
        """Where to try next: the hinted leader, else the next controller."""
        if err is not None:
            hinted = wire_error(err).leader_id
            if hinted in self.addresses and hinted != node:
                return hinted
        ids = sorted(self.addresses)
        return ids[(ids.index(node) + 1) % len(ids)]

    @staticmethod
    def definite(err: grpc.aio.AioRpcError) -> bool:
        error = wire_error(err).error
        return error is not None and error.name in DEFINITE

    async def run(self, duration_s: float | None = None) -> None:
        tasks = [asyncio.create_task(self._appender(c)) for c in range(self.appenders)]
        tasks += [asyncio.create_task(self._register(c)) for c in range(self.registers)]
        try:
            if duration_s is None:
                await self._stop.wait()
            else:
                await asyncio.wait_for(self._stop.wait(), duration_s)
        except TimeoutError:
            pass
        finally:
            self._stop.set()
            await asyncio.gather(*tasks, return_exceptions=True)
            for channel in self._channels.values():
                await channel.close()

    def stop(self) -> None:
        self._stop.set()

    # -------------------------------------------------------------- appenders

    async def _appender(self, client: int) -> None:
        node, seq = min(self.addresses), 0
        while not self._stop.is_set():
            seq += 1
            payload = b"w%d-%d" % (client, seq)
            request = pb.WriteRequest(cluster_id=self.cluster_id, records=[noop(payload)])
            call = time.monotonic()
            try:
                stub = pb_grpc.QuorumLogStub(self.channel(node))
                reply = await stub.Write(request, timeout=self.attempt_timeout_s)
            except grpc.aio.AioRpcError as err:
                outcome = FAIL if self.definite(err) else INFO
                self.appends.append(Append(payload, call, time.monotonic(), outcome, None, node))
                node = self.next_node(node, err)
                await asyncio.sleep(0.01)
                continue
            self.appends.append(
                Append(payload, call, time.monotonic(), OK, reply.last_offset, node)
            )

    # --------------------------------------------------------------- register

    async def _register(self, client: int) -> None:
        rng = random.Random(client)
        node, seq = min(self.addresses), 0
        while not self._stop.is_set():
            seq += 1
            try:
                if self.stale_reads_from is None and rng.random() < 0.5:
                    await self._write(client, node, REGISTER_INITIAL + client * 1_000_000 + seq)
                else:
                    await self._read(client, node)
            except grpc.aio.AioRpcError as err:
                node = self.next_node(node, err)
                await asyncio.sleep(0.01)
            except TimeoutError:
                node = self.next_node(node)

    async def _write(self, client: int, node: int, value: int) -> None:
        config = api.AlterableConfig(name=REGISTER_KEY, op=api.SET, value=str(value))
        resource = api.AlterConfigsResource(resource_type=api.CLUSTER, configs=[config])
        request = api.IncrementalAlterConfigsRequest(
            cluster_id=self.cluster_id, resources=[resource]
        )
        call = time.monotonic()
        try:
            stub = api_grpc.AdminStub(self.channel(node))
            reply = await stub.IncrementalAlterConfigs(request, timeout=self.attempt_timeout_s)
        except grpc.aio.AioRpcError as err:
            op = RegisterOp(client, "write", value, call, None, node)
            # in doubt, it may still take effect at any later time; refused, never
            (self.refused if self.definite(err) else self.register).append(op)
            raise
        if reply.resources[0].error.error_code != 0:
            raise AssertionError(f"register write refused: {reply.resources[0].error}")
        self.register.append(RegisterOp(client, "write", value, call, time.monotonic(), node))

    async def _read(self, client: int, node: int) -> None:
        call = time.monotonic()
        if self.stale_reads_from is None:
            await self._barrier(node)
        else:
            node = self.stale_reads_from
        value = await self._describe(node)
        reader = client if self.stale_reads_from is None else 100 + client
        self.register.append(RegisterOp(reader, "read", value, call, time.monotonic(), node))

    async def _barrier(self, node: int) -> None:
        """A committed NoOp at `node`, then `node` applied past it."""
        request = pb.WriteRequest(cluster_id=self.cluster_id, records=[noop(b"#barrier")])
        reply = await pb_grpc.QuorumLogStub(self.channel(node)).Write(
            request, timeout=self.attempt_timeout_s
        )
        give_up = time.monotonic() + self.attempt_timeout_s
        describe = pb.DescribeQuorumRequest(cluster_id=self.cluster_id)
        while time.monotonic() < give_up:
            view = await pb_grpc.RaftQuorumStub(self.channel(node)).DescribeQuorum(
                describe, timeout=self.attempt_timeout_s
            )
            if view.applied_offset > reply.last_offset:
                return
            await asyncio.sleep(0.002)
        raise TimeoutError(f"node {node} did not apply its barrier in time")

    async def _describe(self, node: int) -> int:
        resource = api.DescribeConfigsResource(resource_type=api.CLUSTER, names=[REGISTER_KEY])
        request = api.DescribeConfigsRequest(cluster_id=self.cluster_id, resources=[resource])
        stub = api_grpc.AdminStub(self.channel(node))
        reply = await stub.DescribeConfigs(request, timeout=self.attempt_timeout_s)
        return int(reply.resources[0].configs[0].value)

    def doubt_refusals(self, node: int, start: float, end: float) -> int:
        """Count refusals from `node` issued in [start, end] as in doubt instead:
        for a controller being stopped then (see the rolling-restart scenario)."""
        moved = 0
        for i, op in enumerate(self.appends):
            if op.outcome == FAIL and op.node == node and start <= op.call <= end:
                self.appends[i] = Append(op.payload, op.call, op.ret, INFO, None, node)
                moved += 1
        for op in [op for op in self.refused if op.node == node and start <= op.call <= end]:
            self.refused.remove(op)
            self.register.append(op)
            moved += 1
        return moved

    # ---------------------------------------------------------------- figures

    def stats(self) -> Stats:
        s = Stats(attempted=len(self.appends))
        for op in self.appends:
            if op.outcome == OK:
                s.acknowledged += 1
            elif op.outcome == FAIL:
                s.failed += 1
            else:
                s.in_doubt += 1
        return s

    def unavailable_s(self, start: float, end: float) -> float:
        """The longest stretch in [start, end] with no append acknowledged."""
        acks = sorted(op.ret for op in self.appends if op.outcome == OK and op.ret is not None)
        points = [start, *(t for t in acks if start < t < end), end]
        return max(b - a for a, b in itertools.pairwise(points))


@contextlib.asynccontextmanager
async def running(workload: Workload):  # type: ignore[no-untyped-def]
    """The workload in the background for the body of the `async with`."""
    task = asyncio.create_task(workload.run())
    try:
        yield workload
    finally:
        workload.stop()
        await task
