"""A replication floor: the quorum's write path with no consensus logic at all.

One fixed leader and two followers, run as the member processes of the "floor"
system in `bench/writes.py`. They move writes exactly as the controllers do,
over the same services, messages and client:

- a client's write arrives on `QuorumLog.WriteStream` and is answered once it
  is on disk on a majority;
- waiting writes become one batch, sealed only while no batch is uncommitted
  (or when a batch is full), the controllers' group-commit rule;
- each follower keeps one `RaftQuorum.FetchStream` call to the leader, which
  holds its fetch until there is something new; the follower appends, fdatasyncs
  and fetches again, and that next fetch is its acknowledgement;
- the leader writes the batch, answers the held fetches, then fdatasyncs.

Everything else a controller does is left out: elections, epochs, request
validation, the batch format and its CRC, the log's index and segments, the
metadata image, metrics, snapshots. So what `bench/writes.py` measures against
this system is the most the message pattern allows in Python's gRPC on this
machine, and the gap to the `quorum` line is what the Raft and product logic
cost.

    python bench/replication_floor.py leader PORT LOGFILE
    python bench/replication_floor.py follower LEADER_PORT LOGFILE REPLICA_ID
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from collections import deque
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from quorum.common.channels import open_channel
from quorum.gen import raft_pb2 as pb
from quorum.gen import raft_pb2_grpc as pb_grpc
from quorum.rpc.servers import new_server

MAX_BATCH_WRITES = 64
FETCH_HOLD_S = 0.5


def framed(batch: pb.RecordBatch) -> bytes:
    """A batch as it goes to the log file: a 4-byte length, then the batch."""
    data = batch.SerializeToString()
    return len(data).to_bytes(4, "big") + data


class FloorLeader(pb_grpc.QuorumLogServicer, pb_grpc.RaftQuorumServicer):
    """Group commit over two pull-based followers; offsets count records."""

    def __init__(self, log_path: str) -> None:
        self._fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._loop = asyncio.get_running_loop()
        self._end = 0  # records appended
        self._durable = 0  # records fdatasync'd here
        self._high_watermark = 0
        self._acked: dict[int, int] = {}  # follower -> records it has on disk
        self._batches: dict[int, pb.RecordBatch] = {}  # by base offset
        self._waiting: list[tuple[list[bytes], asyncio.Future[int]]] = []
        self._in_flight: deque[tuple[int, asyncio.Future[int]]] = deque()
        self._held: dict[int, asyncio.Future[None]] = {}
        self._seal_scheduled = False

    async def WriteStream(
        self, requests: AsyncIterator[pb.WriteRequest], context: Any
    ) -> AsyncIterator[pb.WriteResponse]:
        async for request in requests:
            committed: asyncio.Future[int] = self._loop.create_future()
            self._waiting.append((list(request.records), committed))
            self._schedule_seal()
            last = await committed
            yield pb.WriteResponse(epoch=1, last_offset=last, leader_id=1)

    def _schedule_seal(self) -> None:
        if not self._seal_scheduled:
            self._seal_scheduled = True
            self._loop.call_soon(self._seal)

    def _seal(self) -> None:
        self._seal_scheduled = False
        uncommitted = self._high_watermark < self._end
        if not self._waiting or (uncommitted and len(self._waiting) < MAX_BATCH_WRITES):
            return
        base, records = self._end, []
        for write, committed in self._waiting:
            records.extend(write)
            self._in_flight.append((base + len(records) - 1, committed))
        self._waiting = []
        batch = pb.RecordBatch(
            base_offset=base,
            leader_epoch=1,
            records=records,
            append_time_ms=int(time.time() * 1000),
        )
        self._batches[base] = batch
        self._end = base + len(records)
        os.write(self._fd, framed(batch))
        for held in self._held.values():
            if not held.done():
                held.set_result(None)
        self._loop.call_soon(self._flush)  # after the held answers leave

    def _flush(self) -> None:
        end = self._end
        os.fdatasync(self._fd)
        self._durable = end
        self._advance()

    def _advance(self) -> None:
        # on disk on two of the three members: the second highest of the three
        on_disk = sorted([self._durable, *self._acked.values()], reverse=True)
        high_watermark = on_disk[1] if len(on_disk) > 1 else 0
        if high_watermark <= self._high_watermark:
            return
        self._high_watermark = high_watermark
        while self._in_flight and self._in_flight[0][0] < high_watermark:
            last, committed = self._in_flight.popleft()
            committed.set_result(last)
        if self._waiting:
            self._schedule_seal()

    async def FetchStream(
        self, requests: AsyncIterator[pb.FetchRequest], context: Any
    ) -> AsyncIterator[pb.FetchResponse]:
        async for request in requests:
            self._acked[request.replica_id] = request.fetch_offset
            self._advance()
            if self._end <= request.fetch_offset:
                held: asyncio.Future[None] = self._loop.create_future()
                self._held[request.replica_id] = held
                with contextlib.suppress(TimeoutError):  # answer empty, as Fetch does
                    await asyncio.wait_for(held, FETCH_HOLD_S)
                self._held.pop(request.replica_id, None)
            batches, offset = [], request.fetch_offset
            while offset < self._end:
                batch = self._batches[offset]
                batches.append(batch)
                offset = batch.base_offset + len(batch.records)
            yield pb.FetchResponse(
                epoch=1, leader_id=1, high_watermark=self._high_watermark, batches=batches
            )


async def follow(replica_id: int, leader_address: str, log_path: str) -> None:
    """Fetch, append, fdatasync, fetch again: the next fetch is the acknowledgement."""
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    end = 0
    while True:
        channel = open_channel(leader_address)
        call = pb_grpc.RaftQuorumStub(channel).FetchStream()
        try:
            while True:
                await call.write(pb.FetchRequest(replica_id=replica_id, epoch=1, fetch_offset=end))
                response = await call.read()
                for batch in response.batches:
                    os.write(fd, framed(batch))
                    end = batch.base_offset + len(batch.records)
                if response.batches:
                    os.fdatasync(fd)
        except Exception:  # the leader is not up yet, or went away: connect again
            call.cancel()
            await channel.close()
            await asyncio.sleep(0.1)


async def lead(port: int, log_path: str) -> None:
    server = new_server()
    leader = FloorLeader(log_path)
    pb_grpc.add_QuorumLogServicer_to_server(leader, server)
    pb_grpc.add_RaftQuorumServicer_to_server(leader, server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    await server.wait_for_termination()


def main() -> int:
    role, port, log_path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    if role == "leader":
        asyncio.run(lead(port, log_path))
    else:
        asyncio.run(follow(int(sys.argv[4]), f"127.0.0.1:{port}", log_path))
    return 0


if __name__ == "__main__":
    sys.exit(main())
