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


def _timed_sync(cls: Any, name: str, label: str) -> None:
    """The same for a plain method (a worker thread's log open)."""
    original = getattr(cls, name)

    @functools.wraps(original)
    def timed(*args: Any, **kwargs: Any) -> Any:
        EVENTS.append((time.time_ns(), label + ">"))
        try:
            return original(*args, **kwargs)
        finally:
            EVENTS.append((time.time_ns(), label + "<"))

    setattr(cls, name, timed)


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


if OUT:
    program = os.path.basename(sys.argv[0])
    if program == "broker-agent":
        from broker_agent import agent
        from broker_agent.kafka import forwarding, listener
        from broker_agent.partitions import replica_manager

        switch = os.environ.get("ADMIN_HOPS_SWITCH_INTERVAL")
        if switch:  # the experiment of `--switch-interval`
            sys.setswitchinterval(float(switch))
        _timed_sync(replica_manager.ReplicaManager, "_open_log", "open")

        _timed(listener.KafkaListener, "_handle", "listen")
        _timed(forwarding.ControllerForwarder, "call", "forward")
        _timed(agent.BrokerAgent, "_apply", "apply")
        atexit.register(_dump)
    elif program == "quorum-controller":
        from quorum.server import admin_servicer

        _timed(admin_servicer.AdminServicer, "CreateTopics", "controller")
        atexit.register(_dump)
