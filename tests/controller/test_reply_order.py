"""At a commit, the active controller resumes the write that committed before the
brokers' parked MetadataFetch calls the same commit wakes: the write's reply
leaves first, so a broker that forwarded the write reads its reply before it
applies the same records (docs/benchmarks.md, "Admin forwarding, sixth pass").
Nothing is acknowledged earlier than before: the write still answers only once
committed and applied to the image, and every fetch still gets the new records."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from fake_raft import FakeRaft, controller

from quorum.common.meta_properties import random_uuid
from quorum.gen import admin_pb2 as api
from quorum.gen import broker_pb2 as bpb
from quorum.raft.config import ProposeResult
from quorum.raft.records import Batch


class CommitOnCue(FakeRaft):
    """Holds proposals while `held` until `commit()`, which does what the driver
    does at a commit (`quorum/server/driver.py`, `_on_committed`): resolve the
    proposals' futures, then hand the batches to the listeners."""

    def __init__(self) -> None:
        super().__init__()
        self.held = False
        self._committed = 0
        self._waiting: list[tuple[asyncio.Future[ProposeResult], ProposeResult]] = []

    @property
    def high_watermark(self) -> int:
        return self._committed

    def read_committed(self, offset: int, max_records: int) -> Sequence[Batch]:
        return [b for b in self.batches if offset < b.next_offset <= self._committed]

    async def propose(self, records: list[bytes]) -> ProposeResult:
        base = self.log_end_offset
        self.batches.append(Batch(base, 1, tuple(records), 1000))
        result = ProposeResult(1, base, base + len(records) - 1)
        if not self.held:
            self.commit()
            return result
        future: asyncio.Future[ProposeResult] = asyncio.get_running_loop().create_future()
        self._waiting.append((future, result))
        return await future

    def commit(self) -> None:
        new = [b for b in self.batches if b.base_offset >= self._committed]
        self._committed = self.log_end_offset
        waiting, self._waiting = self._waiting, []
        for future, result in waiting:
            future.set_result(result)
        for listener in self.listeners:
            listener.handle_commit(new)


def test_the_write_that_committed_answers_before_the_fetches_its_commit_wakes() -> None:
    async def scenario() -> None:
        raft = CommitOnCue()
        c = controller(raft)
        epochs = {}
        for broker_id in (101, 102, 103):
            registered = await c.register_broker(
                bpb.RegisterBrokerRequest(broker_id=broker_id, incarnation_id=random_uuid())
            )
            epochs[broker_id] = registered.broker_epoch
        done: list[str] = []

        async def fetch(broker_id: int, wait_ms: int = 5_000) -> bpb.MetadataFetchResponse:
            request = bpb.MetadataFetchRequest(
                broker_id=broker_id,
                broker_epoch=epochs[broker_id],
                fetch_offset=raft.high_watermark,
                current_state=bpb.FENCED,
                max_wait_ms=wait_ms,
            )
            answer = await c.metadata_fetch(request, received_ms=1)
            if wait_ms:
                done.append(f"fetch {broker_id}")
            return answer

        for _ in range(3):  # the brokers caught up and unfenced: their heartbeats write no more
            for broker_id in (101, 102, 103):
                await fetch(broker_id, wait_ms=0)

        async def create() -> api.CreateTopicsResponse:
            topic = api.CreatableTopic(name="orders", num_partitions=1, replication_factor=1)
            reply = await c.create_topics(api.CreateTopicsRequest(topics=[topic]))
            done.append("create")
            return reply

        committed = raft.high_watermark
        fetches = [asyncio.ensure_future(fetch(b)) for b in (101, 102, 103)]
        for _ in range(5):
            await asyncio.sleep(0)  # every fetch parked on the commit clock
        raft.held = True
        creating = asyncio.ensure_future(create())
        for _ in range(5):
            await asyncio.sleep(0)  # the write proposed, waiting for its commit
        assert not creating.done() and not any(f.done() for f in fetches)
        assert c.image.topic("orders") is None

        raft.commit()
        reply = await creating
        answers = await asyncio.gather(*fetches)

        assert done[0] == "create", done
        assert sorted(done[1:]) == ["fetch 101", "fetch 102", "fetch 103"]
        assert reply.topics[0].error.error_code == 0
        assert reply.metadata_offset == raft.high_watermark > committed
        assert c.image.topic("orders") is not None
        for answer in answers:
            assert answer.high_watermark == raft.high_watermark
            assert sum(len(b.records) for b in answer.batches) == raft.high_watermark - committed

    asyncio.run(asyncio.wait_for(scenario(), timeout=10))
