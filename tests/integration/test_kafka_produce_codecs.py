"""Codecs in produced batches over the wire: a codec id Kafka does not define (5-7)
is CORRUPT_MESSAGE, zstd before Produce v7 is UNSUPPORTED_COMPRESSION_TYPE
(KIP-110), and neither appends anything; zstd from v7 on is stored."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kio.schema.errors import ErrorCode

from broker_agent.partitions.compression import ZSTD
from tests.broker_agent.partitions.partitions_cluster import make_batch, with_codec
from tests.integration.controller_cluster import Cluster, cluster_with_online_brokers, ctl_json
from tests.integration.kafka_wire import (
    latest_offset,
    leader_of,
    produce_batch,
    wait_for_topic_everywhere,
)

pytestmark = pytest.mark.slow
TOPIC = "codecs"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with cluster_with_online_brokers(tmp_path_factory.mktemp("codecs"), 101) as c:
        ctl_json(c, "topics", "create", TOPIC, "--partitions", "1", "--replication-factor", "1")
        wait_for_topic_everywhere(c, TOPIC)
        yield c


@pytest.mark.parametrize("codec", [5, 6, 7])
def test_a_codec_kafka_does_not_define_is_corrupt_message(cluster: Cluster, codec: int) -> None:
    leader, _ = leader_of(cluster, TOPIC, 0)
    before = latest_offset(cluster, TOPIC, 0)
    unknown = with_codec(make_batch(b"x"), codec, corrupt=True)
    assert produce_batch(cluster, leader, TOPIC, 0, unknown) == ErrorCode.corrupt_message
    assert latest_offset(cluster, TOPIC, 0) == before


def test_zstd_is_refused_before_produce_v7_and_stored_from_it(cluster: Cluster) -> None:
    leader, _ = leader_of(cluster, TOPIC, 0)
    before = latest_offset(cluster, TOPIC, 0)
    batch = with_codec(make_batch(b"zstd"), ZSTD)
    refused = produce_batch(cluster, leader, TOPIC, 0, batch, version=6)
    assert refused == ErrorCode.unsupported_compression_type
    assert latest_offset(cluster, TOPIC, 0) == before
    assert produce_batch(cluster, leader, TOPIC, 0, batch, version=7) == ErrorCode.none
    assert latest_offset(cluster, TOPIC, 0) == before + 1
