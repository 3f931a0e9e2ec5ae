"""The pure group machine replays seed 002's phases: JOINGROUP (member ids,
the first joiner leads, the protocol by votes, only the leader gets the members),
SYNCGROUP (the leader's assignment stored, then handed out), HEARTBEAT (sessions,
REBALANCE_IN_PROGRESS, a silent member removed) and the offset rules."""

from __future__ import annotations

import itertools

import pytest
from kio.schema.errors import ErrorCode

from broker_agent.groups import records as rec
from broker_agent.groups.machine import (
    PARKED,
    Completed,
    GroupConfig,
    GroupMachine,
    JoinAnswer,
    Outcome,
    SyncAnswer,
    Write,
    elect_protocol,
)
from broker_agent.groups.state import GroupState, IllegalTransition, check_transition

SESSION = 10_000
REBALANCE = 30_000
G = "orders"


DELAY = 100  # group.initial.rebalance.delay.ms in these tests


def machine(delay: int = DELAY) -> GroupMachine:
    counter = itertools.count(1)
    return GroupMachine(
        GroupConfig(initial_rebalance_delay_ms=delay),
        member_ids=lambda client: f"{client}-{next(counter):04d}",
    )


def join(
    m: GroupMachine,
    member: str = "",
    *,
    client: str = "c",
    protocols: list[tuple[str, bytes]] | None = None,
    now: int = 0,
    instance: str | None = None,
    session: int = SESSION,
    require_known: bool = True,
) -> Outcome:
    return m.join(
        G,
        member,
        instance,
        client,
        "/127.0.0.1",
        session,
        REBALANCE,
        "consumer",
        protocols or [("range", b"r-" + client.encode())],
        require_known,
        now,
    )


def answers(effects: tuple[object, ...] | list[object]) -> dict[tuple[str, str], object]:
    """Completions by (member, kind), including those waiting on a Write."""
    out: dict[tuple[str, str], object] = {}
    for e in effects:
        if isinstance(e, Completed):
            out[(e.member_id, e.kind)] = e.answer
        elif isinstance(e, Write):
            for c in e.then:
                out[(c.member_id, c.kind)] = c.answer
    return out


def first_join(m: GroupMachine, client: str, now: int = 0, **kw: object) -> tuple[str, Outcome]:
    """KIP-394: the first JoinGroup gets MEMBER_ID_REQUIRED and an id; the second parks."""
    required = join(m, client=client, now=now, **kw)  # type: ignore[arg-type]
    assert isinstance(required.answer, JoinAnswer)
    assert required.answer.error is ErrorCode.member_id_required
    member_id = required.answer.member_id
    return member_id, join(m, member_id, client=client, now=now, **kw)  # type: ignore[arg-type]


def stable_group(m: GroupMachine, clients: list[str]) -> list[str]:
    """Everyone joins at t=0, the join completes after the initial delay, the
    leader syncs at DELAY: Stable."""
    ids = [first_join(m, c)[0] for c in clients]
    done = answers(m.tick(DELAY))
    assert all(isinstance(done[(i, "join")], JoinAnswer) for i in ids)
    leader = ids[0]
    gen = m.groups[G].generation
    for i in ids[1:]:
        assert m.sync(G, i, None, gen, "consumer", "range", {}, DELAY).answer is PARKED
    out = m.sync(G, leader, None, gen, "consumer", "range", {i: i.encode() for i in ids}, DELAY)
    assert m.groups[G].state is GroupState.STABLE
    assert len(answers(out.effects)) == len(ids)
    return ids


# ---------------------------------------------------------------- JOINGROUP


def test_first_join_requires_a_member_id_of_client_id_and_a_uuid() -> None:
    m = GroupMachine(GroupConfig(initial_rebalance_delay_ms=0))
    out = join(m, client="rdkafka")
    assert isinstance(out.answer, JoinAnswer)
    assert out.answer.error is ErrorCode.member_id_required
    client, _, rest = out.answer.member_id.partition("-")
    assert client == "rdkafka" and len(rest) == 36 and rest.count("-") == 4
    # Nothing joined yet: the group is not rebalancing for a member that may never return.
    assert m.groups[G].state is GroupState.EMPTY and not m.groups[G].members


def test_old_clients_without_kip_394_join_at_once() -> None:
    m = machine()
    out = join(m, client="old", require_known=False)
    assert out.answer is PARKED and not out.effects
    out = Outcome(PARKED, tuple(m.tick(DELAY)), out.parked_member)
    done = answers(out.effects)
    assert done[(out.parked_member, "join")].error is ErrorCode.none  # type: ignore[union-attr]


