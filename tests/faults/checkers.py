"""What a fault scenario must not break, checked in code after it heals.

`check_acknowledged` takes the client's record of every write (acknowledged,
failed with a definite error, or left in doubt) and every controller's committed
log: acknowledged writes are all there, at the offsets they were acknowledged
at, in acknowledgement order, on every controller; the controllers' logs agree;
no write refused with a definite error is there.

`check_linearizable` decides whether a single register's history (writes and
reads by several clients, each with its invocation and completion time) has a
linearization: a Wing & Gong search over the concurrent operations, with Lowe's
memoisation of (operations linearized, register value) states so the search
stays polynomial for the histories the scenarios produce. A write whose outcome
is unknown may take effect at any point after its invocation, or never.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

OK, FAIL, INFO = "ok", "fail", "info"


@dataclass(frozen=True)
class Append:
    """One write to the log: a unique payload, and what the client learned."""

    payload: bytes
    call: float
    ret: float | None
    outcome: str  # OK, FAIL (a definite refusal) or INFO (timed out, connection lost)
    offset: int | None = None  # acknowledged offset
    node: int | None = None  # the controller the attempt went to


@dataclass(frozen=True)
class CommittedLog:
    """One controller's committed records: offset -> payload, from `start` (its log
    start) up to `end` (its high watermark). Records that are not the workload's
    are given as some other bytes starting with `#` (compared, never looked up) or
    None."""

    node: int
    start: int
    end: int
    records: Mapping[int, bytes | None]


def check_acknowledged(history: Sequence[Append], logs: Sequence[CommittedLog]) -> list[str]:
    """Violations of durability and agreement (empty when there are none)."""
    problems: list[str] = []
    problems += _logs_agree(logs)
    for log in logs:
        where: dict[bytes, int] = {}
        for offset, payload in log.records.items():
            if payload is None or payload.startswith(b"#"):
                continue
            if payload in where:
                problems.append(f"node {log.node}: {payload!r} twice ({where[payload]}, {offset})")
            where[payload] = offset
        for op in history:
            if op.outcome == FAIL and op.payload in where:
                problems.append(
                    f"node {log.node}: {op.payload!r} refused with a definite error "
                    f"but committed at offset {where[op.payload]}"
                )
            if op.outcome != OK or op.offset is None or not log.start <= op.offset < log.end:
                continue
            found = where.get(op.payload)
            if found != op.offset:
                problems.append(
                    f"node {log.node}: acknowledged {op.payload!r} at offset {op.offset} "
                    + ("is missing" if found is None else f"is at {found}")
                )
        problems += _acknowledgement_order(history, where, log)
    return problems


def _logs_agree(logs: Sequence[CommittedLog]) -> list[str]:
    problems = []
    for a in logs:
        for b in logs:
            if a.node >= b.node:
                continue
            for offset in range(max(a.start, b.start), min(a.end, b.end)):
                if a.records.get(offset, b"?") != b.records.get(offset, b"?"):
                    problems.append(
                        f"nodes {a.node} and {b.node} differ at committed offset {offset}: "
                        f"{a.records.get(offset)!r} vs {b.records.get(offset)!r}"
                    )
                    break
    return problems


def _acknowledgement_order(
    history: Sequence[Append], where: Mapping[bytes, int], log: CommittedLog
) -> list[str]:
    """A write acknowledged before another was issued sits at a lower offset."""
    acked = sorted(
        (op for op in history if op.outcome == OK and op.payload in where and op.ret is not None),
        key=lambda op: op.call,
    )
    problems = []
    latest_ret, latest_offset, latest = -math.inf, -1, b""
    by_ret = sorted(acked, key=lambda op: op.ret or 0.0)
    i = 0
    for op in acked:  # by invocation; fold in every write that had returned by then
        while i < len(by_ret) and (by_ret[i].ret or 0.0) < op.call:
            if where[by_ret[i].payload] > latest_offset:
                latest_offset, latest = where[by_ret[i].payload], by_ret[i].payload
                latest_ret = by_ret[i].ret or 0.0
            i += 1
        if where[op.payload] < latest_offset:
            problems.append(
                f"node {log.node}: {op.payload!r} (issued {op.call:.3f}) is at offset "
                f"{where[op.payload]}, before {latest!r} at {latest_offset}, which was "
                f"acknowledged earlier ({latest_ret:.3f})"
            )
    return problems


# ------------------------------------------------------------- linearizability


@dataclass(frozen=True)
class RegisterOp:
    """A register operation: `write` of `value`, or a `read` that returned `value`."""

    client: int
    kind: str  # "write" | "read"
    value: int
    call: float
    ret: float | None  # None: a write whose outcome is unknown
    node: int | None = None


@dataclass(frozen=True)
class Verdict:
    ok: bool
    explored: int
    message: str = ""


def check_linearizable(
    history: Iterable[RegisterOp], initial: int, max_states: int = 2_000_000
) -> Verdict:
    """Whether the history has a linearization (see the module docstring)."""
    ops = [op for op in history if op.kind == "write" or op.ret is not None]
    n = len(ops)
    if n == 0:
        return Verdict(True, 0)
    # events in time order: (time, 0 = call / 1 = return, op index); calls before
    # returns at equal times, so touching operations count as concurrent
    events = sorted(
        [(op.call, 0, i) for i, op in enumerate(ops)]
        + [(op.ret if op.ret is not None else math.inf, 1, i) for i, op in enumerate(ops)]
    )
    # a doubly linked list over the events, so linearized operations can be lifted out
    prev = list(range(-1, len(events) - 1))
    nxt = list(range(1, len(events) + 1))
    head_prev = -1  # sentinel index before the first event
    first = 0
    call_at = [0] * n
    ret_at = [0] * n
    for position, (_, kind, i) in enumerate(events):
        (call_at if kind == 0 else ret_at)[i] = position

    def lift(i: int) -> None:
        nonlocal first
        for position in (call_at[i], ret_at[i]):
            before, after = prev[position], nxt[position]
            if before == head_prev:
                first = after
            else:
                nxt[before] = after
            if after < len(events):
                prev[after] = before

    def unlift(i: int) -> None:
        nonlocal first
        for position in (ret_at[i], call_at[i]):
            before, after = prev[position], nxt[position]
            if before == head_prev:
                first = position
            else:
                nxt[before] = position
            if after < len(events):
                prev[after] = position

    seen: set[tuple[int, int]] = set()
    stack: list[tuple[int, int]] = []  # (op index, register value before it)
    state, linearized, explored = initial, 0, 0
    deepest, culprit = -1, 0  # the op that blocked the longest partial linearization
    entry = first
    while entry < len(events):
        explored += 1
        if explored > max_states:
            return Verdict(False, explored, f"gave up after {max_states} steps")
        _, kind, i = events[entry]
        if kind == 0:
            op = ops[i]
            legal = op.kind == "write" or op.value == state
            new_state = op.value if op.kind == "write" else state
            key = (linearized | (1 << i), new_state)
            if legal and key not in seen:
                seen.add(key)
                stack.append((i, state))
                state, linearized = new_state, key[0]
                lift(i)
                entry = first
            else:
                entry = nxt[entry]
            continue
        # a return reached before its operation was linearized: undo the last choice
        if len(stack) > deepest:
            deepest, culprit = len(stack), i
        if not stack:
            return Verdict(False, explored, _explain(ops, culprit, deepest, initial))
        i, state = stack.pop()
        linearized &= ~(1 << i)
        unlift(i)
        entry = nxt[call_at[i]]
    return Verdict(True, explored)


def _explain(ops: Sequence[RegisterOp], stuck: int, depth: int, initial: int) -> str:
    op = ops[stuck]
    return (
        f"not linearizable: after {depth} operations in order, nothing explains the "
        f"{op.kind} of {op.value} by client {op.client} (node {op.node}) in "
        f"[{op.call:.3f}, {op.ret:.3f}] (initial value {initial})"
    )
