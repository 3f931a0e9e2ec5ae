"""The one place gRPC channels and servers are built.

Every process opens its channels and servers here so that settings that must
agree on both ends (message size limits now; TLS credentials later) cannot drift.
One atomic metadata change travels in one Raft batch, and a batch of tens of
thousands of partition records is larger than gRPC's 4 MiB default.
"""

from __future__ import annotations

import grpc

MAX_MESSAGE_BYTES = 256 * 1024 * 1024

_OPTIONS = [
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
]


def open_channel(address: str) -> grpc.aio.Channel:
    return grpc.aio.insecure_channel(address, options=_OPTIONS)


def new_server() -> grpc.aio.Server:
    return grpc.aio.server(options=_OPTIONS)
