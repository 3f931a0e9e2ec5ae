"""Counts what wakes a controller's event loop from sleep (a bench instrument).

Put this folder first on PYTHONPATH of a bench, as an absolute path (only
processes started as `quorum-controller`, and the floor's server of
`fanout_floor.py`, are touched) and set LOOP_WAKES_DIR: each writes
`wakes-PID.json` there every 2 s, cumulative since its start: how many times its
loop slept in `epoll_wait` (more than 0.2 ms) and what woke it (a file
descriptor's reader, by callback: gRPC's poller socket, the loop's self-pipe;
or a timer, by the callback at the head of the loop's timers). Subtract two
snapshots for a window.

    LOOP_WAKES_DIR=/tmp/wakes PYTHONPATH=$PWD/bench/loop_wakes \\
        .venv/bin/python bench/fanout_floor.py --brokers 200 --systems quorum
"""

from __future__ import annotations

import os
import sys

_WATCHED = sys.argv and (
    sys.argv[0].endswith("quorum-controller")
    or (sys.argv[0].endswith("fanout_floor.py") and "--serve" in sys.argv)
)
if _WATCHED and os.environ.get("LOOP_WAKES_DIR"):
    import asyncio
    import collections
    import json
    import selectors
    import threading
    import time
    from typing import Any

    _OUT = os.environ["LOOP_WAKES_DIR"]
    _slept: collections.Counter[str] = collections.Counter()
    _select = selectors.EpollSelector.select

    def _name(callback: Any) -> str:
        inner = getattr(callback, "func", callback)  # functools.partial
        return str(getattr(inner, "__qualname__", None) or repr(inner)[:60])

    def _counting_select(self: selectors.EpollSelector, timeout: float | None = None) -> Any:
        started = time.perf_counter()
        events = _select(self, timeout)
        if (timeout is None or timeout > 0) and time.perf_counter() - started > 0.0002:
            _slept["slept"] += 1
            if not events:
                timers = getattr(asyncio.get_event_loop(), "_scheduled", [])
                head = _name(timers[0]._callback) if timers else "?"
                _slept[f"timer: {head}"] += 1
            for key, _ in events:
                handle = key.data[0] if key.data else None
                _slept[f"fd: {_name(handle._callback) if handle else '?'}"] += 1
        return events

    selectors.EpollSelector.select = _counting_select  # type: ignore[method-assign]

    def _dump() -> None:
        path = os.path.join(_OUT, f"wakes-{os.getpid()}.json")
        while True:
            time.sleep(2)
            with open(path, "w") as out:
                json.dump({"t": time.time(), **_slept}, out)

    os.makedirs(_OUT, exist_ok=True)
    threading.Thread(target=_dump, daemon=True, name="loop-wakes").start()