def test_first_joiner_leads_and_only_the_leader_gets_the_member_list() -> None:
    m = machine(delay=3000)
    a, out_a = first_join(m, "a", now=0)
    b, out_b = first_join(m, "b", now=100)
    assert out_a.answer is PARKED and out_b.answer is PARKED
    assert not answers(out_a.effects) and not answers(out_b.effects)  # the initial delay
    assert not m.tick(3000)  # b's join at 100 pushed the initial delay to 3100
    done = answers(m.tick(3100))
    la, lb = done[(a, "join")], done[(b, "join")]
    assert isinstance(la, JoinAnswer) and isinstance(lb, JoinAnswer)
    assert la.leader == lb.leader == a
    assert [mid for mid, _, _ in la.members] == [a, b]
    assert dict((mid, meta) for mid, _, meta in la.members) == {a: b"r-a", b: b"r-b"}
    assert lb.members == ()
    assert la.generation == lb.generation == 1
    assert m.groups[G].state is GroupState.COMPLETING_REBALANCE


def test_protocol_elected_by_votes_not_by_the_leader() -> None:
    m = machine(delay=1000)
    first_join(m, "a", protocols=[("roundrobin", b""), ("range", b"")])
    first_join(m, "b", protocols=[("range", b""), ("roundrobin", b"")])
    first_join(m, "c", protocols=[("range", b""), ("roundrobin", b""), ("sticky", b"")])
    done = answers(m.tick(1000))
    protocols = {a.protocol for a in done.values()}  # type: ignore[union-attr]
    assert protocols == {"range"}  # two votes to one, though the leader prefers roundrobin


def test_vote_ignores_protocols_not_every_member_supports() -> None:
    m = machine(delay=1000)
    first_join(m, "a", protocols=[("sticky", b""), ("range", b"")])
    first_join(m, "b", protocols=[("range", b"")])
    group = m.groups[G]
    group.leader = next(iter(group.members))
    assert elect_protocol(group) == "range"


def test_a_member_supporting_none_of_the_groups_protocols_is_refused() -> None:
    m = machine()
    stable_group(m, ["a"])
    out = join(m, client="x", protocols=[("cooperative-sticky", b"")])
    assert isinstance(out.answer, JoinAnswer)
    assert out.answer.error is ErrorCode.inconsistent_group_protocol
    assert len(m.groups[G].members) == 1 and not m.groups[G].pending


def test_group_protocols_follow_members_that_leave_or_change_theirs() -> None:
    """The protocols every member supports are counted as members come, go and
    rejoin with other protocols (not recomputed from every member on each join)."""
    m = machine()
    a, b = stable_group(m, ["a", "b"])  # both support only range
    refused = join(m, client="c", protocols=[("roundrobin", b"")], now=DELAY)
    assert refused.answer.error is ErrorCode.inconsistent_group_protocol  # type: ignore[attr-defined]
    join(m, b, client="b", protocols=[("range", b""), ("roundrobin", b"")], now=DELAY)
    assert m.groups[G].candidate_protocols() == {"range"}
    m.leave(G, [(a, None)], DELAY)
    assert m.groups[G].candidate_protocols() == {"range", "roundrobin"}
    c, _ = first_join(m, "c", now=DELAY, protocols=[("roundrobin", b"")])
    assert set(m.groups[G].members) == {b, c}
    assert m.groups[G].candidate_protocols() == {"roundrobin"}
    m.leave(G, [(b, None), (c, None)], DELAY)
    assert m.groups[G].candidate_protocols() == set() and not m.groups[G].protocol_support


def test_session_timeout_outside_the_bounds_is_refused() -> None:
    m = machine()
    for session in (5_999, 1_800_001):
        out = join(m, client="x", session=session)
        assert out.answer.error is ErrorCode.invalid_session_timeout  # type: ignore[union-attr]
    assert G not in m.groups


def test_empty_group_id_and_unknown_member_are_refused() -> None:
    m = machine()
    out = m.join("", "", None, "c", "h", SESSION, REBALANCE, "consumer", [("r", b"")], True, 0)
    assert out.answer.error is ErrorCode.invalid_group_id  # type: ignore[union-attr]
    assert join(m, "ghost-1").answer.error is ErrorCode.unknown_member_id  # type: ignore[union-attr]
    assert not m.groups


def test_huge_member_metadata_is_refused() -> None:
    m = machine()
    out = join(m, client="x", protocols=[("range", b"x" * (1024 * 1024 + 1))])
    assert out.answer.error is ErrorCode.invalid_request  # type: ignore[union-attr]
    assert G not in m.groups


