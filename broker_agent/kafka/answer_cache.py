"""Answers that are a function of the metadata image alone, built and encoded once.

At a coordinator failover every member of a group asks the survivors Metadata
for its topics again and again (aiokafka refreshes after each failed lookup),
and a 500-member group's answers each carry the same 500 partitions: built,
encoded and walked for error metrics per request, that was most of a broker's
CPU in the failover window (docs/benchmarks.md). Kafka's brokers answer from an
immutable image and write each answer without much cost; this cache gets the
same effect here by reusing the bytes while nothing an answer depends on moved.

What an answer depends on, hence its key: the image (its identity and applied
offset: every applied record moves the offset, so any change of brokers, topics,
partitions or ACLs starts a new generation of the cache), the request's version
and shape (the topics named, by name or id), the listener (its endpoints are the
answer's brokers), and, with an authorizer, the principal and host (what it may
describe). Only answers without a topic-level error are kept: an unknown topic
may be auto-created by the next request, a refused one says nothing worth keeping.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from quorum.controller.metadata_image import MetadataImage

MAX_ANSWERS = 256  # per image generation; a client mix asks only a few shapes


class CachedAnswer(dict[str, Any]):
    """A handler's answer kept for reuse: the values (shared by every request that
    gets it, so never mutated), and once `KafkaApis.handle` has encoded it, the
    response body's bytes and the error codes the request metrics count."""

    __slots__ = ("body", "error_codes", "response_class")

    def __init__(self, values: dict[str, Any]) -> None:
        super().__init__(values)
        self.body: bytes | None = None
        self.error_codes: tuple[int, ...] = ()
        self.response_class: Any = None


class AnswerCache:
    """Answers of one generation of the image; a new generation drops them all."""

    def __init__(self, max_answers: int = MAX_ANSWERS) -> None:
        self.max_answers = max_answers
        self._stamp: tuple[int, int] | None = None
        self._answers: dict[Hashable, CachedAnswer] = {}
        self.hits = 0  # for tests and the benches
        self.misses = 0

    def _generation(self, image: MetadataImage) -> None:
        stamp = (id(image), image.applied_offset)
        if stamp != self._stamp:
            self._stamp = stamp
            self._answers.clear()

    def get(self, image: MetadataImage, key: Hashable) -> CachedAnswer | None:
        self._generation(image)
        found = self._answers.get(key)
        if found is None:
            self.misses += 1
        else:
            self.hits += 1
        return found

    def put(self, image: MetadataImage, key: Hashable, values: dict[str, Any]) -> CachedAnswer:
        self._generation(image)
        if len(self._answers) >= self.max_answers:
            self._answers.clear()  # many shapes at once: start over rather than grow
        answer = self._answers[key] = CachedAnswer(values)
        return answer
