"""CPU of one Metadata answer for a topic of N partitions, on both sides of the wire.

* `broker_built_ms`: the broker's code building the answer from a metadata image,
  the metrics walk over its error codes, `codec.build` and kio's encode (what every
  Metadata request cost before `broker_agent/kafka/answer_cache.py`);
* `broker_cached_ms`: the same answer from the cache (the header packed onto the
  encoded body);
* `aiokafka_ms`: aiokafka decoding it (`MetadataResponse_v5`, the version aiokafka
  0.14 asks) and applying it to a `ClusterMetadata`, as each member does after
  every metadata refresh.

At a coordinator failover each group member refreshes the metadata of its topic
again and again until the dead broker is fenced, so these three figures say who
pays for the retry storm (docs/benchmarks.md).

    .venv/bin/python bench/metadata_answer.py [--partitions 500]

Best of 5 rounds of 50, CPU time of this process; one JSON object on stdout.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from aiokafka.cluster import ClusterMetadata
from aiokafka.protocol.metadata import MetadataResponse_v5
from report import emit

from broker_agent.kafka import codec
from broker_agent.kafka.metadata_answer import metadata_response
from broker_agent.kafka.metrics import error_codes
from broker_agent.kafka.versions import ApiKey
from quorum.controller.metadata_image import MetadataImage
from quorum.gen import metadata_pb2 as md

TOPIC = "bench-metadata"
TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAQ"
BROKERS = (101, 102, 103)
VERSION = 5


def image(partitions: int) -> MetadataImage:
    """Three live brokers and one topic of `partitions` partitions, RF 3."""
    img = MetadataImage()
    records = []
    for b in BROKERS:
        endpoint = md.BrokerEndpoint(
            name="PLAINTEXT", host="127.0.0.1", port=9000 + b, security_protocol="PLAINTEXT"
        )
        records.append(
            md.MetadataRecord(
                register_broker=md.RegisterBrokerRecord(
                    broker_id=b, broker_epoch=1, incarnation_id=f"i{b}", endpoints=[endpoint]
                )
            )
        )
        records.append(
            md.MetadataRecord(unfence_broker=md.UnfenceBrokerRecord(broker_id=b, broker_epoch=1))
        )
    records.append(md.MetadataRecord(topic=md.TopicRecord(name=TOPIC, topic_id=TOPIC_ID)))
    for p in range(partitions):
        replicas = [BROKERS[(p + i) % 3] for i in range(3)]
        records.append(
            md.MetadataRecord(
                partition=md.PartitionRecord(
                    partition_id=p,
                    topic_id=TOPIC_ID,
                    replicas=replicas,
                    isr=replicas,
                    leader=replicas[0],
                    leader_epoch=1,
                    partition_epoch=1,
                )
            )
        )
    for offset, record in enumerate(records):
        img.apply_record(record, offset)
    return img


def best_ms(step: Callable[[], object], rounds: int = 5, each: int = 50) -> float:
    times = []
    for _ in range(rounds):
        started = time.process_time()
        for _ in range(each):
            step()
        times.append((time.process_time() - started) / each)
    return min(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=500)
    args = parser.parse_args()
    img = image(args.partitions)
    request = codec.build(
        codec.request_class(ApiKey.METADATA, VERSION),
        {
            "topics": [{"name": TOPIC, "topic_id": None}],
            "allow_auto_topic_creation": True,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False,
        },
    )
    response_class = codec.response_class(ApiKey.METADATA, VERSION)

    def built() -> bytes:
        values = metadata_response(img, BROKERS[0], "c", "PLAINTEXT", request, VERSION)
        list(error_codes(values))
        return codec.encode_response(1, codec.build(response_class, values))

    body = codec.encode_body(
        codec.build(
            response_class,
            metadata_response(img, BROKERS[0], "c", "PLAINTEXT", request, VERSION),
        )
    )
    cached = codec.Encoded(response_class, body)
    assert codec.encode_response(1, cached) == built()

    def digested() -> None:
        ClusterMetadata().update_metadata(MetadataResponse_v5.decode(io.BytesIO(body)))

    emit(
        measurement="metadata_answer_cpu",
        partitions=args.partitions,
        version=VERSION,
        bytes=len(body),
        broker_built_ms=round(best_ms(built), 3),
        broker_cached_ms=round(best_ms(lambda: codec.encode_response(1, cached)), 4),
        aiokafka_ms=round(best_ms(digested), 3),
        load_average=round(os.getloadavg()[0], 1),
    )


if __name__ == "__main__":
    main()