def test_rebalance_timeout_bounds_the_join_phase() -> None:
    m = machine()
    a, b = stable_group(m, ["a", "b"])
    c, out = first_join(m, "c", now=1000)  # a rebalance; a rejoins, b never does
    assert out.answer is PARKED
    assert m.heartbeat(G, a, None, 1, 1001) is ErrorCode.rebalance_in_progress
    join(m, a, client="a", now=1002)
    # b keeps its session alive with heartbeats but never rejoins
    for t in range(2000, 1000 + REBALANCE, 2000):
        assert m.heartbeat(G, b, None, 1, t) is ErrorCode.rebalance_in_progress
        assert not answers(m.tick(t))
    done = answers(m.tick(1000 + REBALANCE))
    assert set(done) == {(a, "join"), (c, "join")}
    assert b not in m.groups[G].members and m.groups[G].generation == 2


# ---------------------------------------------------------------- SYNCGROUP


def test_leaders_assignment_is_written_then_handed_to_every_member() -> None:
    m = machine()
    a, _ = first_join(m, "a")
    b, _ = first_join(m, "b")
    m.tick(DELAY)
    assert m.groups[G].state is GroupState.COMPLETING_REBALANCE
    assert m.sync(G, b, None, 1, "consumer", "range", {}, 5).answer is PARKED
    out = m.sync(G, a, None, 1, "consumer", "range", {a: b"A", b: b"B"}, 6)
    assert out.answer is PARKED
    [write] = out.effects
    assert isinstance(write, Write) and write.generation == 1
    [(key, value)] = write.records
    assert rec.parse_key(key) == rec.GroupKey(G)
    assert value is not None
    stored = rec.parse_group_value(value)
    assert stored.generation == 1 and stored.leader == a and stored.protocol == "range"
    assert [(x.member_id, x.assignment) for x in stored.members] == [(a, b"A"), (b, b"B")]
    handed = {c.member_id: c.answer.assignment for c in write.then}  # type: ignore[union-attr]
    assert handed == {a: b"A", b: b"B"}
    late = m.sync(G, b, None, 1, "consumer", "range", {}, 7)
    assert late.answer == SyncAnswer(ErrorCode.none, "consumer", "range", b"B")


def test_sync_errors() -> None:
    m = machine()
    a, _b = stable_group(m, ["a", "b"])
    assert (
        m.sync(G, "nobody", None, 1, None, None, {}, 2).answer.error is ErrorCode.unknown_member_id
    )  # type: ignore[union-attr]
    assert m.sync(G, a, None, 7, None, None, {}, 2).answer.error is ErrorCode.illegal_generation  # type: ignore[union-attr]
    bad = m.sync(G, a, None, 1, "consumer", "roundrobin", {}, 2)
    assert bad.answer.error is ErrorCode.inconsistent_group_protocol  # type: ignore[union-attr]


def test_failed_assignment_write_makes_the_group_rebalance() -> None:
    m = machine()
    _a, b = stable_group(m, ["a", "b"])
    m.store_failed(G, 1, 10)
    assert m.groups[G].state is GroupState.PREPARING_REBALANCE
    assert m.heartbeat(G, b, None, 1, 11) is ErrorCode.rebalance_in_progress


# ---------------------------------------------------------------- HEARTBEAT


def test_silent_member_is_removed_and_the_group_rebalances() -> None:
    m = machine()
    a, b = stable_group(m, ["a", "b"])
    for t in range(2000, SESSION + 2000, 2000):
        assert m.heartbeat(G, a, None, 1, t) is ErrorCode.none
    m.tick(DELAY + SESSION)  # b never heartbeat after the sync at DELAY
    group = m.groups[G]
    assert b not in group.members and group.state is GroupState.PREPARING_REBALANCE
    assert m.heartbeat(G, a, None, 1, DELAY + SESSION + 1) is ErrorCode.rebalance_in_progress
    out = join(m, a, client="a", now=DELAY + SESSION + 2)
    done = answers(out.effects)
    assert done[(a, "join")].generation == 2  # type: ignore[union-attr]


def test_heartbeat_errors() -> None:
    m = machine()
    a, _ = stable_group(m, ["a", "b"])
    assert m.heartbeat(G, "ghost", None, 1, 5) is ErrorCode.unknown_member_id
    assert m.heartbeat(G, a, None, 0, 5) is ErrorCode.illegal_generation
    assert m.heartbeat("other", a, None, 1, 5) is ErrorCode.unknown_member_id
    assert m.heartbeat("", a, None, 1, 5) is ErrorCode.invalid_group_id


