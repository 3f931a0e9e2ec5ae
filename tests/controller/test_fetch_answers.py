"""MetadataFetch answers encoded once: the same bytes for the same question, never
a stale answer after a commit, a leadership change or a snapshot load."""

from __future__ import annotations

import asyncio

from fake_raft import FakeRaft, controller, register

from quorum.common.meta_properties import random_uuid
from quorum.controller.controller import QuorumController
from quorum.controller.fetch_answers import AnswerKey, FetchAnswers, fill_batches
from quorum.gen import broker_pb2 as bpb
from quorum.log.batch_format import decode_encoded
from quorum.raft.client_api import SnapshotReader
from quorum.raft.records import Batch, SnapshotId


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


def test_a_broker_asking_for_encoded_batches_gets_the_log_format_in_an_answer_of_its_own() -> None:
    raft = FakeRaft()
    c = controller(raft)
    epochs = {b: register(c, b) for b in (101, 102)}

    def answer(broker_id: int, encoded: bool) -> bpb.MetadataFetchResponse:
        request = bpb.MetadataFetchRequest(
            broker_id=broker_id, broker_epoch=epochs[broker_id], encoded_batches=encoded
        )
        return asyncio.run(c.metadata_fetch(request, received_ms=0))

    as_records, as_encodings = answer(101, False), answer(102, True)
    assert len(c.answers) == 2, "one shared answer per form"
    assert answer(101, True).SerializeToString() == as_encodings.SerializeToString()
    assert len(as_records.batches) == len(as_encodings.batches) > 1
    for plain, encoded in zip(as_records.batches, as_encodings.batches, strict=True):
        assert plain.encoded == b"" and not encoded.records
        batch = decode_encoded(encoded.encoded).to_batch()
        assert batch == Batch(plain.base_offset, plain.epoch, tuple(plain.records),
                              plain.append_time_ms, plain.control)  # fmt: skip
        assert (encoded.base_offset, encoded.commit_time_ms) == (
            plain.base_offset,
            plain.commit_time_ms,
        )


def test_an_answer_from_inside_a_batch_encodes_the_batch_from_there() -> None:
    committed = [Batch(0, 1, (b"a", b"b", b"c"), 5), Batch(3, 2, (b"d",), 6, control=True)]
    for encoded in (False, True):
        response = bpb.MetadataFetchResponse()
        fill_batches(response, committed, AnswerKey(1, 100, 4, 0, encoded), lambda o: 10 + o)
        assert [(b.base_offset, b.commit_time_ms) for b in response.batches] == [(1, 12), (3, 13)]
        if encoded:
            decoded = [decode_encoded(b.encoded).to_batch() for b in response.batches]
            assert decoded == [Batch(1, 1, (b"b", b"c"), 5), committed[1]]
        else:
            assert [list(b.records) for b in response.batches] == [[b"b", b"c"], [b"d"]]
    response = bpb.MetadataFetchResponse()
    fill_batches(response, committed, AnswerKey(0, 2, 4, 0, True), lambda o: 0)
    assert len(response.batches) == 1, "the record budget ends the answer after a batch"
