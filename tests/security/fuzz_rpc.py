"""What the fuzz tests share: hypothesis-generated requests for every RPC of a
service (hostile values in every field, or random bytes), one call of any kind
(unary, client or server stream) answered by a status name, the controllers'
state to compare before and after a batch, and the tally the figures come from.

Budget: `FUZZ_REQUESTS` per service (default 5,000) in batches of `BATCH`.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import grpc
from google.protobuf.descriptor import MethodDescriptor, ServiceDescriptor
from grpc_health.v1 import health_pb2
from grpc_reflection.v1alpha import reflection_pb2
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st

from quorum.gen import admin_pb2 as api
from quorum.gen import broker_pb2 as bpb
from quorum.gen import raft_pb2 as pb
from tests.integration.controller_cluster import Cluster
from tests.security.proto_strategies import message_strategy

FUZZ_REQUESTS = int(os.environ.get("FUZZ_REQUESTS", "5000"))
BATCH = 50
CALL_TIMEOUT_S = 3.0
NON_VOTERS = st.one_of(
    st.sampled_from([0, -1, 4, 4242, 2**31 - 1, -(2**31)]), st.integers(4, 2**31 - 1)
)
# Raft senders are never voters: without mTLS a voter's vote is legitimately obeyed.
RAFT_SENDERS = {"candidate_id": NON_VOTERS, "leader_id": NON_VOTERS, "replica_id": NON_VOTERS}

# The quorum's own services, and grpcio's standard ones every controller serves.
SERVICES: dict[str, ServiceDescriptor] = {
    "RaftQuorum": pb.DESCRIPTOR.services_by_name["RaftQuorum"],
    "QuorumLog": pb.DESCRIPTOR.services_by_name["QuorumLog"],
    "Admin": api.DESCRIPTOR.services_by_name["Admin"],
    "BrokerLifecycle": bpb.DESCRIPTOR.services_by_name["BrokerLifecycle"],
}
STANDARD_SERVICES: dict[str, ServiceDescriptor] = {
    "Health": health_pb2.DESCRIPTOR.services_by_name["Health"],
    "ServerReflection": reflection_pb2.DESCRIPTOR.services_by_name["ServerReflection"],
}


def requests_for(service: str) -> st.SearchStrategy[tuple[MethodDescriptor, Any]]:
    """(method, request or random bytes) over every method of `service`."""
    overrides = RAFT_SENDERS if service == "RaftQuorum" else {}
    choices = []
    for method in {**SERVICES, **STANDARD_SERVICES}[service].methods:
        choices.append(st.tuples(st.just(method), message_strategy(method.input_type, overrides)))
        choices.append(st.tuples(st.just(method), st.binary(min_size=1, max_size=300)))
    return st.one_of(choices)


def fuzz_settings() -> settings:
    """FUZZ_REQUESTS / BATCH batches, generated only (no shrinking, no database)."""
    return settings(
        max_examples=max(1, FUZZ_REQUESTS // BATCH),
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )


@dataclass
class Tally:
    sent: int = 0
    codes: Counter[str] = field(default_factory=Counter)
    accepted_writes: int = 0
    slow: Counter[str] = field(default_factory=Counter)
    strict_batches: int = 0
    batches: int = 0
    refused_writes_checked: int = 0
    elections: int = 0  # seen during a batch (a loaded machine): re-baselined, not failed


def full_state(cluster: Cluster) -> dict[int, tuple[int, int, int, str]]:
    views = {n: cluster.describe(n) for n in cluster.procs}
    return {
        n: (v.leader_epoch, v.log_end_offset, v.applied_offset, v.image_digest)
        for n, v in views.items()
    }


def wait_agreed(cluster: Cluster) -> dict[int, tuple[int, int, int, str]]:
    """The state once every controller applied the same prefix."""
    deadline = time.monotonic() + 15
    while True:
        now = full_state(cluster)
        if len({s[1:] for s in now.values()}) == 1 or time.monotonic() > deadline:
            return now
        time.sleep(0.05)


async def call(
    channel: grpc.aio.Channel, service: ServiceDescriptor, method: MethodDescriptor, request: Any
) -> tuple[str, bytes | None]:
    """The status name and, when OK, the (first) answer's bytes; a stream is
    cancelled after its first answer."""
    path = f"/{service.full_name}/{method.name}"
    serialize = (lambda b: b) if isinstance(request, bytes) else (lambda m: m.SerializeToString())
    try:
        if method.client_streaming:
            stream = channel.stream_stream(path, serialize, lambda b: b)(timeout=CALL_TIMEOUT_S)
            await stream.write(request)
            await stream.done_writing()
        elif method.server_streaming:
            stream = channel.unary_stream(path, serialize, lambda b: b)(
                request, timeout=CALL_TIMEOUT_S
            )
        else:
            unary = channel.unary_unary(path, serialize, lambda b: b)
            return "OK", await unary(request, timeout=CALL_TIMEOUT_S)
        answer = await stream.read()
        stream.cancel()
        # EOF: the stream ended OK without an answer (`read` raises on any other status).
        return ("OK", answer) if isinstance(answer, bytes) else ("EOF", None)
    except grpc.aio.AioRpcError as err:
        return err.code().name, None


async def log_end(channel: grpc.aio.Channel) -> tuple[int, int]:
    """The leader epoch and the log end offset this controller knows."""
    stub_call = channel.unary_unary(
        "/quorum.raft.v1.RaftQuorum/DescribeQuorum",
        lambda m: m.SerializeToString(),
        pb.DescribeQuorumResponse.FromString,
    )
    reply = await stub_call(pb.DescribeQuorumRequest(), timeout=5)
    return int(reply.leader_epoch), int(reply.log_end_offset)
