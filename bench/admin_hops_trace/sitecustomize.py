"""Timestamps for `bench/admin_hops.py`, loaded by the cluster's processes through
`PYTHONPATH` (Python imports `sitecustomize` at start-up). Inert unless
ADMIN_HOPS_DIR is set; then a broker or controller wraps the few methods a
forwarded CreateTopics passes through and, at exit, writes one line per event
(`time.time_ns()`, label) to ADMIN_HOPS_DIR. Measurement only: nothing here
changes what the methods do."""

from __future__ import annotations

import atexit
import cProfile
import functools
import inspect
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


PROFILE = cProfile.Profile() if os.environ.get("ADMIN_HOPS_PROFILE") else None


def _profiled(cls: Any, name: str) -> None:
    """`--profile`: the loop thread's time in this method, into one profile a process."""
    original = getattr(cls, name)
    assert PROFILE is not None

    @functools.wraps(original)
    async def profiled_async(*args: Any, **kwargs: Any) -> Any:
        PROFILE.enable()
        try:
            return await original(*args, **kwargs)
        finally:
            PROFILE.disable()

    @functools.wraps(original)
    def profiled(*args: Any, **kwargs: Any) -> Any:
        PROFILE.enable()
        try:
            return original(*args, **kwargs)
        finally:
            PROFILE.disable()

    setattr(cls, name, profiled_async if inspect.iscoroutinefunction(original) else profiled)


def _dump_profile() -> None:
    assert OUT is not None and PROFILE is not None
    PROFILE.dump_stats(os.path.join(OUT, f"{os.path.basename(sys.argv[0])}-{os.getpid()}.prof"))


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


def _gc_events(phase: str, info: dict[str, Any]) -> None:
    """The collector's passes ("gc>" ... "gc<"), any thread: a pause of the loop."""
    EVENTS.append((time.time_ns(), "gc>" if phase == "start" else "gc<"))


if OUT:
    import gc

    program = os.path.basename(sys.argv[0])
    gc.callbacks.append(_gc_events)
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
        if PROFILE is not None:  # the loop's metadata applies, and its joins of new logs
            _profiled(agent.BrokerAgent, "_apply")
            _profiled(replica_manager.ReplicaManager, "_join_opened")
            atexit.register(_dump_profile)
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
