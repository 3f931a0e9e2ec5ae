"""The forwarding broker's own CPU for one CreateTopics of `--batch` topics, without the
network: the Kafka listener's `_handle` (kio decode, dispatch, the protobuf
request, the forwarder, the answer mapping, the request metrics, the compiled
writer, the frame) over a controller client that hands back a canned reply at
once. What is left of a forwarded create's broker time once this is taken out
is the event loop, gRPC and the other processes on the same cores
(`bench/admin_hops.py`).

    .venv/bin/python bench/admin_broker_cpu.py [--requests 20000 --rounds 3] [--profile]
    .venv/bin/python bench/admin_broker_cpu.py --batch 100 --requests 500

One JSON object per round: µs of process CPU per request, and the load average.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import datetime
import os
import pstats
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kio.schema.create_topics.v4.request import CreatableTopic, CreateTopicsRequest
from kio.schema.request_header.v1.header import RequestHeader
from kio.static.primitive import i16, i32
from prometheus_client import CollectorRegistry
from report import emit

from broker_agent.kafka import codec
from broker_agent.kafka.admin_handlers import install_admin_apis
from broker_agent.kafka.apis import KafkaApis
from broker_agent.kafka.authz import KafkaAuthorizer
from broker_agent.kafka.auto_create import AutoCreateConfig
from broker_agent.kafka.listener import Connection, KafkaListener
from broker_agent.kafka.metrics import KafkaRequestMetrics
from quorum.authz.authorizer import NO_AUTHORIZER
from quorum.controller.metadata_image import MetadataImage
from quorum.gen import admin_pb2 as api


class CannedController:
    """The active controller's reply to a create of these topics, at once (one
    reply built per request, as the channel's deserializer builds one)."""

    async def admin(
        self, method: str, request: Any, deadline_s: float = 30.0, metadata: Any = ()
    ) -> api.CreateTopicsResponse:
        results = [
            api.CreatableTopicResult(
                name=topic.name,
                topic_id="AAAAAAAAAAAAAAAAAAAAAA",
                num_partitions=1,
                replication_factor=1,
            )
            for topic in request.topics
        ]
        return api.CreateTopicsResponse(metadata_offset=0, topics=results)


def listener() -> KafkaListener:
    image = MetadataImage()
    apis = KafkaApis(
        101, "bench", lambda: image, None, None, KafkaAuthorizer(NO_AUTHORIZER, lambda: image)
    )
    install_admin_apis(
        apis, CannedController(), lambda: image, None, None, AutoCreateConfig(True, 1, 1)
    )
    served = KafkaListener("PLAINTEXT", "127.0.0.1", 0, apis.handle, 1 << 20)
    apis.observe = KafkaRequestMetrics(CollectorRegistry(), [served]).observe
    return served


def create_frame(batch: int) -> bytes:
    """CreateTopics v4 of `batch` topics (what librdkafka sends), without its size prefix."""
    header = RequestHeader(
        request_api_key=i16(19), request_api_version=i16(4), correlation_id=i32(7),
        client_id="rdkafka",
    )  # fmt: skip
    topics = tuple(
        CreatableTopic(
            name=f"bench-{i:05d}",
            num_partitions=i32(1),
            replication_factor=i16(1),
            assignments=(),
            configs=(),
        )
        for i in range(batch)
    )
    body = CreateTopicsRequest(
        topics=topics, timeout=datetime.timedelta(seconds=30), validate_only=False
    )
    return codec.encode_request(header, body)[4:]


async def run(requests: int, rounds: int, profile: bool, batch: int) -> None:
    served, frame = listener(), create_frame(batch)
    conn = Connection("PLAINTEXT", "127.0.0.1")
    for _ in range(max(500 // batch, 20)):
        await served._handle(frame, conn)
    for round_ in range(rounds):
        started = time.process_time()
        for _ in range(requests):
            await served._handle(frame, conn)
        per_request_us = round((time.process_time() - started) / requests * 1e6, 1)
        emit(round=round_ + 1, batch=batch, requests=requests, cpu_us_per_request=per_request_us,
             load_average=[round(x, 1) for x in os.getloadavg()])  # fmt: skip
    if profile:
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(requests):
            await served._handle(frame, conn)
        profiler.disable()
        pstats.Stats(profiler, stream=sys.stderr).sort_stats("tottime").print_stats(20)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=1, help="topics per CreateTopics")
    parser.add_argument("--profile", action="store_true", help="cProfile a further round")
    args = parser.parse_args()
    asyncio.run(run(args.requests, args.rounds, args.profile, args.batch))


if __name__ == "__main__":
    main()
