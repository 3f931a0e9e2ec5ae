"""The active controller's write path (WriteQueue in quorum/controller/write_queue.py)
on an asyncio loop, with a fake Raft behind its propose seam.

The fake commits a proposal when the test lets it and then applies its records to
the image, as the Raft listener would, so a test sees what the queue promises:
one proposal per write, writes validated one at a time against the image the
previous write left, and no write accepted by a node that is not the active
controller.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest
from image_scenario import Scenario, error_of

from quorum.controller.api_errors import ApiError, ControllerError
from quorum.controller.metadata_image import MetadataImage
from quorum.controller.record_codec import decode, encode, record_type, wrap
from quorum.controller.topic_ops import (
    SLICE_PARTITIONS,
    Records,
    build_create_topics,
    create_topics_in_slices,
)
from quorum.controller.write_queue import PREPARE_CHUNK, NotController, WriteQueue
from quorum.gen import admin_pb2 as api
from quorum.gen import metadata_pb2 as md

T = TypeVar("T")
NODE = 1


class ProposalFailed(Exception):
    pass


class FakeRaft:
    """Proposals wait for `release` (when `held`), then commit and are applied."""

    def __init__(self, image: MetadataImage) -> None:
        self.image = image
        self.proposals: list[list[bytes]] = []
        self.ready = True
        self.leader: int | None = NODE
        self.held = False
        self.fail_next = False
        self._gate = asyncio.Event()

    async def propose(self, data: list[bytes]) -> int:
        self.proposals.append(data)
        if self.held:
            await self._gate.wait()
            self._gate.clear()
        if self.fail_next:
            self.fail_next = False
            raise ProposalFailed("not the leader any more")
        for record in data:
            self.image.apply(self.image.applied_offset, record)
        return self.image.applied_offset

    def release(self) -> None:
        self._gate.set()


def queue_over(raft: FakeRaft) -> WriteQueue:
    return WriteQueue(raft.image, NODE, raft.propose, lambda: raft.ready, lambda: raft.leader)


def run(test: Callable[[Scenario, FakeRaft, WriteQueue], Awaitable[T]]) -> T:
    """Run one scenario on a fresh loop (each test on its own, no plugin needed)."""

    async def main() -> T:
        s = Scenario()
        s.brokers(1, 2, 3)
        raft = FakeRaft(s.image)
        return await asyncio.wait_for(test(s, raft, queue_over(raft)), timeout=5)

    return asyncio.run(main())


def create_topic(
    s: Scenario, name: str, partitions: int = 3
) -> Callable[[], tuple[Records, api.CreateTopicsResponse]]:
    """A CreateTopics build, as the servicer hands it to the queue."""
    request = api.CreateTopicsRequest(
        topics=[api.CreatableTopic(name=name, num_partitions=partitions, replication_factor=2)]
    )
    return lambda: build_create_topics(s.image, request, s.rng)


def noop_build(count: int) -> Callable[[], tuple[Records, int]]:
    return lambda: ([wrap(no_op=md.NoOpRecord(payload=b"%d" % i)) for i in range(count)], count)


# ----------------------------------------------------------------- writes


def test_a_write_is_one_proposal_committed_and_applied_before_the_reply() -> None:
    async def scenario(s: Scenario, raft: FakeRaft, queue: WriteQueue) -> None:
        response = await queue.submit(create_topic(s, "orders", partitions=3))
        assert error_of(response.topics[0]) is ApiError.NONE
        assert len(raft.proposals) == 1
        assert [record_type(decode(r, -1)) for r in raft.proposals[0]] == ["topic"] + [
            "partition"
        ] * 3
        assert len(s.topic_image("orders").partitions) == 3

    run(scenario)


def test_a_write_with_nothing_to_record_proposes_nothing() -> None:
    async def scenario(s: Scenario, raft: FakeRaft, queue: WriteQueue) -> None:
        assert await queue.submit(lambda: ([], "answer")) == "answer"
        assert raft.proposals == []

    run(scenario)


def test_the_next_write_is_validated_only_after_the_previous_one_applied() -> None:
    """Two creates of one name in flight: the second sees the first's topic."""

    async def scenario(s: Scenario, raft: FakeRaft, queue: WriteQueue) -> None:
        raft.held = True
        built: list[str] = []

        def tracing(name: str, build: Callable[[], T]) -> Callable[[], T]:
            def traced() -> T:
                built.append(name)
                return build()

            return traced

        first = asyncio.ensure_future(queue.submit(tracing("first", create_topic(s, "orders"))))
        second = asyncio.ensure_future(queue.submit(tracing("second", create_topic(s, "orders"))))
        for _ in range(5):
            await asyncio.sleep(0)
        assert built == ["first"] and len(raft.proposals) == 1  # the second waits its turn
        raft.release()
        assert error_of((await first).topics[0]) is ApiError.NONE
        assert error_of((await second).topics[0]) is ApiError.TOPIC_ALREADY_EXISTS
        assert built == ["first", "second"] and len(raft.proposals) == 1

    run(scenario)


