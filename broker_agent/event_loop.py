"""The broker process's event loop: uvloop's when it is installed, asyncio's otherwise.

Every Kafka request a broker serves costs socket reads and writes, a stream
reader's buffering and a few callbacks of the loop; uvloop does that part in C
(libuv), which takes a measurable share off an offset commit's CPU (issue 30,
docs/benchmarks.md "Offset commits, second pass"). Nothing in the broker depends
on which loop runs it: TLS listeners, signal handlers and gRPC's asyncio client
work on both, so a platform without uvloop runs on asyncio's own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop factory, or None (asyncio's default loop) without uvloop."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def run(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(main)` on the broker's loop."""
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(main)
