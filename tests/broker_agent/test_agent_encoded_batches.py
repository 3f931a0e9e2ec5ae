"""The agent stores the batches the active controller encoded once (`MetadataBatch.encoded`)
as they came, and refuses an answer whose encoding fails a check before anything
is written or applied, as any malformed answer: an apply error, and the agent stops.

In process: the real agent and cache on disk; a scripted controller whose answers
are built by the controller's own `fill_batches`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from broker_agent.fetched_batches import MalformedAnswer
from broker_agent.metadata_cache import MetadataCache
from quorum.controller.fetch_answers import AnswerKey, fill_batches
from quorum.controller.image_records import config_record
from quorum.controller.record_codec import encode
from quorum.gen import admin_pb2 as api
from quorum.gen import broker_pb2 as bpb
from quorum.log.batch_format import OpaqueBatch, encode_batch
from quorum.raft.records import Batch
from snapshots.policy import SnapshotPolicy
from tests.broker_agent.scripted_agent import scripted_agent

ME = 10
Damage = Callable[[bpb.MetadataBatch], None]


def change(value: int) -> bytes:
    return encode(config_record(api.TOPIC, "orders", "retention.ms", str(value)))


COMMITTED = [
    Batch(0, 1, (change(1), change(2)), 7),
    Batch(2, 1, (change(3),), 8),
    Batch(3, 2, (change(4), change(5)), 9),
]


def answer(fetch_offset: int, encoded: bool) -> bpb.MetadataFetchResponse:
    """What the active controller answers a fetch from `fetch_offset` with."""
    response = bpb.MetadataFetchResponse(high_watermark=5)
    key = AnswerKey(fetch_offset, 100, 5, 0, encoded)
    committed = [b for b in COMMITTED if b.next_offset > fetch_offset]
    fill_batches(response, committed, key, lambda offset: 0)
    return bpb.MetadataFetchResponse.FromString(response.SerializeToString())


class ScriptedController:
    """Answers the first fetch with the first batch, the next with the rest (its first
    batch damaged by `damage`), then asks the agent to stop."""

    def __init__(self, damage: Damage | None = None) -> None:
        self.damage = damage
        self.agent: Any = None
        self.asked_encoded: list[bool] = []

    async def broker(self, method: str, request: Any, deadline_s: float) -> Any:
        return bpb.RegisterBrokerResponse(broker_epoch=0)

    async def metadata_fetch(self, request: Any, deadline_s: float) -> Any:
        await asyncio.sleep(0)
        self.asked_encoded.append(request.encoded_batches)
        if request.want_shutdown:
            return bpb.MetadataFetchResponse(should_shut_down=True, is_fenced=True)
        if request.fetch_offset >= 5:
            self.agent.request_stop()
            return bpb.MetadataFetchResponse(high_watermark=5)
        response = answer(request.fetch_offset, request.encoded_batches)
        if request.fetch_offset == 0:
            del response.batches[1:]
        elif self.damage is not None:
            self.damage(response.batches[0])
        return response

    async def close(self) -> None:
        pass


def run(tmp_path: Path, controller: ScriptedController) -> tuple[Any, Any]:
    agent, cache = scripted_agent(tmp_path, ME, controller)
    controller.agent = agent
    try:
        try:
            outcome: Any = asyncio.run(asyncio.wait_for(agent.run(), 10))
        except Exception as exc:  # what a refusal ends the agent's run with
            outcome = exc
    finally:
        cache.close()
    return agent, outcome


def reopened(tmp_path: Path) -> MetadataCache:
    return MetadataCache(tmp_path / "meta", SnapshotPolicy(1 << 30, 3_600_000), 1 << 20, 0)


def log_bytes(tmp_path: Path) -> bytes:
    (segment,) = (tmp_path / "meta" / "__cluster_metadata-0").glob("*.log")
    return segment.read_bytes()


def test_the_agent_stores_the_controllers_encoding_as_it_came(tmp_path: Path) -> None:
    controller = ScriptedController()
    agent, outcome = run(tmp_path, controller)
    assert outcome == 0
    assert controller.asked_encoded and all(controller.asked_encoded)
    assert agent.stats.records_applied == 5
    assert log_bytes(tmp_path) == b"".join(encode_batch(b) for b in COMMITTED)
    cache = reopened(tmp_path)
    try:
        assert cache.next_offset == 5 and cache.last_epoch == 2
        assert cache.image.configs[(api.TOPIC, "orders")]["retention.ms"] == "5"
        start = cache.log.start_offset  # a snapshot may have moved it
        assert cache.log.recover()[1] == [b for b in COMMITTED if b.next_offset > start]
    finally:
        cache.close()


def test_an_answer_with_records_from_an_older_controller_is_still_taken(tmp_path: Path) -> None:
    class OlderController(ScriptedController):
        async def metadata_fetch(self, request: Any, deadline_s: float) -> Any:
            request.encoded_batches = False  # a field it does not know
            return await super().metadata_fetch(request, deadline_s)

    agent, outcome = run(tmp_path, OlderController())
    assert outcome == 0 and agent.stats.records_applied == 5
    assert log_bytes(tmp_path) == b"".join(encode_batch(b) for b in COMMITTED)


def flip(at: int) -> Damage:
    def damage(batch: bpb.MetadataBatch) -> None:
        data = bytearray(batch.encoded)
        data[at] ^= 0x01
        batch.encoded = bytes(data)

    return damage


def told(**fields: object) -> Damage:
    def damage(batch: bpb.MetadataBatch) -> None:
        for name, value in fields.items():
            setattr(batch, name, value)

    return damage


def also_records(batch: bpb.MetadataBatch) -> None:
    batch.records.append(change(3))


def as_records(batch: bpb.MetadataBatch) -> None:
    """One batch of the answer as records, the next still encoded."""
    batch.records.append(change(3))
    batch.ClearField("encoded")


def opaque(batch: bpb.MetadataBatch) -> None:
    batch.encoded = encode_batch(OpaqueBatch(2, 1, (change(3),), 8, offset_count=1))


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(flip(-1), id="a payload byte"),
        pytest.param(flip(5), id="a header byte"),
        pytest.param(told(base_offset=3), id="another base offset than its header's"),
        pytest.param(told(epoch=2), id="another epoch than its header's"),
        pytest.param(told(append_time_ms=99), id="another append time than its header's"),
        pytest.param(told(control=True), id="a control flag its header lacks"),
        pytest.param(also_records, id="records beside the encoding"),
        pytest.param(as_records, id="records and encodings mixed in one answer"),
        pytest.param(opaque, id="not a metadata batch"),
    ],
)
def test_a_damaged_encoding_is_refused_and_changes_nothing(tmp_path: Path, damage: Damage) -> None:
    agent, outcome = run(tmp_path, ScriptedController(damage))
    assert isinstance(outcome, MalformedAnswer), outcome
    assert agent.stats.apply_errors == 1
    assert agent.stats.records_applied == 2  # the first answer's batch, nothing after it
    assert log_bytes(tmp_path) == encode_batch(COMMITTED[0])
    cache = reopened(tmp_path)
    try:
        assert cache.next_offset == 2
        assert cache.image.configs[(api.TOPIC, "orders")]["retention.ms"] == "2"
    finally:
        cache.close()
