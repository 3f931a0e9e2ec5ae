"""The checkers pass correct histories and catch each planted bug.

A checker that cannot fail proves nothing, so every rule is shown failing on a
history with exactly that bug in it (the scenario tests also plant one in a real
run: reads served by a partitioned old leader).
"""

from __future__ import annotations

import random

from checkers import (
    FAIL,
    INFO,
    OK,
    Append,
    CommittedLog,
    RegisterOp,
    check_acknowledged,
    check_linearizable,
)


def w(client: int, value: int, call: float, ret: float | None) -> RegisterOp:
    return RegisterOp(client, "write", value, call, ret)


def r(client: int, value: int, call: float, ret: float) -> RegisterOp:
    return RegisterOp(client, "read", value, call, ret)


# ------------------------------------------------------------- linearizability


def test_sequential_history_is_linearizable() -> None:
    history = [w(1, 1, 0, 1), r(2, 1, 2, 3), w(2, 2, 4, 5), r(1, 2, 6, 7)]
    assert check_linearizable(history, initial=0).ok


def test_stale_read_after_a_completed_write_is_caught() -> None:
    # the planted bug: a partitioned old leader answers from its image
    history = [w(1, 1, 0, 1), r(2, 0, 2, 3)]
    verdict = check_linearizable(history, initial=0)
    assert not verdict.ok
    assert "the read of 0 by client 2" in verdict.message, verdict.message


def test_concurrent_read_may_see_either_value() -> None:
    for seen in (0, 1):
        assert check_linearizable([w(1, 1, 0, 10), r(2, seen, 1, 2)], initial=0).ok


def test_reads_must_agree_on_one_order() -> None:
    # two writes concurrent with everything; one reader sees 1 then 2, the other 2 then 1
    history = [
        w(1, 1, 0, 10), w(2, 2, 0, 10),
        r(3, 1, 1, 2), r(3, 2, 3, 4),
        r(4, 2, 1, 2), r(4, 1, 3, 4),
    ]  # fmt: skip
    assert not check_linearizable(history, initial=0).ok


def test_a_write_in_doubt_may_or_may_not_take_effect() -> None:
    took = [w(1, 5, 0, None), r(2, 5, 3, 4), r(2, 5, 5, 6)]
    assert check_linearizable(took, initial=0).ok
    never = [w(1, 5, 0, None), r(2, 0, 3, 4)]
    assert check_linearizable(never, initial=0).ok
    # but once seen it cannot be unseen
    flip = [w(1, 5, 0, None), r(2, 5, 3, 4), r(2, 0, 5, 6)]
    assert not check_linearizable(flip, initial=0).ok


def test_read_of_a_value_nobody_wrote_is_caught() -> None:
    assert not check_linearizable([w(1, 1, 0, 1), r(2, 7, 2, 3)], initial=0).ok


def test_lost_acknowledged_write_is_caught() -> None:
    # 2 was acknowledged after 1, yet a later read returns 1
    history = [w(1, 1, 0, 1), w(2, 2, 2, 3), r(3, 1, 4, 5)]
    assert not check_linearizable(history, initial=0).ok


def random_history(seed: int, clients: int = 4, ops: int = 60) -> list[RegisterOp]:
    """A linearizable history by construction: a real register, each operation
    taking effect at a random instant inside its own interval."""
    rng = random.Random(seed)
    events = []
    clock = [0.0] * clients
    value = 0
    points = []
    for k in range(ops):
        c = rng.randrange(clients)
        call = clock[c] + rng.random()
        point = call + rng.random()
        ret = point + rng.random()
        clock[c] = ret
        points.append((point, c, call, ret, k))
    for _point, c, call, ret, k in sorted(points):
        if rng.random() < 0.5:
            value = k + 1
            events.append(w(c, value, call, ret if rng.random() > 0.1 else None))
        else:
            events.append(r(c, value, call, ret))
    return events


