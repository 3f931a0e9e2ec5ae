"""The classic group protocol as a pure machine: requests and time in, answers,
parked-request completions and `__consumer_offsets` records out (seed 002).

No I/O and no clock: every call takes `now` (ms). A JoinGroup or SyncGroup that
must wait for the rest of the group is *parked* (the call returns `PARKED`);
its answer comes later as a `Completed` effect of some other call or `tick`.
Writes are `Write` effects carrying the records and the completions to deliver
only once the records are stored (persist before send, as etcd's Ready does).
The driver (`coordinator.py`) executes effects in order.

Seed 002's phases, as this machine sees them:
  JOINGROUP  the first join of a dynamic member gets MEMBER_ID_REQUIRED and a
             member id `client_id-UUID` (KIP-394); the first member leads; the
             protocol is elected by votes; only the leader gets the members.
  SYNCGROUP  the leader's assignment is stored, then handed to every member.
  HEARTBEAT  keeps a member within `session.timeout.ms`; REBALANCE_IN_PROGRESS
             tells it to rejoin; a silent member is removed and a rebalance starts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from kio.schema.errors import ErrorCode

from broker_agent.groups.effects import (
    NO_GENERATION,
    PARKED,
    UNKNOWN_MEMBER_ID,
    CommitPlan,
    Completed,
    Effect,
    JoinAnswer,
    Outcome,
    SyncAnswer,
    Write,
    new_member_id,
)
from broker_agent.groups.group import Group, GroupConfig, Member, elect_protocol
from broker_agent.groups.offsets import GroupOffsets
from broker_agent.groups.state import GroupState

__all__ = [
    "NO_GENERATION",
    "PARKED",
    "UNKNOWN_MEMBER_ID",
    "CommitPlan",
    "Completed",
    "GroupConfig",
    "GroupMachine",
    "JoinAnswer",
    "Outcome",
    "SyncAnswer",
    "Write",
    "elect_protocol",
]


# --------------------------------------------------------------- the machine


class GroupMachine(GroupOffsets):
    """Every group of the offsets partitions this broker leads and has loaded:
    the membership protocol here, their offsets and records in `GroupOffsets`."""

    def __init__(
        self,
        config: GroupConfig | None = None,
        member_ids: Callable[[str], str] = new_member_id,
    ) -> None:
        super().__init__(config)
        self.member_ids = member_ids
        self.rebalances = 0  # started
        # Told how long each finished rebalance took, in ms (the metrics).
        self.on_rebalance_done: Callable[[int], None] | None = None

    # ---------------------------------------------------------------- join

    def join(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        require_known_member_id: bool,
        now: int,
    ) -> Outcome:
        if not group_id:
            return Outcome(JoinAnswer(ErrorCode.invalid_group_id, member_id))
        if not (
            self.config.min_session_timeout_ms
            <= session_timeout_ms
            <= self.config.max_session_timeout_ms
        ):
            return Outcome(JoinAnswer(ErrorCode.invalid_session_timeout, member_id))
        if rebalance_timeout_ms < 0:
            rebalance_timeout_ms = session_timeout_ms  # v0 had none
        if sum(len(d) for _, d in protocols) > self.config.max_metadata_bytes:
            return Outcome(JoinAnswer(ErrorCode.invalid_request, member_id))
        if len({name for name, _ in protocols}) != len(protocols):
            return Outcome(JoinAnswer(ErrorCode.inconsistent_group_protocol, member_id))
        group = self.groups.get(group_id)
        if group is None:
            if member_id != UNKNOWN_MEMBER_ID:
                return Outcome(JoinAnswer(ErrorCode.unknown_member_id, member_id))
            group = self.groups[group_id] = Group(group_id, state_timestamp=now)
        if group.state is GroupState.DEAD:
            return Outcome(JoinAnswer(ErrorCode.coordinator_not_available, member_id))
        if not group.supports(protocol_type, protocols):
            return Outcome(JoinAnswer(ErrorCode.inconsistent_group_protocol, member_id))

        def new(mid: str) -> Member:
            return Member(
                mid,
                group_instance_id,
                client_id,
                client_host,
                rebalance_timeout_ms,
                session_timeout_ms,
                protocol_type,
                list(protocols),
            )

        if member_id == UNKNOWN_MEMBER_ID:
            if len(group.members) + len(group.pending) >= self.config.max_size:
                return Outcome(JoinAnswer(ErrorCode.group_max_size_reached, member_id))
            if group_instance_id is not None:
                return self._static_join(group, new(""), now)
            mid = self.member_ids(client_id)
            if require_known_member_id:
                group.pending[mid] = now + session_timeout_ms
                return Outcome(JoinAnswer(ErrorCode.member_id_required, mid))
            return self._add_and_rebalance(group, new(mid), now)

        if member_id in group.pending:
            del group.pending[member_id]
            return self._add_and_rebalance(group, new(member_id), now)
        member = group.members.get(member_id)
        if member is None:
            return Outcome(JoinAnswer(ErrorCode.unknown_member_id, member_id))
        if group_instance_id is not None and group.static.get(group_instance_id) != member_id:
            return Outcome(JoinAnswer(ErrorCode.fenced_instance_id, member_id))
        same = member.protocols == list(protocols)
        member.client_host, member.client_id = client_host, client_id
        member.session_timeout_ms = session_timeout_ms
        member.rebalance_timeout_ms = rebalance_timeout_ms
        if group.state is GroupState.COMPLETING_REBALANCE and same:
            return Outcome(self._join_answer(group, member))  # a resend: same answer
        if group.state is GroupState.STABLE and same and group.leader != member_id:
            return Outcome(self._join_answer(group, member))
        group.set_protocols(member, list(protocols))
        return self._update_and_rebalance(group, member, now)

    def _static_join(self, group: Group, member: Member, now: int) -> Outcome:
        """KIP-345: a known `group.instance.id` takes its old member's place (which
        is fenced) without a rebalance when nothing changed; a new one joins."""
        instance = member.group_instance_id
        assert instance is not None
        member.member_id = self.member_ids(member.client_id)
        old_id = group.static.get(instance)
        if old_id is None or old_id not in group.members:
            group.static[instance] = member.member_id
            return self._add_and_rebalance(group, member, now)
        old = group.remove(old_id)
        effects: list[Effect] = []
        if old.awaiting_join:
            effects.append(
                Completed(
                    group.group_id, old_id, "join", JoinAnswer(ErrorCode.fenced_instance_id, old_id)
                )
            )
        if old.awaiting_sync:
            effects.append(
                Completed(group.group_id, old_id, "sync", SyncAnswer(ErrorCode.fenced_instance_id))
            )
        member.assignment = old.assignment
        group.add(member)
        group.static[instance] = member.member_id
        if group.leader == old_id:
            group.leader = member.member_id
        group.pending_sync.discard(old_id)
        if group.state is GroupState.STABLE and old.protocols == member.protocols:
            member.heartbeat_deadline = now + member.session_timeout_ms
            answer = self._join_answer(group, member)
            if group.leader == member.member_id:
                answer = _replace_answer(answer, skip_assignment=True)
            write = Write(group.group_id, (self._group_record(group, now),))
            return Outcome(answer, (*effects, write))
        outcome = self._update_and_rebalance(group, member, now)
        return Outcome(outcome.answer, (*effects, *outcome.effects), outcome.parked_member)

    def _add_and_rebalance(self, group: Group, member: Member, now: int) -> Outcome:
        if not group.members:
            group.protocol_type = member.protocol_type
        member.awaiting_join = True
        member.heartbeat_deadline = now + member.session_timeout_ms
        group.add(member)
        if member.group_instance_id is not None:
            group.static[member.group_instance_id] = member.member_id
        group.choose_leader()
        effects = self._prepare_rebalance(group, now, extend_delay=True, joiner=member)
        effects += self._try_complete_join(group, now)
        return Outcome(PARKED, tuple(effects), member.member_id)

    def _update_and_rebalance(self, group: Group, member: Member, now: int) -> Outcome:
        member.awaiting_join = True
        member.awaiting_sync = False
        effects = self._prepare_rebalance(group, now, extend_delay=False, joiner=member)
        effects += self._try_complete_join(group, now)
        return Outcome(PARKED, tuple(effects), member.member_id)

    def _prepare_rebalance(
        self, group: Group, now: int, extend_delay: bool, joiner: Member | None = None
    ) -> list[Effect]:
        effects: list[Effect] = []
        if group.state is GroupState.PREPARING_REBALANCE:
            # The members there when the phase began, and each joiner since, are in
            # the deadline already: only this joiner can raise it (no pass over all).
            if joiner is not None:
                end = group.rebalance_started + joiner.rebalance_timeout_ms
                group.join_deadline = max(group.join_deadline, end)
            if extend_delay and group.delay_until > now:
                delay = self.config.initial_rebalance_delay_ms
                group.delay_until = min(now + delay, group.join_deadline)
            return effects
        timeout = max((m.rebalance_timeout_ms for m in group.members.values()), default=0)
        if group.state is GroupState.COMPLETING_REBALANCE:
            # Members waiting for an assignment that will not come: rejoin.
            for m in group.members.values():
                if m.awaiting_sync:
                    m.awaiting_sync = False
                    effects.append(
                        Completed(
                            group.group_id,
                            m.member_id,
                            "sync",
                            SyncAnswer(ErrorCode.rebalance_in_progress),
                        )
                    )
        was_empty = group.state is GroupState.EMPTY
        group.transition(GroupState.PREPARING_REBALANCE, now)
        group.rebalance_started = now
        group.join_deadline = now + timeout
        group.delay_until = (
            now + min(self.config.initial_rebalance_delay_ms, timeout) if was_empty else now
        )
        group.pending_sync.clear()
        self.rebalances += 1
        return effects

    def _try_complete_join(self, group: Group, now: int) -> list[Effect]:
        if group.state is not GroupState.PREPARING_REBALANCE:
            return []
        if now < group.delay_until:
            return []
        if not group.all_joined() and now < group.join_deadline:
            return []
        return self._complete_join(group, now)

    def _complete_join(self, group: Group, now: int) -> list[Effect]:
        """The join phase ends: members that did not rejoin are dropped, the next
        generation begins and every joined member gets its JoinGroup answer."""
        for mid in [mid for mid, m in group.members.items() if not m.awaiting_join]:
            self._drop(group, mid)
        group.pending.clear()
        group.choose_leader()
        group.generation += 1
        if not group.members:
            group.protocol = None
            group.transition(GroupState.EMPTY, now)
            self._rebalance_done(group, now)
            return [Write(group.group_id, (self._group_record(group, now),))]
        group.protocol = elect_protocol(group)
        group.transition(GroupState.COMPLETING_REBALANCE, now)
        timeout = max(m.rebalance_timeout_ms for m in group.members.values())
        group.sync_deadline = now + timeout
        group.pending_sync = set(group.members)
        effects: list[Effect] = []
        for m in group.members.values():
            m.awaiting_join = False
            m.heartbeat_deadline = now + m.session_timeout_ms
            effects.append(
                Completed(group.group_id, m.member_id, "join", self._join_answer(group, m))
            )
        return effects

    def _join_answer(self, group: Group, member: Member) -> JoinAnswer:
        is_leader = group.leader == member.member_id
        members = (
            tuple(
                (m.member_id, m.group_instance_id, m.metadata(group.protocol))
                for m in group.members.values()
            )
            if is_leader
            else ()
        )
        return JoinAnswer(
            ErrorCode.none,
            member.member_id,
            group.generation,
            group.protocol_type,
            group.protocol,
            group.leader or "",
            members,
        )

    # ---------------------------------------------------------------- sync

    def sync(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation: int,
        protocol_type: str | None,
        protocol: str | None,
        assignments: dict[str, bytes],
        now: int,
    ) -> Outcome:
        group = self.groups.get(group_id)
        if not group_id:
            return Outcome(SyncAnswer(ErrorCode.invalid_group_id))
        if group is None or member_id not in group.members:
            return Outcome(SyncAnswer(ErrorCode.unknown_member_id))
        if group.state is GroupState.DEAD:
            return Outcome(SyncAnswer(ErrorCode.coordinator_not_available))
        if self._fenced(group, member_id, group_instance_id):
            return Outcome(SyncAnswer(ErrorCode.fenced_instance_id))
        if generation != group.generation:
            return Outcome(SyncAnswer(ErrorCode.illegal_generation))
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol is not None and protocol != group.protocol
        ):
            return Outcome(SyncAnswer(ErrorCode.inconsistent_group_protocol))
        member = group.members[member_id]
        if group.state is GroupState.PREPARING_REBALANCE:
            return Outcome(SyncAnswer(ErrorCode.rebalance_in_progress))
        if group.state is GroupState.STABLE:
            member.heartbeat_deadline = now + member.session_timeout_ms
            return Outcome(self._sync_answer(group, member))
        # CompletingRebalance: wait for the leader's assignment.
        member.awaiting_sync = True
        member.heartbeat_deadline = now + member.session_timeout_ms
        group.pending_sync.discard(member_id)
        if member_id != group.leader:
            return Outcome(PARKED, (), member_id)
        for mid, m in group.members.items():
            m.assignment = assignments.get(mid, b"")
        group.transition(GroupState.STABLE, now)
        self._rebalance_done(group, now)
        answers = []
        for m in group.members.values():
            if m.awaiting_sync:
                m.awaiting_sync = False
                answers.append(
                    Completed(group_id, m.member_id, "sync", self._sync_answer(group, m))
                )
        write = Write(group_id, (self._group_record(group, now),), tuple(answers), group.generation)
        return Outcome(PARKED, (write,), member_id)

    def _rebalance_done(self, group: Group, now: int) -> None:
        if self.on_rebalance_done is not None:
            self.on_rebalance_done(now - group.rebalance_started)

    def store_failed(self, group_id: str, generation: int, now: int) -> list[Effect]:
        """The assignment of `generation` could not be stored: the members got an
        error and rejoin, so the group rebalances (as Kafka resets it)."""
        group = self.groups.get(group_id)
        if group is None or group.generation != generation or group.state is not GroupState.STABLE:
            return []
        for m in group.members.values():
            m.assignment = b""
        return self._prepare_rebalance(group, now, extend_delay=False)

    @staticmethod
    def _sync_answer(group: Group, member: Member) -> SyncAnswer:
        return SyncAnswer(ErrorCode.none, group.protocol_type, group.protocol, member.assignment)

    # ----------------------------------------------------------- heartbeat

    def heartbeat(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation: int,
        now: int,
    ) -> ErrorCode:
        group = self.groups.get(group_id)
        if not group_id:
            return ErrorCode.invalid_group_id
        if group is None:
            return ErrorCode.unknown_member_id
        if group.state is GroupState.DEAD:
            return ErrorCode.coordinator_not_available
        if self._fenced(group, member_id, group_instance_id):
            return ErrorCode.fenced_instance_id
        member = group.members.get(member_id)
        if member is None or group.state is GroupState.EMPTY:
            return ErrorCode.unknown_member_id
        if generation != group.generation:
            return ErrorCode.illegal_generation
        member.heartbeat_deadline = now + member.session_timeout_ms
        if group.state is GroupState.PREPARING_REBALANCE:
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    # --------------------------------------------------------------- leave

    def leave(
        self, group_id: str, leaving: list[tuple[str, str | None]], now: int
    ) -> tuple[ErrorCode, list[ErrorCode], list[Effect]]:
        """LeaveGroup of (member id, instance id) pairs: the group-level error, one
        error per member, and the effects (parked joins answered, a rebalance)."""
        group = self.groups.get(group_id)
        if not group_id:
            return ErrorCode.invalid_group_id, [], []
        if group is None:
            return ErrorCode.unknown_member_id, [ErrorCode.unknown_member_id] * len(leaving), []
        if group.state is GroupState.DEAD:
            return ErrorCode.coordinator_not_available, [], []
        errors: list[ErrorCode] = []
        effects: list[Effect] = []
        for member_id, instance in leaving:
            if instance is not None:
                found = group.static.get(instance)
                if found is None or found not in group.members:
                    errors.append(ErrorCode.unknown_member_id)
                    continue
                if member_id != UNKNOWN_MEMBER_ID and member_id != found:
                    errors.append(ErrorCode.fenced_instance_id)
                    continue
                member_id = found
            if member_id in group.pending:
                del group.pending[member_id]
                errors.append(ErrorCode.none)
                effects += self._try_complete_join(group, now)
                continue
            if member_id not in group.members:
                errors.append(ErrorCode.unknown_member_id)
                continue
            errors.append(ErrorCode.none)
            effects += self._remove_and_rebalance(group, member_id, now)
        top = ErrorCode.none
        if len(leaving) == 1:
            top = errors[0]
        return top, errors, effects

    def _drop(self, group: Group, member_id: str) -> list[Effect]:
        member = group.remove(member_id)
        if member.group_instance_id is not None:
            group.static.pop(member.group_instance_id, None)
        group.pending_sync.discard(member_id)
        effects: list[Effect] = []
        if member.awaiting_join:
            effects.append(
                Completed(
                    group.group_id,
                    member_id,
                    "join",
                    JoinAnswer(ErrorCode.unknown_member_id, member_id),
                )
            )
        if member.awaiting_sync:
            effects.append(
                Completed(
                    group.group_id, member_id, "sync", SyncAnswer(ErrorCode.unknown_member_id)
                )
            )
        group.choose_leader()
        return effects

    def _remove_and_rebalance(self, group: Group, member_id: str, now: int) -> list[Effect]:
        effects = self._drop(group, member_id)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            effects += self._prepare_rebalance(group, now, extend_delay=False)
        effects += self._try_complete_join(group, now)
        return effects

    # ----------------------------------------------------------------- time

    def tick(self, now: int) -> list[Effect]:
        """Session expiries, the end of join phases, forgotten pending members,
        CompletingRebalance members that never synced, and offsets retention."""
        effects: list[Effect] = []
        for group in list(self.groups.values()):
            if group.state is GroupState.DEAD:
                continue
            for mid, deadline in list(group.pending.items()):
                if deadline <= now:
                    del group.pending[mid]
            for m in list(group.members.values()):
                if m.awaiting_join or m.awaiting_sync:
                    continue
                if m.heartbeat_deadline <= now and m.member_id in group.members:
                    effects += self._remove_and_rebalance(group, m.member_id, now)
            if group.state is GroupState.COMPLETING_REBALANCE and group.sync_deadline <= now:
                late = [mid for mid in group.pending_sync if mid in group.members]
                for mid in late:
                    effects += self._drop(group, mid)
                if late:
                    effects += self._prepare_rebalance(group, now, extend_delay=False)
            effects += self._try_complete_join(group, now)
            effects += self._expire_offsets(group, now)
        return effects

    def next_deadline(self) -> int | None:
        """When `tick` next has something to do (the driver sleeps until then)."""
        deadlines: list[int] = []
        for g in self.groups.values():
            deadlines += g.pending.values()
            deadlines += [
                m.heartbeat_deadline
                for m in g.members.values()
                if not (m.awaiting_join or m.awaiting_sync)
            ]
            if g.state is GroupState.PREPARING_REBALANCE:
                deadlines += [g.delay_until, g.join_deadline]
            if g.state is GroupState.COMPLETING_REBALANCE:
                deadlines.append(g.sync_deadline)
        return min(deadlines, default=None)

    # ----------------------------------------------------------- administration

    def unload(self, group_ids: Iterable[str], now: int) -> list[Effect]:
        """This broker no longer leads their partition: parked requests get
        NOT_COORDINATOR (the members find the new coordinator) and the groups go."""
        effects: list[Effect] = []
        for gid in list(group_ids):
            group = self.groups.pop(gid, None)
            if group is None:
                continue
            for m in group.members.values():
                if m.awaiting_join:
                    effects.append(
                        Completed(
                            gid,
                            m.member_id,
                            "join",
                            JoinAnswer(ErrorCode.not_coordinator, m.member_id),
                        )
                    )
                if m.awaiting_sync:
                    effects.append(
                        Completed(gid, m.member_id, "sync", SyncAnswer(ErrorCode.not_coordinator))
                    )
            group.transition(GroupState.DEAD, now)
        return effects


def _replace_answer(answer: JoinAnswer, *, skip_assignment: bool) -> JoinAnswer:
    return JoinAnswer(
        answer.error,
        answer.member_id,
        answer.generation,
        answer.protocol_type,
        answer.protocol,
        answer.leader,
        answer.members,
        skip_assignment,
    )
