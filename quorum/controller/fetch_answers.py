"""MetadataFetch answers encoded once and handed to every broker that asks the same.

After a commit every caught-up broker's parked fetch wakes and asks for the same
thing: the committed batches from the same offset up to the same high watermark.
Encoding that once (batches read from the log, commit times looked up, protobuf
serialized) and reusing the bytes makes the active controller's cost per broker
the call's own, not the answer's. What differs per broker (fenced, caught up,
shut down, the wire times) is a second, small message appended to the shared
bytes: protobuf parses two concatenated encodings of one message as their merge,
and the shared part never sets the per-broker fields.

An entry is keyed by everything the shared part depends on (fetch offset, record
budget, high watermark, log start offset); the cache keeps only the newest high
watermark's answers, and is emptied when leadership changes or a snapshot is
loaded, so a stale answer cannot outlive the state that made it.
"""

from __future__ import annotations

from dataclasses import dataclass

from quorum.gen import broker_pb2 as bpb

MAX_CACHED_BYTES = 32 << 20


@dataclass(frozen=True, slots=True)
class AnswerKey:
    fetch_offset: int
    max_records: int
    high_watermark: int
    log_start_offset: int


@dataclass(slots=True)
class FetchAnswer:
    """One broker's answer: the shared encoded part, then its own fields."""

    shared: bytes
    own: bpb.MetadataFetchResponse

    def encode(self) -> bytes:
        own: bytes = self.own.SerializeToString()
        return self.shared + own

    def decode(self) -> bpb.MetadataFetchResponse:
        response: bpb.MetadataFetchResponse = bpb.MetadataFetchResponse.FromString(self.encode())
        return response


class FetchAnswers:
    """The shared parts of the current high watermark's answers, by `AnswerKey`."""

    def __init__(self, max_bytes: int = MAX_CACHED_BYTES) -> None:
        self._max_bytes = max_bytes
        self._answers: dict[AnswerKey, bytes] = {}
        self._high_watermark = -1
        self._bytes = 0
        self.encoded = 0  # answers encoded (the rest were reused), for tests and metrics

    def get(self, key: AnswerKey) -> bytes | None:
        if key.high_watermark != self._high_watermark:
            return None
        return self._answers.get(key)

    def put(self, key: AnswerKey, shared: bytes) -> None:
        self.encoded += 1
        if key.high_watermark != self._high_watermark:
            self.clear()
            self._high_watermark = key.high_watermark
        if self._bytes + len(shared) > self._max_bytes:
            self._answers.clear()
            self._bytes = 0
            if len(shared) > self._max_bytes:
                return
        self._answers[key] = shared
        self._bytes += len(shared)

    def clear(self) -> None:
        """Forget every answer (leadership changed, a snapshot was loaded)."""
        self._answers.clear()
        self._bytes = 0
        self._high_watermark = -1

    def __len__(self) -> int:
        return len(self._answers)


__all__ = ["MAX_CACHED_BYTES", "AnswerKey", "FetchAnswer", "FetchAnswers"]