def test_random_linearizable_histories_pass_and_planted_stale_reads_fail() -> None:
    for seed in range(40):
        history = random_history(seed)
        assert check_linearizable(history, initial=0).ok, seed
        # plant: one read, well after a later write finished, returns an older value
        writes = sorted(
            (op for op in history if op.kind == "write" and op.ret), key=lambda o: o.ret
        )
        if len(writes) < 2:
            continue
        last = writes[-1]
        stale = r(99, writes[0].value, last.ret + 1, last.ret + 2)  # type: ignore[operator]
        planted = [*history, stale]
        if writes[0].value != last.value:
            assert not check_linearizable(planted, initial=0).ok, seed


# ---------------------------------------------------------- acknowledged writes


def log_of(node: int, payloads: list[bytes | None], start: int = 0) -> CommittedLog:
    return CommittedLog(node, start, start + len(payloads), dict(enumerate(payloads, start)))


HISTORY = [
    Append(b"a", 0.0, 1.0, OK, 1, 1),
    Append(b"b", 1.5, 2.0, OK, 2, 1),
    Append(b"x", 2.5, 3.0, FAIL, None, 2),
    Append(b"c", 3.5, None, INFO, None, 1),
]


def test_correct_logs_pass() -> None:
    logs = [log_of(n, [None, b"a", b"b", b"c"]) for n in (1, 2, 3)]
    assert check_acknowledged(HISTORY, logs) == []
    # a write in doubt may also be absent
    assert check_acknowledged(HISTORY, [log_of(n, [None, b"a", b"b"]) for n in (1, 2, 3)]) == []


def test_lost_acknowledged_write_is_caught_per_node() -> None:
    logs = [log_of(1, [None, b"a", b"b"]), log_of(2, [None, b"a", None]), log_of(3, [None, b"a"])]
    problems = check_acknowledged(HISTORY, logs)
    assert any("node 2: acknowledged b'b' at offset 2 is missing" in p for p in problems)
    assert any("nodes 1 and 2 differ at committed offset 2" in p for p in problems)
    assert not any("node 3" in p for p in problems)  # offset 2 is not committed on node 3


def test_refused_write_that_appears_is_caught() -> None:
    logs = [log_of(n, [None, b"a", b"b", b"x"]) for n in (1, 2, 3)]
    problems = check_acknowledged(HISTORY, logs)
    assert len(problems) == 3 and all("definite error" in p for p in problems)


def test_acknowledgement_order_is_checked() -> None:
    history = [Append(b"a", 0.0, 1.0, OK, 2, 1), Append(b"b", 1.5, 2.0, OK, 1, 1)]
    logs = [log_of(1, [None, b"b", b"a"])]
    problems = check_acknowledged(history, logs)
    assert any("before b'a'" in p for p in problems), problems


def test_log_start_limits_what_a_node_is_asked_for() -> None:
    # node 3 restored from a snapshot covering offsets below 2
    logs = [log_of(1, [None, b"a", b"b"]), log_of(3, [b"b"], start=2)]
    assert check_acknowledged(HISTORY, logs) == []


def brute_force(history: list[RegisterOp], initial: int) -> bool:
    """Every order of every subset of the writes in doubt: the definition itself."""
    import itertools

    ops = [op for op in history if op.kind == "write" or op.ret is not None]
    done = [op for op in ops if op.ret is not None]
    doubt = [op for op in ops if op.ret is None]
    for k in range(len(doubt) + 1):
        for chosen in itertools.combinations(doubt, k):
            for order in itertools.permutations(done + list(chosen)):
                if any(
                    b.ret is not None and b.ret < a.call
                    for i, a in enumerate(order)
                    for b in order[i + 1 :]
                ):
                    continue  # b finished before a began, yet comes after it
                value, legal = initial, True
                for op in order:
                    if op.kind == "write":
                        value = op.value
                    elif op.value != value:
                        legal = False
                        break
                if legal:
                    return True
    return False


def test_checker_agrees_with_brute_force_on_small_random_histories() -> None:
    rng = random.Random(7)
    for _ in range(600):
        history = []
        for i in range(rng.randint(1, 5)):
            call = rng.uniform(0, 10)
            ret = call + rng.uniform(0, 4)
            if rng.random() < 0.5:
                history.append(w(i, rng.randint(1, 3), call, None if rng.random() < 0.25 else ret))
            else:
                history.append(r(i, rng.randint(0, 3), call, ret))
        assert check_linearizable(history, 0).ok == brute_force(history, 0), history
