"""Probes of the kraft-quorum chart, run by the kubelet inside a pod.

    probe.py alive HOST:PORT        a controller's gRPC health service answers at all
    probe.py broker-online URL      a broker agent's metrics say it is ONLINE

Liveness must not depend on a leader: the health service says SERVING only while
the node knows one, so a quorum that lost its majority would otherwise be
restarted pod by pod and never recover. Any answer (SERVING or NOT_SERVING)
proves the process and its event loop respond; readiness is the kubelet's own
gRPC probe, which wants SERVING.
"""

from __future__ import annotations

import re
import sys
import urllib.request

ONLINE = re.compile(r'^quorum_broker_state\{state="ONLINE"\} 1(\.0)?$', re.MULTILINE)


def alive(address: str, timeout_s: float = 5.0) -> int:
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    with grpc.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            reply = stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=timeout_s)
        except grpc.RpcError as err:
            print(f"{address}: no answer from the health service: {err.code().name}")
            return 1
    print(f"{address}: {health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)}")
    return 0


def broker_online(url: str, timeout_s: float = 5.0) -> int:
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as reply:
            text = reply.read().decode("utf-8", "replace")
    except OSError as err:
        print(f"{url}: {err}")
        return 1
    if ONLINE.search(text):
        print(f"{url}: ONLINE")
        return 0
    state = re.search(r'^quorum_broker_state\{state="(\w+)"\} 1(\.0)?$', text, re.MULTILINE)
    print(f"{url}: not ONLINE ({state.group(1) if state else 'no state'})")
    return 1


def main(argv: list[str]) -> int:
    checks = {"alive": alive, "broker-online": broker_online}
    if len(argv) != 3 or argv[1] not in checks:
        print(f"usage: {argv[0]} alive HOST:PORT | broker-online URL", file=sys.stderr)
        return 2
    return checks[argv[1]](argv[2])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
