"""Every failed gRPC call becomes one line naming the endpoint, never gRPC's own
text (a multi-line `<AioRpcError ... debug_error_string ...>`). Real calls
against a closed port and a server that never answers."""

from __future__ import annotations

import asyncio
import socket

import grpc

from quorum.cli.endpoints import probe_all, rpc_failure
from quorum.common.channels import open_channel
from quorum.gen import raft_pb2 as pb
from quorum.gen import raft_pb2_grpc as pb_grpc


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def failed_call(address: str, timeout_s: float) -> grpc.aio.AioRpcError:
    channel = open_channel(address)
    try:
        await pb_grpc.RaftQuorumStub(channel).DescribeQuorum(
            pb.DescribeQuorumRequest(), timeout=timeout_s
        )
    except grpc.aio.AioRpcError as err:
        return err
    finally:
        await channel.close()
    raise AssertionError("the call succeeded")


def test_a_refused_connection_is_one_line_naming_the_endpoint() -> None:
    address = f"127.0.0.1:{closed_port()}"
    err = asyncio.run(failed_call(address, 2.0))
    assert rpc_failure(address, err) == f"{address}: unreachable (connection refused)"


def test_a_silent_server_is_no_answer_in_time() -> None:
    with socket.socket() as listener:  # accepts connections, never speaks HTTP/2
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        address = f"127.0.0.1:{listener.getsockname()[1]}"
        err = asyncio.run(failed_call(address, 0.5))
    message = rpc_failure(address, err)
    assert message.startswith(f"{address}: ") and "\n" not in message
    assert "debug_error_string" not in message


def test_probe_all_reports_each_endpoint_without_raising() -> None:
    down = [f"127.0.0.1:{closed_port()}", f"127.0.0.1:{closed_port()}"]
    views = asyncio.run(probe_all(down, "", 2.0, cluster=True))
    assert sorted(v.address for v in views) == sorted(down)
    assert all(v.reply is None and "connection refused" in v.error for v in views)
