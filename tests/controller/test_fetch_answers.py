"""MetadataFetch answers encoded once: the same bytes for the same question, never
a stale answer after a commit, a leadership change or a snapshot load."""

from __future__ import annotations

import asyncio

from fake_raft import FakeRaft, controller, register

from quorum.common.meta_properties import random_uuid
from quorum.controller.controller import QuorumController
from quorum.controller.fetch_answers import AnswerKey, FetchAnswers
from quorum.gen import broker_pb2 as bpb
from quorum.raft.client_api import SnapshotReader
from quorum.raft.records import SnapshotId


def key(fetch_offset: int = 0, high_watermark: int = 5, max_records: int = 100) -> AnswerKey:
    return AnswerKey(fetch_offset, max_records, high_watermark, 0)


def test_the_same_question_gets_the_same_bytes_and_others_get_their_own() -> None:
    answers = FetchAnswers()
    answers.put(key(0), b"from 0")
    answers.put(key(3), b"from 3")
    assert answers.get(key(0)) == b"from 0"
    assert answers.get(key(3)) == b"from 3"
    assert answers.get(key(0, max_records=1)) is None
    assert answers.get(key(1)) is None


def test_a_new_high_watermark_drops_the_older_answers() -> None:
    answers = FetchAnswers()
    answers.put(key(0, high_watermark=5), b"up to 5")
    assert answers.get(key(0, high_watermark=6)) is None
    answers.put(key(0, high_watermark=6), b"up to 6")
    assert answers.get(key(0, high_watermark=5)) is None
    assert len(answers) == 1


def test_the_cache_stays_within_its_bytes() -> None:
    answers = FetchAnswers(max_bytes=10)
    answers.put(key(0), b"123456")
    answers.put(key(1), b"123456")
    assert answers.get(key(0)) is None
    assert answers.get(key(1)) == b"123456"
    answers.put(key(2), b"x" * 11)  # larger than the whole cache: not kept
    assert answers.get(key(2)) is None


def fetch(c: QuorumController, broker_id: int, epoch: int, offset: int) -> bytes:
    request = bpb.MetadataFetchRequest(
        broker_id=broker_id, broker_epoch=epoch, fetch_offset=offset, current_state=bpb.FENCED
    )
    return asyncio.run(c.metadata_fetch_answer(request, received_ms=7)).shared


def test_brokers_asking_the_same_share_one_encoding_and_keep_their_own_fields() -> None:
    raft = FakeRaft()
    c = controller(raft)
    epochs = {b: register(c, b) for b in (101, 102)}
    high_watermark = raft.high_watermark
    first = fetch(c, 101, epochs[101], 0)
    encoded = c.answers.encoded
    second = fetch(c, 102, epochs[102], 0)
    assert second is first, "one encoding handed to both"
    assert c.answers.encoded == encoded
    request = bpb.MetadataFetchRequest(broker_id=102, broker_epoch=epochs[102], fetch_offset=0)
    whole = asyncio.run(c.metadata_fetch(request, received_ms=9))
    assert whole.high_watermark == raft.high_watermark
    assert whole.controller_receive_time_ms == 9
    assert whole.controller_id == 1
    assert sum(len(b.records) for b in whole.batches) == high_watermark
    assert fetch(c, 101, epochs[101], 1) != first, "another range, another answer"


def test_a_commit_makes_the_next_answer_new() -> None:
    raft = FakeRaft()
    c = controller(raft)
    epoch = register(c, 101)
    before = bpb.MetadataFetchResponse.FromString(fetch(c, 101, epoch, 0))
    register(c, 102)  # a commit: the high watermark moves
    after = bpb.MetadataFetchResponse.FromString(fetch(c, 101, epoch, 0))
    assert after.high_watermark == raft.high_watermark > before.high_watermark
    assert sum(len(b.records) for b in after.batches) == raft.high_watermark


def test_a_parked_fetch_is_answered_with_the_commit_that_woke_it() -> None:
    raft = FakeRaft()
    c = controller(raft)
    epoch = register(c, 101)

    def caught_up() -> bpb.MetadataFetchRequest:
        return bpb.MetadataFetchRequest(
            broker_id=101, broker_epoch=epoch, fetch_offset=raft.high_watermark, max_wait_ms=30_000
        )

    async def scenario() -> bpb.MetadataFetchResponse:
        await c.metadata_fetch(caught_up(), received_ms=0)  # unfenced: a write
        request = caught_up()
        offset = request.fetch_offset
        c.answers.put(AnswerKey(offset, 20_000, offset, 0), b"stale")
        parked = asyncio.ensure_future(c.metadata_fetch(request, received_ms=0))
        await asyncio.sleep(0.05)
        assert not parked.done()
        await c.register_broker(
            bpb.RegisterBrokerRequest(broker_id=102, incarnation_id=random_uuid())
        )
        return await asyncio.wait_for(parked, 5)

    answer = asyncio.run(scenario())
    assert answer.high_watermark == raft.high_watermark
    assert [len(b.records) for b in answer.batches] == [1]


def test_a_leadership_change_and_a_snapshot_load_forget_every_answer() -> None:
    raft = FakeRaft()
    c = controller(raft)
    epoch = register(c, 101)
    fetch(c, 101, epoch, 0)
    assert len(c.answers) == 1
    c.handle_leader_change(raft.leader_and_epoch())
    assert len(c.answers) == 0
    fetch(c, 101, epoch, 0)
    assert len(c.answers) == 1
    c.handle_load_snapshot(SnapshotReader(SnapshotId(raft.high_watermark, 1), []))
    assert len(c.answers) == 0
