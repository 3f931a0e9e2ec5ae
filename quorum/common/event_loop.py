"""The event loop a process runs on: uvloop's when it is installed, asyncio's
otherwise, or asyncio's on request (`QUORUM_EVENT_LOOP=asyncio`).

uvloop runs the loop's own work (the ready queue, timers, the selector and the
socket transports) in C. A controller's write path is mostly gRPC's callbacks
and this project's Python, which run the same on either loop; what uvloop takes
off is the loop's share of every callback (see docs/benchmarks.md, "CPU per
write"). Nothing in a controller depends on the loop: gRPC's asyncio server and
channels, signal handlers and worker threads work on both, so the default loop
stays one environment variable away (to compare, or on a platform without
uvloop).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

ENV_VAR = "QUORUM_EVENT_LOOP"
CHOICES = ("uvloop", "asyncio")


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop factory, or None (asyncio's default loop): asyncio's when
    uvloop is not installed or `QUORUM_EVENT_LOOP=asyncio` asks for it."""
    wanted = os.environ.get(ENV_VAR, "uvloop").strip().lower()
    if wanted not in CHOICES:
        raise ValueError(f"{ENV_VAR}={wanted!r}: expected one of {', '.join(CHOICES)}")
    if wanted == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def loop_name(factory: Callable[[], asyncio.AbstractEventLoop] | None) -> str:
    return "asyncio" if factory is None else "uvloop"


def run(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(main)` on the chosen loop."""
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(main)
