"""What Python's gRPC costs here before any quorum work: round trips per second
and CPU per round trip against a server that answers at once.

The server is the `QuorumLog` service with handlers that reply without doing
anything, in its own process (as a controller is); the client is the same asyncio
client stack `bench/writes.py` uses. Each measurement runs `concurrency` callers
for `--seconds`, over unary calls and over calls kept open (one message each
way per round trip). One replicated write needs at least two such round trips in
a row (client to leader, leader to follower and back) plus a follower's fsync,
and the leader makes one with each follower per commit, so these figures bound
what `bench/writes.py` can show on the same machine.

    .venv/bin/python bench/grpc_floor.py [--seconds 3] [--concurrency 1,16,64]

Prints one JSON object per measurement on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from report import emit, process_cpu_s
from write_systems import free_port, wait_for

from quorum.common.channels import open_channel
from quorum.gen import raft_pb2 as pb
from quorum.gen import raft_pb2_grpc as pb_grpc
from quorum.rpc.servers import new_server

RECORD_BYTES = 100


class _Echo(pb_grpc.QuorumLogServicer):
    async def Write(self, request: pb.WriteRequest, context: Any) -> pb.WriteResponse:
        return pb.WriteResponse(last_offset=1)

    async def WriteStream(
        self, requests: AsyncIterator[pb.WriteRequest], context: Any
    ) -> AsyncIterator[pb.WriteResponse]:
        async for _ in requests:
            yield pb.WriteResponse(last_offset=1)


async def serve(port: int) -> None:
    server = new_server()
    pb_grpc.add_QuorumLogServicer_to_server(_Echo(), server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    await server.wait_for_termination()


async def measure(port: int, server_pid: int, kind: str, concurrency: int, seconds: float) -> None:
    channel = open_channel(f"127.0.0.1:{port}")
    stub = pb_grpc.QuorumLogStub(channel)
    request = pb.WriteRequest(cluster_id="floor", records=[b"r" * RECORD_BYTES])
    done = 0
    stop_at = 0.0

    async def caller() -> None:
        nonlocal done
        if kind == "stream":
            call = stub.WriteStream()
            while time.monotonic() < stop_at:
                await call.write(request)
                await call.read()
                done += 1
            call.cancel()
        else:
            while time.monotonic() < stop_at:
                await stub.Write(request)
                done += 1

    stop_at = time.monotonic() + 0.5  # warm-up: connections and code paths
    await asyncio.gather(*(caller() for _ in range(concurrency)))
    done = 0
    server_before, client_before = process_cpu_s(server_pid), time.process_time()
    started = time.monotonic()
    stop_at = started + seconds
    await asyncio.gather(*(caller() for _ in range(concurrency)))
    elapsed = time.monotonic() - started
    emit(
        metric="grpc_round_trips_per_s",
        kind=kind,
        concurrency=concurrency,
        value=round(done / elapsed),
        client_cpu_us=round((time.process_time() - client_before) / done * 1e6),
        server_cpu_us=round((process_cpu_s(server_pid) - server_before) / done * 1e6),
        seconds=seconds,
    )
    await channel.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--concurrency", default="1,16,64")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(serve(args.serve))
        return 0
    port = free_port()
    server = subprocess.Popen([sys.executable, __file__, "--serve", str(port)])
    try:
        wait_for(lambda: _answers(port), 30, "the echo server")
        for kind in ("stream", "unary"):
            for concurrency in (int(c) for c in args.concurrency.split(",")):
                asyncio.run(measure(port, server.pid, kind, concurrency, args.seconds))
    finally:
        server.terminate()
        server.wait(10)
    return 0


def _answers(port: int) -> bool:
    import grpc

    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = pb_grpc.QuorumLogStub(channel)
        stub.Write(pb.WriteRequest(cluster_id="floor"), timeout=0.5)
    return True


if __name__ == "__main__":
    sys.exit(main())
