"""Timestamps a server's commit cycle, event by event (a bench instrument).

Put this folder first on PYTHONPATH of a bench, as an absolute path (only
processes started as `quorum-controller`, and the floor's server of
`fanout_floor.py`, are touched) and set COMMIT_CYCLE_DIR: each writes
`cycle-PID.jsonl` there, one event a line, `[monotonic ns, loop iteration, kind,
name, n]`:

- `commit`: the controller's `CommitClock.on_commit` (name: the high
  watermark; n: the parked waits it ends), the floor's `FloorLog.wake` (every
  parked fetch answers); `applied`: the controller applying committed records
  (name: their kinds);
- `req` / `ans`: a streamed request reaching its servicer and an answer leaving
  it (yielded, or written with `context.write`), by method (`FetchStream`, the
  voters'; `MetadataFetchStream`, the brokers'); a unary call is `req`, `ans`;
- `sleep`: the loop slept in `epoll_wait` (over 0.2 ms; n: how long, in µs),
  `name` what woke it (as `bench/loop_wakes`); `flushed`: the log's flush done.

The loop iteration is the count of `select` calls: events of one iteration ran
without the loop polling in between. `bench/commit_cycle.py` reads the files.

    COMMIT_CYCLE_DIR=/tmp/cycle PYTHONPATH=$PWD/bench/commit_cycle \\
        .venv/bin/python bench/fanout_floor.py --brokers 200 --systems floor,quorum
    .venv/bin/python bench/commit_cycle.py /tmp/cycle
"""

from __future__ import annotations

import os
import sys

_WATCHED = sys.argv and (
    sys.argv[0].endswith("quorum-controller")
    or (sys.argv[0].endswith("fanout_floor.py") and "--serve" in sys.argv)
)
if _WATCHED and os.environ.get("COMMIT_CYCLE_DIR"):
    import asyncio
    import functools
    import inspect
    import json
    import selectors
    import threading
    import time
    from typing import Any

    import grpc

    _OUT = os.environ["COMMIT_CYCLE_DIR"]
    _events: list[list[Any]] = []
    _iteration = [0]
    _now = time.monotonic_ns  # perf record -k mono stamps with the same clock
    _select = selectors.EpollSelector.select

    def _rec(kind: str, name: str = "", n: int = 0) -> None:
        _events.append([_now(), _iteration[0], kind, name, n])

    def _name(callback: Any) -> str:
        inner = getattr(callback, "func", callback)
        return str(getattr(inner, "__qualname__", None) or repr(inner)[:60])

    def _traced_select(self: selectors.EpollSelector, timeout: float | None = None) -> Any:
        _iteration[0] += 1
        started = _now()
        events = _select(self, timeout)
        slept = _now() - started
        if slept > 200_000:
            if events:
                handle = events[0][0].data[0] if events[0][0].data else None
                woke = f"fd: {_name(handle._callback) if handle else '?'}"
            else:
                timers = getattr(asyncio.get_event_loop(), "_scheduled", [])
                woke = f"timer: {_name(timers[0]._callback) if timers else '?'}"
            _events.append([started, _iteration[0], "sleep", woke, slept // 1000])
        return events

    selectors.EpollSelector.select = _traced_select  # type: ignore[method-assign]

    class _Context:
        """The servicer's context, its writes recorded."""

        def __init__(self, context: Any, name: str) -> None:
            self._context = context
            self._name = name

        def __getattr__(self, attr: str) -> Any:
            return getattr(self._context, attr)

        async def write(self, message: Any) -> None:
            _rec("ans", self._name)
            await self._context.write(message)

    async def _requests(requests: Any, name: str) -> Any:
        async for request in requests:
            _rec("req", name)
            yield request

    def _traced_stream(behavior: Any) -> Any:
        name = getattr(behavior, "__name__", "?")
        if inspect.iscoroutinefunction(behavior):

            async def writer(requests: Any, context: Any) -> None:
                await behavior(_requests(requests, name), _Context(context, name))

            return writer

        async def yielder(requests: Any, context: Any) -> Any:
            async for answer in behavior(_requests(requests, name), context):
                _rec("ans", name)
                yield answer

        return yielder

    def _traced_unary(behavior: Any) -> Any:
        name = getattr(behavior, "__name__", "?")

        async def unary(request: Any, context: Any) -> Any:
            _rec("req", name)
            answer = await behavior(request, context)
            _rec("ans", name)
            return answer

        return unary if inspect.iscoroutinefunction(behavior) else behavior

    _stream_handler = grpc.stream_stream_rpc_method_handler
    _unary_handler = grpc.unary_unary_rpc_method_handler

    @functools.wraps(_stream_handler)
    def _stream(behavior: Any, *args: Any, **kwargs: Any) -> Any:
        return _stream_handler(_traced_stream(behavior), *args, **kwargs)

    @functools.wraps(_unary_handler)
    def _unary(behavior: Any, *args: Any, **kwargs: Any) -> Any:
        return _unary_handler(_traced_unary(behavior), *args, **kwargs)

    grpc.stream_stream_rpc_method_handler = _stream
    grpc.unary_unary_rpc_method_handler = _unary

    def _patch_controller() -> None:
        from quorum.controller.commit_clock import CommitClock
        from quorum.controller.controller import QuorumController
        from quorum.gen import metadata_pb2 as md
        from quorum.server.driver import RaftDriver

        on_commit = CommitClock.on_commit
        handle_commit = QuorumController.handle_commit
        flushed = RaftDriver._flushed

        def traced_on_commit(self: CommitClock, high_watermark: int) -> None:
            _rec("commit", str(high_watermark), self.waiting)
            on_commit(self, high_watermark)

        def traced_handle_commit(self: QuorumController, batches: Any) -> None:
            kinds = [
                "control"
                if batch.control
                else md.MetadataRecord.FromString(record).WhichOneof("record")
                for batch in batches
                for record in (batch.records[:1] if batch.control else batch.records)
            ]
            _rec("applied", ",".join(str(kind) for kind in kinds), len(kinds))
            handle_commit(self, batches)

        def traced_flushed(self: Any, *args: Any) -> None:
            _rec("flushed")
            flushed(self, *args)

        CommitClock.on_commit = traced_on_commit  # type: ignore[method-assign]
        QuorumController.handle_commit = traced_handle_commit  # type: ignore[method-assign]
        RaftDriver._flushed = traced_flushed  # type: ignore[method-assign]

    def _patch_floor() -> None:
        from quorum.server import broker_servicer

        add = broker_servicer.add_broker_lifecycle

        def traced_add(servicer: Any, server: Any) -> None:
            floor_log = getattr(servicer, "_log", None)
            if floor_log is not None:
                wake = floor_log.wake

                def traced_wake() -> None:
                    _rec("commit")
                    wake()

                floor_log.wake = traced_wake
            add(servicer, server)

        broker_servicer.add_broker_lifecycle = traced_add

    if sys.argv[0].endswith("quorum-controller"):
        _patch_controller()
    else:
        _patch_floor()

    def _dump() -> None:
        path = os.path.join(_OUT, f"cycle-{os.getpid()}.jsonl")
        done = 0
        with open(path, "w") as out:
            while True:
                time.sleep(1)
                end = len(_events)
                for event in _events[done:end]:
                    out.write(json.dumps(event) + "\n")
                out.flush()
                done = end

    os.makedirs(_OUT, exist_ok=True)
    threading.Thread(target=_dump, daemon=True, name="commit-cycle").start()