def test_a_refused_build_proposes_nothing_and_the_queue_moves_on() -> None:
    async def scenario(s: Scenario, raft: FakeRaft, queue: WriteQueue) -> None:
        def refuse() -> tuple[Records, None]:
            raise ControllerError(ApiError.POLICY_VIOLATION, "too many")

        with pytest.raises(ControllerError):
            await queue.submit(refuse)
        assert raft.proposals == []
        assert await queue.submit(noop_build(2)) == 2
        assert len(raft.proposals) == 1

    run(scenario)


def test_a_failed_proposal_fails_its_write_applies_nothing_and_frees_the_queue() -> None:
    async def scenario(s: Scenario, raft: FakeRaft, queue: WriteQueue) -> None:
        raft.fail_next = True
        before = s.image.digest()
        with pytest.raises(ProposalFailed):
            await queue.submit(create_topic(s, "orders"))
        assert s.image.digest() == before and s.image.topic("orders") is None
        response = await queue.submit(create_topic(s, "orders"))
        assert error_of(response.topics[0]) is ApiError.NONE
        assert len(s.topic_image("orders").partitions) == 3

    run(scenario)


def test_a_large_write_is_still_one_proposal_and_applies_as_if_decoded() -> None:
    """Past PREPARE_CHUNK records the image prepares in chunks while the proposal
    replicates; what it applies must equal applying the plain bytes."""

    async def scenario(s: Scenario, raft: FakeRaft, queue: WriteQueue) -> None:
        raft.held = True
        count = 2 * PREPARE_CHUNK + 500
        write = asyncio.ensure_future(queue.submit(create_topic(s, "big", partitions=count)))
        for _ in range(10):  # let every prepare chunk run while the proposal is held
            await asyncio.sleep(0)
        raft.release()
        await write
        assert len(raft.proposals) == 1 and len(raft.proposals[0]) == 1 + count
        assert s.image.partition_count == count

        replay = Scenario()  # the same brokers, then the proposal's plain bytes
        replay.brokers(1, 2, 3)
        for record in raft.proposals[0]:
            replay.image.apply(replay.image.applied_offset, record)
        assert replay.image.digest() == s.image.digest()

    run(scenario)


# ---------------------------------------------------------- active or not


def test_a_follower_refuses_at_once_and_names_the_leader() -> None:
    async def scenario(s: Scenario, raft: FakeRaft, queue: WriteQueue) -> None:
        raft.ready, raft.leader = False, 2
        built: list[str] = []

        def build() -> tuple[Records, None]:
            built.append("built")
            return [], None

        with pytest.raises(NotController) as caught:
            await queue.submit(build)
        assert caught.value.leader_id == 2
        assert built == [] and raft.proposals == []

    run(scenario)


def test_without_a_known_leader_a_write_is_refused_with_no_hint() -> None:
    async def scenario(s: Scenario, raft: FakeRaft, queue: WriteQueue) -> None:
        raft.ready, raft.leader = False, None
        with pytest.raises(NotController) as caught:
            await queue.submit(noop_build(1))
        assert caught.value.leader_id is None and raft.proposals == []

    run(scenario)


def test_a_new_leader_waits_for_its_epoch_to_commit_then_writes() -> None:
    async def scenario(s: Scenario, raft: FakeRaft, queue: WriteQueue) -> None:
        raft.ready = False
        # the Raft listener tells the queue when the epoch commits
        asyncio.get_running_loop().call_later(
            0.03, lambda: (setattr(raft, "ready", True), queue.notify())
        )
        assert not queue.active
        assert await queue.submit(noop_build(1), wait_ready_s=2.0) == 1
        assert queue.active and len(raft.proposals) == 1

    run(scenario)


def test_a_leader_that_never_becomes_ready_gives_up_after_the_wait() -> None:
    async def scenario(s: Scenario, raft: FakeRaft, queue: WriteQueue) -> None:
        raft.ready = False
        started = time.monotonic()
        with pytest.raises(NotController) as caught:
            await queue.submit(noop_build(1), wait_ready_s=0.05)
        assert 0.05 <= time.monotonic() - started < 1.0
        assert caught.value.leader_id is None  # itself: no other node to point at
        assert raft.proposals == []

    run(scenario)


# ------------------------------------------------------------------ timing


