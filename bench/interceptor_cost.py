"""What the two server interceptors cost per streamed message, in-process.

Every server (`quorum.rpc.servers.new_server`) wraps each method in
`AnswerEveryCall` (no call ends in an exception) and `RejectMalformedRequests`
(bytes that do not parse are refused): on a stream-stream call like
MetadataFetchStream that is one more async generator over the requests and two
more over the answers, per message. This drives a bare echoing servicer, the
same behind the malformed-request guard, and behind both, with no gRPC around
them, and prints the CPU per message of each (the floor's server pays the same:
it is built by the same `new_server()`).

    .venv/bin/python bench/interceptor_cost.py --messages 200000 --rounds 5
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from report import emit

from quorum.rpc.malformed import _guard
from quorum.rpc.unexpected import AnswerEveryCall


class NoContext:
    """No message here is malformed and nothing raises: nothing is read from it."""

    async def abort_with_status(self, status: object) -> None:
        raise AssertionError("nothing is refused here")


async def requests(count: int) -> AsyncIterator[int]:
    for i in range(count):
        yield i


async def echo(requests: AsyncIterator[Any], context: Any) -> AsyncIterator[Any]:
    async for request in requests:
        yield request


async def per_message_us(handler: grpc.RpcMethodHandler, count: int) -> float:
    started = time.process_time()
    async for _ in handler.stream_stream(requests(count), NoContext()):
        pass
    return (time.process_time() - started) / count * 1e6


async def run(count: int, rounds: int) -> dict[str, list[float]]:
    bare = grpc.stream_stream_rpc_method_handler(echo, lambda b: b, lambda m: m)
    guarded = _guard(bare, "Echo")
    both = AnswerEveryCall().answered_handler(guarded, "Echo")
    out: dict[str, list[float]] = {"bare": [], "malformed_guard": [], "both_interceptors": []}
    for _ in range(rounds):  # alternated, so the load moves all three alike
        for name, handler in (("bare", bare), ("malformed_guard", guarded),
                              ("both_interceptors", both)):  # fmt: skip
            out[name].append(round(await per_message_us(handler, count), 3))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    found = asyncio.run(run(args.messages, args.rounds))
    for name, values in found.items():
        emit(metric="stream_message_cpu_us", handler=name, values=values,
             median=sorted(values)[len(values) // 2],
             load_average=[round(x, 2) for x in os.getloadavg()])  # fmt: skip


if __name__ == "__main__":
    main()
