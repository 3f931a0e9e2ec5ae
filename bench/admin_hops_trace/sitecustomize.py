"""Timestamps for `bench/admin_hops.py`, loaded by the cluster's processes through
`PYTHONPATH` (Python imports `sitecustomize` at start-up). Inert unless
ADMIN_HOPS_DIR is set; then a broker or controller wraps the few methods a
forwarded CreateTopics passes through and, at exit, writes one line per event
(`time.time_ns()`, label) to ADMIN_HOPS_DIR. Measurement only: nothing here
changes what the methods do."""

from __future__ import annotations

import atexit
import functools
import os
import sys
import time
from typing import Any

OUT = os.environ.get("ADMIN_HOPS_DIR")
EVENTS: list[tuple[int, str]] = []


def _dump() -> None:
    assert OUT is not None
    name = f"{os.path.basename(sys.argv[0])}-{os.getpid()}.tsv"
    with open(os.path.join(OUT, name), "w") as f:
        f.writelines(f"{t}\t{label}\n" for t, label in EVENTS)


def _timed(cls: Any, name: str, label: str) -> None:
    original = getattr(cls, name)

    @functools.wraps(original)
    async def timed(*args: Any, **kwargs: Any) -> Any:
        EVENTS.append((time.time_ns(), label + ">"))
        try:
            return await original(*args, **kwargs)
        finally:
            EVENTS.append((time.time_ns(), label + "<"))

    setattr(cls, name, timed)


def _marked(cls: Any, name: str, label: str) -> None:
    """A plain method or a module's function: one event when it is called."""
    original = getattr(cls, name)

    @functools.wraps(original)
    def marked(*args: Any, **kwargs: Any) -> Any:
        EVENTS.append((time.time_ns(), label))
        return original(*args, **kwargs)

    setattr(cls, name, marked)


if OUT:
    program = os.path.basename(sys.argv[0])
    if program == "broker-agent":
        from broker_agent import agent
        from broker_agent.kafka import forwarding, listener

        _timed(listener.KafkaListener, "_handle", "listen")
        _timed(forwarding.ControllerForwarder, "call", "forward")
        _timed(agent.BrokerAgent, "_apply", "apply")
        _timed(agent.BrokerAgent, "_fetch_or_stop", "fetch")  # "fetch<": an answer in hand
        from broker_agent.kafka import admin_apis, codec
        from quorum import admin_client

        _marked(codec, "decode_request", "decode")
        _marked(admin_apis, "create_topics_request", "build")
        _timed(admin_client.AdminClient, "admin", "grpc")
        _marked(codec, "encode_response", "encode")
        atexit.register(_dump)
    elif program == "quorum-controller":
        from quorum.controller import commit_clock
        from quorum.server import admin_servicer, broker_servicer

        _timed(admin_servicer.AdminServicer, "CreateTopics", "controller")
        _timed(broker_servicer.BrokerLifecycleServicer, "_fetch", "answer")  # "answer<": built
        _marked(commit_clock.CommitClock, "on_commit", "commit")
        from quorum.controller import controller, write_queue

        _timed(controller.QuorumController, "_propose", "propose")  # "propose<": committed
        _timed(write_queue.WriteQueue, "submit_at", "submit")
        atexit.register(_dump)