# ---------------------------------------------------------------- LeaveGroup


def test_leader_leaves_and_a_new_leader_is_chosen() -> None:
    m = machine()
    a, b, c = stable_group(m, ["a", "b", "c"])
    top, errors, _ = m.leave(G, [(a, None)], 10)
    assert top is ErrorCode.none and errors == [ErrorCode.none]
    assert m.groups[G].leader == b
    join(m, b, client="b", now=11)
    done = answers(join(m, c, client="c", now=12).effects)
    assert done[(b, "join")].leader == b and done[(c, "join")].leader == b  # type: ignore[union-attr]
    assert {x for x, _, _ in done[(b, "join")].members} == {b, c}  # type: ignore[union-attr]


def test_last_member_leaving_empties_the_group_and_bumps_the_generation() -> None:
    m = machine()
    [a] = stable_group(m, ["a"])
    _, _, effects = m.leave(G, [(a, None)], 10)
    assert m.groups[G].state is GroupState.EMPTY and m.groups[G].generation == 2
    assert any(isinstance(e, Write) for e in effects)
    assert m.leave(G, [("ghost", None)], 11)[0] is ErrorCode.unknown_member_id


# ------------------------------------------------------------ static members


def test_static_member_restart_takes_its_place_without_a_rebalance() -> None:
    m = machine(delay=0)
    a, _ = (
        m.join(
            G, "", "inst-a", "a", "h", SESSION, REBALANCE, "consumer", [("range", b"")], True, 0
        ).parked_member,
        None,
    )
    gen = m.groups[G].generation
    m.sync(G, a, "inst-a", gen, None, None, {a: b"A"}, 1)
    assert m.groups[G].state is GroupState.STABLE
    again = m.join(
        G, "", "inst-a", "a", "h", SESSION, REBALANCE, "consumer", [("range", b"")], True, 5
    )
    assert isinstance(again.answer, JoinAnswer) and again.answer.error is ErrorCode.none
    new_id = again.answer.member_id
    assert new_id != a and m.groups[G].state is GroupState.STABLE
    assert m.groups[G].generation == gen
    # the old incarnation is fenced
    assert m.heartbeat(G, a, "inst-a", gen, 6) is ErrorCode.fenced_instance_id
    plan = m.commit(G, a, "inst-a", gen, [("t", 0, 5, -1, None)], 6)
    assert plan.error is ErrorCode.fenced_instance_id and not plan.records
    sync = m.sync(G, new_id, "inst-a", gen, None, None, {}, 7)
    assert sync.answer.assignment == b"A"  # type: ignore[union-attr]


# ------------------------------------------------------------------- offsets


def test_commit_checks_generation_and_member_and_changes_nothing_when_refused() -> None:
    m = machine()
    a, _b = stable_group(m, ["a", "b"])
    ok = m.commit(G, a, None, 1, [("t", 0, 42, 3, "meta")], 10)
    assert ok.error is ErrorCode.none and ok.partition_errors == {("t", 0): ErrorCode.none}
    [(key, value)] = ok.records
    assert rec.parse_key(key) == rec.OffsetKey(G, "t", 0)
    assert value is not None
    assert rec.parse_offset_value(value) == rec.OffsetValue(42, 3, "meta", 10)
    m.apply(G, ok.accepted)
    stale = m.commit(G, a, None, 0, [("t", 0, 99, 3, None)], 11)
    assert stale.error is ErrorCode.illegal_generation and not stale.records
    ghost = m.commit(G, "ghost", None, 1, [("t", 0, 99, 3, None)], 11)
    assert ghost.error is ErrorCode.unknown_member_id and not ghost.records
    assert m.fetch_offsets(G, [("t", 0)])[("t", 0)].offset == 42  # type: ignore[union-attr]
    assert m.fetch_offsets(G, [("t", 1)]) == {("t", 1): None}


def test_commit_during_completing_rebalance_is_refused() -> None:
    m = machine(delay=0)
    a, _ = first_join(m, "a")
    assert m.groups[G].state is GroupState.COMPLETING_REBALANCE
    plan = m.commit(G, a, None, 1, [("t", 0, 1, -1, None)], 5)
    assert plan.error is ErrorCode.rebalance_in_progress


