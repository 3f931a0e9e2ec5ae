"""A small blocking Kafka protocol client for `quorumctl groups`: one request at a
time over a plain socket, with kio's classes (generated from Kafka's schemas).

quorumctl talks to the controllers over gRPC; consumer groups live on the
brokers, behind their Kafka listeners, so this is how the CLI reaches them
(kafka-consumer-groups.sh does the same with Kafka's AdminClient). The brokers'
endpoints come from the controllers' DescribeCluster.
"""

from __future__ import annotations

import io
import socket
import ssl
import struct
from dataclasses import dataclass
from typing import Any

from kio.index import load_response_schema
from kio.schema.request_header.v1.header import RequestHeader as HeaderV1
from kio.schema.request_header.v2.header import RequestHeader as HeaderV2
from kio.serial import entity_reader, entity_writer

CLIENT_ID = "quorumctl"


class KafkaClientError(Exception):
    """A broker could not be reached, or closed the connection."""


@dataclass
class KafkaConnection:
    host: str
    port: int
    timeout_s: float = 10.0
    ssl_context: ssl.SSLContext | None = None  # an SSL listener

    def __post_init__(self) -> None:
        try:
            sock = socket.create_connection((self.host, self.port), timeout=self.timeout_s)
        except OSError as err:
            raise KafkaClientError(f"cannot reach broker {self.host}:{self.port}: {err}") from err
        if self.ssl_context is not None:
            try:
                sock = self.ssl_context.wrap_socket(sock, server_hostname=self.host)
            except OSError as err:  # ssl.SSLError and timeouts included
                sock.close()
                raise KafkaClientError(f"TLS to broker {self.host}:{self.port}: {err}") from err
        self.sock = sock
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> KafkaConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(self, request: Any) -> Any:
        """Send a kio request object; the decoded response of the same API and version."""
        self.correlation_id += 1
        header_cls = HeaderV2 if request.__header_schema__ is HeaderV2 else HeaderV1
        header = header_cls(
            request_api_key=request.__api_key__,
            request_api_version=request.__version__,
            correlation_id=self.correlation_id,
            client_id=CLIENT_ID,
        )  # type: ignore[arg-type]
        buffer = io.BytesIO()
        buffer.write(b"\0\0\0\0")
        entity_writer(type(header))(buffer, header)
        entity_writer(type(request))(buffer, request)
        data = buffer.getbuffer()
        struct.pack_into(">i", data, 0, len(data) - 4)
        try:
            self.sock.sendall(bytes(data))
            del data
            size = struct.unpack(">i", self._read(4))[0]
            frame = self._read(size)
        except OSError as err:
            raise KafkaClientError(f"broker {self.host}:{self.port}: {err}") from err
        response_cls = load_response_schema(request.__api_key__, request.__version__)
        header_out, offset = entity_reader(response_cls.__header_schema__)(frame, 0)
        if header_out.correlation_id != self.correlation_id:
            raise KafkaClientError("a response out of order")
        body, _ = entity_reader(response_cls)(frame, offset)
        return body

    def _read(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise KafkaClientError(f"broker {self.host}:{self.port} closed the connection")
            out += chunk
        return out
