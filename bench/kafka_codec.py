"""Kafka protocol codec speed (kio, the library `broker_agent/kafka/codec.py` wraps).

Measures what a broker does per request on its hot paths, through the same
functions the listener calls: decoding Produce and Fetch requests, and building
plus encoding Produce and Fetch responses (`codec.build` from a plain mapping,
then `codec.encode_response`). Record payloads are opaque bytes here, as on the
broker (it stores and serves batches without re-encoding them).

Prints one JSON object per line on stdout and nothing else. Example:

    .venv/bin/python bench/kafka_codec.py --seconds 1
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kio.schema.request_header.v2.header import RequestHeader

from broker_agent.kafka import codec
from broker_agent.kafka.versions import ApiKey

PRODUCE_V, FETCH_V = 9, 12


def rate(fn: Callable[[], object], seconds: float) -> float:
    """Calls per second of `fn`, over at least `seconds`."""
    fn()
    count, started = 0, time.perf_counter()
    while True:
        for _ in range(10):
            fn()
        count += 10
        elapsed = time.perf_counter() - started
        if elapsed >= seconds:
            return count / elapsed


def header(api_key: int, version: int) -> RequestHeader:
    return RequestHeader(
        request_api_key=api_key, request_api_version=version, correlation_id=1, client_id="bench"
    )  # type: ignore[arg-type]


def produce_request(partitions: int, batch_bytes: int) -> bytes:
    cls = codec.request_class(ApiKey.PRODUCE, PRODUCE_V)
    body = codec.build(cls, {
        "acks": -1, "timeout": 30000, "transactional_id": None,
        "topic_data": [{"name": "bench", "partition_data": [
            {"index": p, "records": b"x" * batch_bytes} for p in range(partitions)]}],
    })  # fmt: skip
    return codec.encode_request(header(ApiKey.PRODUCE, PRODUCE_V), body)[4:]


def produce_response(partitions: int) -> dict[str, object]:
    return {
        "throttle_time": 0,
        "responses": [{"name": "bench", "partition_responses": [
            {"index": p, "error_code": 0, "base_offset": 1000 * p, "log_append_time": -1,
             "log_start_offset": 0, "record_errors": [], "error_message": None}
            for p in range(partitions)]}],
    }  # fmt: skip


def fetch_request(partitions: int) -> bytes:
    cls = codec.request_class(ApiKey.FETCH, FETCH_V)
    body = codec.build(cls, {
        "replica_id": -1, "max_wait": 500, "min_bytes": 1, "max_bytes": 50 << 20,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": "bench", "partitions": [
            {"partition": p, "current_leader_epoch": 3, "fetch_offset": 12345,
             "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": 1 << 20}
            for p in range(partitions)]}],
        "forgotten_topics_data": [], "rack_id": "",
    })  # fmt: skip
    return codec.encode_request(header(ApiKey.FETCH, FETCH_V), body)[4:]


def fetch_response(partitions: int, batch_bytes: int) -> dict[str, object]:
    records = b"r" * batch_bytes
    return {
        "throttle_time": 0, "error_code": 0, "session_id": 0,
        "responses": [{"topic": "bench", "partitions": [
            {"partition_index": p, "error_code": 0, "high_watermark": 99, "last_stable_offset": 99,
             "log_start_offset": 0, "aborted_transactions": None, "preferred_read_replica": -1,
             "records": records}
            for p in range(partitions)]}],
    }  # fmt: skip


def encode(cls: object, values: dict[str, object]) -> bytes:
    return codec.encode_response(1, codec.build(cls, values))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="per measurement")
    args = parser.parse_args()

    def emit(metric: str, per_s: float, frame_bytes: int, **params: object) -> None:
        print(json.dumps({"metric": metric, "value": round(per_s, 1), "unit": "ops/s",
                          "mb_per_s": round(per_s * frame_bytes / 1e6, 1),
                          "frame_bytes": frame_bytes, **params}), flush=True)  # fmt: skip

    for partitions, batch in ((1, 16 << 10), (1, 1 << 20), (100, 1 << 10)):
        frame = produce_request(partitions, batch)
        per_s = rate(
            lambda f=frame: codec.decode_request(f, ApiKey.PRODUCE, PRODUCE_V), args.seconds
        )
        emit("produce_request_decode", per_s, len(frame), version=PRODUCE_V,
             partitions=partitions, batch_bytes=batch)  # fmt: skip
    for partitions in (1, 100):
        values = produce_response(partitions)
        cls = codec.response_class(ApiKey.PRODUCE, PRODUCE_V)
        size = len(codec.encode_response(1, codec.build(cls, values)))
        per_s = rate(
            lambda v=values, c=cls: codec.encode_response(1, codec.build(c, v)), args.seconds
        )
        emit("produce_response_build_encode", per_s, size, version=PRODUCE_V,
             partitions=partitions)  # fmt: skip
    for partitions in (1, 100):
        frame = fetch_request(partitions)
        per_s = rate(lambda f=frame: codec.decode_request(f, ApiKey.FETCH, FETCH_V), args.seconds)
        emit("fetch_request_decode", per_s, len(frame), version=FETCH_V, partitions=partitions)
    for partitions, batch in ((1, 16 << 10), (1, 1 << 20), (100, 16 << 10)):
        values = fetch_response(partitions, batch)
        cls = codec.response_class(ApiKey.FETCH, FETCH_V)
        size = len(codec.encode_response(1, codec.build(cls, values)))
        per_s = rate(
            lambda v=values, c=cls: codec.encode_response(1, codec.build(c, v)), args.seconds
        )
        emit("fetch_response_build_encode", per_s, size, version=FETCH_V,
             partitions=partitions, batch_bytes=batch)  # fmt: skip


if __name__ == "__main__":
    main()