def test_observers_see_the_time_queued_and_the_time_processing() -> None:
    async def scenario(s: Scenario, raft: FakeRaft, queue: WriteQueue) -> None:
        timings: list[tuple[float, float]] = []
        queue.on_timing.append(lambda queued, processing: timings.append((queued, processing)))
        raft.held = True
        first = asyncio.ensure_future(queue.submit(noop_build(1)))
        second = asyncio.ensure_future(queue.submit(noop_build(1)))
        await asyncio.sleep(0.05)
        raft.release()
        await first
        await asyncio.sleep(0.02)
        raft.release()
        await second
        (q1, p1), (q2, p2) = timings
        assert q1 < 0.04 and p1 >= 0.04  # the first waited on its commit
        assert q2 >= 0.04 and p2 >= 0.015  # the second waited on the first, then its own

    run(scenario)


def test_records_reach_raft_encoded_as_on_the_log() -> None:
    async def scenario(s: Scenario, raft: FakeRaft, queue: WriteQueue) -> None:
        records = [wrap(no_op=md.NoOpRecord(payload=b"x"))]
        await queue.submit(lambda: (records, None))
        assert raft.proposals == [[encode(records[0])]]

    run(scenario)


def test_topic_ids_come_from_the_builders_rng_not_the_queue() -> None:
    """The queue adds nothing of its own to a write (same seed, same records)."""
    proposals = []
    for _ in range(2):

        async def scenario(s: Scenario, raft: FakeRaft, queue: WriteQueue) -> None:
            s.rng = random.Random(11)
            await queue.submit(create_topic(s, "orders"))
            proposals.append(raft.proposals[0])

        run(scenario)
    assert proposals[0] == proposals[1]


# ------------------------------------------------------- sliced builds


def sliced_create(s: Scenario, topics: int) -> Callable[[], object]:
    """The controller's CreateTopics build: a generator that pauses between slices."""
    request = api.CreateTopicsRequest(
        topics=[
            api.CreatableTopic(name=f"t{i}", num_partitions=SLICE_PARTITIONS, replication_factor=2)
            for i in range(topics)
        ]
    )
    return lambda: create_topics_in_slices(s.image, request, s.rng)


def test_a_sliced_build_lets_the_loop_serve_others_and_still_proposes_once() -> None:
    """A create of 3 x SLICE_PARTITIONS partitions pauses while it is built and
    encoded; a task scheduled meanwhile runs before the proposal, and the write
    is still one proposal, the same records an unpaused build makes."""

    async def scenario(s: Scenario, raft: FakeRaft, queue: WriteQueue) -> None:
        ticks: list[int] = []

        async def other() -> None:
            for _ in range(50):
                ticks.append(len(raft.proposals))
                await asyncio.sleep(0)

        ticker = asyncio.ensure_future(other())
        response = await queue.submit(sliced_create(s, 3))
        await ticker
        assert 0 in ticks  # served while the write was being built
        assert len(raft.proposals) == 1
        assert len(raft.proposals[0]) == 3 * (1 + SLICE_PARTITIONS)
        assert [error_of(t) for t in response.topics] == [ApiError.NONE] * 3
        assert len(s.topic_image("t2").partitions) == SLICE_PARTITIONS

    run(scenario)


def test_a_leadership_change_during_a_sliced_build_drops_the_write_whole() -> None:
    """Another leader may write while the build pauses, so the build's image is
    stale: nothing is proposed and the caller hears NOT_CONTROLLER."""

    async def scenario(s: Scenario, raft: FakeRaft, queue: WriteQueue) -> None:
        async def depose() -> None:
            await asyncio.sleep(0)
            raft.leader = 2

        deposing = asyncio.ensure_future(depose())
        with pytest.raises(NotController) as caught:
            await queue.submit(sliced_create(s, 3))
        await deposing
        assert caught.value.leader_id == 2
        assert raft.proposals == []
        assert s.image.topic("t0") is None

    run(scenario)


def test_an_epoch_change_during_a_sliced_build_drops_the_write_whole() -> None:
    """This node deposed and elected again between two slices: same leader,
    new epoch; the write is dropped all the same."""

    async def scenario(s: Scenario, raft: FakeRaft, _: WriteQueue) -> None:
        epoch = [1]
        queue = WriteQueue(
            raft.image,
            NODE,
            raft.propose,
            lambda: raft.ready,
            lambda: raft.leader,
            lambda: epoch[0],
        )

        async def reelect() -> None:
            await asyncio.sleep(0)
            epoch[0] = 2

        reelecting = asyncio.ensure_future(reelect())
        with pytest.raises(NotController):
            await queue.submit(sliced_create(s, 3))
        await reelecting
        assert raft.proposals == []

    run(scenario)
