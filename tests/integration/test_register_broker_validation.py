"""Hostile broker registrations against real controllers, over raw gRPC: every
malformed field is refused INVALID_ARGUMENT with Kafka's error name and a
message naming the field, and the metadata log (`quorumctl log dump`) is left
exactly as it was. A well-formed registration afterwards is written."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from controller_cluster import Cluster, quorumctl, run, running_cluster

from quorum.gen import broker_pb2 as bpb
from quorum.gen import broker_pb2_grpc as bpb_grpc
from quorum.rpc.wire_errors import wire_error

pytestmark = pytest.mark.slow

INCARNATION = "kBQU2BQmSje3Vyfi1RiIdg"
DIRECTORY = "79SmW-qfT4mx3cyTwnGKUA"
LISTENER = {"name": "PLAINTEXT", "host": "127.0.0.1", "port": 9092,
            "security_protocol": "PLAINTEXT"}  # fmt: skip

# (field replaced, its value, Kafka's error, what the message names)
MALFORMED: list[tuple[str, Any, str, str]] = [
    ("incarnation_id", "not-a-uuid\n", "INVALID_REGISTRATION", "incarnation_id"),
    ("incarnation_id", "AAAAAAAAAAAAAAAAAAAAAA", "INVALID_REGISTRATION", "reserved"),
    ("log_dirs", ["AAAAAAAAAAAAAAAAAAAAAQ"], "INVALID_REGISTRATION", "log_dirs[0]"),
    ("log_dirs", [DIRECTORY, DIRECTORY], "INVALID_REGISTRATION", "log_dirs[1]"),
    ("listeners", [{**LISTENER, "port": 0}], "INVALID_REQUEST", "listeners[0].port"),
    ("listeners", [{**LISTENER, "port": 65536}], "INVALID_REQUEST", "listeners[0].port"),
    ("listeners", [{**LISTENER, "host": ""}], "INVALID_REQUEST", "listeners[0].host"),
    ("listeners", [{**LISTENER, "host": "h\r\n"}], "INVALID_REQUEST", "listeners[0].host"),
    ("listeners", [LISTENER, {**LISTENER, "port": 9093}], "INVALID_REGISTRATION",
     "listeners[1].name"),
    ("listeners", [{**LISTENER, "security_protocol": "TLS"}], "INVALID_REQUEST",
     "listeners[0].security_protocol"),
    ("rack", "\n", "INVALID_REQUEST", "rack"),
    ("rack", "r" * 256, "INVALID_REQUEST", "rack"),
    ("features", [{"name": "no.such.feature"}], "INVALID_REQUEST", "features[0].name"),
]  # fmt: skip


def registration(cluster: Cluster, **fields: Any) -> bpb.RegisterBrokerRequest:
    values: dict[str, Any] = {
        "incarnation_id": INCARNATION,
        "listeners": [LISTENER],
        "rack": "rack-a",
        "features": [{"name": "metadata.version", "min_supported_version": 1,
                      "max_supported_version": 1}],
        "log_dirs": [DIRECTORY],
        **fields,
    }  # fmt: skip
    return bpb.RegisterBrokerRequest(
        cluster_id=cluster.cluster_id,
        broker_id=11,
        incarnation_id=values["incarnation_id"],
        listeners=[bpb.Listener(**lst) for lst in values["listeners"]],
        rack=values["rack"],
        features=[bpb.SupportedFeature(**f) for f in values["features"]],
        log_dirs=values["log_dirs"],
    )


def register(address: str, request: bpb.RegisterBrokerRequest) -> grpc.aio.AioRpcError | None:
    async def go() -> grpc.aio.AioRpcError | None:
        async with grpc.aio.insecure_channel(address) as channel:
            try:
                await bpb_grpc.BrokerLifecycleStub(channel).RegisterBroker(request, timeout=15)
            except grpc.aio.AioRpcError as err:
                return err
            return None

    return run(go())


def log_dump(cluster: Cluster, node_id: int) -> list[Any]:
    done = quorumctl(
        "log", "dump", "--dir", str(cluster.procs[node_id].data_dir), "--output", "json"
    )
    assert done.returncode == 0, done.stderr
    return list(json.loads(done.stdout))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(Path(tmp_path_factory.mktemp("register-validation"))) as c:
        yield c


@pytest.mark.parametrize(("field", "value", "error", "names"), MALFORMED,
                         ids=[f"{m[0]}={m[1]!r}"[:40] for m in MALFORMED])  # fmt: skip
def test_a_malformed_registration_is_refused_and_the_log_is_unchanged(
    cluster: Cluster, field: str, value: Any, error: str, names: str
) -> None:
    leader = cluster.wait_for_leader().leader_id
    before = log_dump(cluster, leader)
    refused = register(cluster.procs[leader].address, registration(cluster, **{field: value}))
    assert refused is not None, "a malformed registration was accepted"
    wire = wire_error(refused)
    assert (refused.code(), wire.error and wire.error.name) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        error,
    ), refused.details()
    assert names in wire.message, wire.message
    assert log_dump(cluster, leader) == before


def test_the_well_formed_registration_is_written(cluster: Cluster) -> None:
    leader = cluster.wait_for_leader().leader_id
    assert register(cluster.procs[leader].address, registration(cluster)) is None

    def registered() -> bool:
        return any(
            record["Type"] == "register_broker"
            for batch in log_dump(cluster, leader)
            for record in batch["Records"]
        )

    cluster.wait_until(registered, 15, "the registration in the log")