def test_standalone_commit_creates_an_empty_group() -> None:
    m = machine()
    plan = m.commit(G, "", None, -1, [("t", 0, 7, -1, None)], 5)
    assert plan.error is ErrorCode.none
    m.apply(G, plan.accepted)
    assert m.groups[G].state is GroupState.EMPTY
    assert m.fetch_offsets(G, None)[("t", 0)].offset == 7  # type: ignore[union-attr]


def test_too_large_metadata_is_refused_per_partition() -> None:
    m = machine()
    plan = m.commit(G, "", None, -1, [("t", 0, 7, -1, "x" * 5000), ("t", 1, 8, -1, "")], 5)
    assert plan.partition_errors == {
        ("t", 0): ErrorCode.offset_metadata_too_large,
        ("t", 1): ErrorCode.none,
    }
    assert len(plan.records) == 1


def test_delete_group_only_when_empty_and_writes_tombstones() -> None:
    m = machine()
    [a] = stable_group(m, ["a"])
    m.apply(G, m.commit(G, a, None, 1, [("t", 0, 1, -1, None)], 5).accepted)
    assert m.delete_group(G, 6)[0] is ErrorCode.non_empty_group
    m.leave(G, [(a, None)], 7)
    error, [write] = m.delete_group(G, 8)
    assert error is ErrorCode.none and isinstance(write, Write)
    assert all(v is None for _, v in write.records)
    assert {type(rec.parse_key(k)) for k, _ in write.records} == {rec.OffsetKey, rec.GroupKey}
    assert G not in m.groups
    assert m.delete_group(G, 9)[0] is ErrorCode.group_id_not_found


def test_offset_delete_refused_for_subscribed_topics() -> None:
    m = machine()
    [a] = stable_group(m, ["a"])
    m.apply(G, m.commit(G, a, None, 1, [("t", 0, 1, -1, None), ("u", 0, 2, -1, None)], 5).accepted)
    _error, errors, _effects = m.delete_offsets(G, [("t", 0), ("u", 0)], lambda g: {"t"})
    assert errors == {("t", 0): ErrorCode.group_subscribed_to_topic, ("u", 0): ErrorCode.none}
    assert m.fetch_offsets(G, None).keys() == {("t", 0)}


def test_offsets_of_an_empty_group_expire_after_retention() -> None:
    m = GroupMachine(GroupConfig(initial_rebalance_delay_ms=0, offsets_retention_ms=1000))
    m.apply(G, m.commit(G, "", None, -1, [("t", 0, 1, -1, None)], 0).accepted)
    assert not m.tick(500)
    [write] = m.tick(1000)
    assert isinstance(write, Write) and write.records[0][1] is None
    assert m.fetch_offsets(G, None) == {}


# ------------------------------------------------------------------ loading


def test_load_replays_the_partition_log() -> None:
    m = machine()
    a, b = stable_group(m, ["a", "b"])
    log: list[tuple[bytes, bytes | None]] = []
    log.append(m._group_record(m.groups[G], 50))
    for offset in (5, 9):
        plan = m.commit(G, a, None, 1, [("t", 0, offset, 2, "")], 60)
        log += plan.records
    log.append((rec.offset_key("gone", "t", 0), rec.offset_value(rec.OffsetValue(1, -1, "", 1))))
    log.append((rec.group_key("gone"), None))
    log.append((rec.offset_key("gone", "t", 0), None))
    log.append((b"\x00\x07junk", b"junk"))
    fresh = machine()
    assert fresh.load(log, 1000) == 1
    group = fresh.groups[G]
    assert group.state is GroupState.STABLE and group.generation == 1 and group.leader == a
    assert list(group.members) == [a, b] and group.members[b].assignment == b.encode()
    assert group.offsets[("t", 0)].offset == 9
    assert "gone" not in fresh.groups
    # loaded members keep their session from the load time
    assert fresh.heartbeat(G, b, None, 1, 1000 + SESSION - 1) is ErrorCode.none
    assert not fresh.tick(1000 + SESSION - 1)


def test_unload_answers_parked_requests_with_not_coordinator() -> None:
    m = machine(delay=5000)
    _a, _ = first_join(m, "a")
    [done] = m.unload([G], 10)
    assert isinstance(done, Completed) and done.answer.error is ErrorCode.not_coordinator
    assert G not in m.groups


def test_transition_table_is_enforced() -> None:
    check_transition(GroupState.EMPTY, GroupState.PREPARING_REBALANCE)
    with pytest.raises(IllegalTransition):
        check_transition(GroupState.EMPTY, GroupState.STABLE)
    with pytest.raises(IllegalTransition):
        check_transition(GroupState.STABLE, GroupState.COMPLETING_REBALANCE)
