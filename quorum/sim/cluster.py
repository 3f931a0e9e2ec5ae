"""The simulated cluster: nodes, a lossy network, crashes, clocks, and clients.

Time is global microseconds; each node sees its own drifting clock in ms. Every
random choice comes from one `random.Random(seed)`, and events are ordered by
(time, sequence), so a seed replays exactly.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from quorum.log.memory import MemoryLogStore, MemoryQuorumStateStore
from quorum.raft.config import ProposeResult, RaftConfig
from quorum.raft.effects import (
    AdvanceLogStart,
    AppendBatches,
    FetchSnapshot,
    FlushLog,
    HighWatermarkChanged,
    PersistQuorumState,
    RequestRefused,
    ResetLog,
    Role,
    RoleChanged,
    SendMessage,
    TruncateLog,
)
from quorum.raft.log import RaftLog
from quorum.raft.messages import (
    RESPONSE_TYPES,
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    Message,
    VoteRequest,
)
from quorum.raft.node import NotLeaderError, RaftNode
from quorum.raft.records import SnapshotId
from quorum.raft.voters import (
    KRAFT_VERSION_DYNAMIC,
    VoterSet,
    is_voters_record,
)
from quorum.sim.faults import FaultMix
from quorum.sim.invariants import Invariants, InvariantViolation
from quorum.sim.operator import OperatorActions
from quorum.sim.result import SimulationResult

NodeFactory = Callable[..., RaftNode]


# Events that a node itself handles, its id first among their arguments.
_NODE_EVENTS = frozenset({"deliver", "tick", "flushed", "unreachable", "snapshot_timeout"})


@dataclass
class SnapshotRequest:
    snapshot_id: SnapshotId


@dataclass
class SnapshotReply:
    snapshot_id: SnapshotId
    state: dict[int, bytes] | None  # None: the leader no longer has that snapshot
    voters: VoterSet | None = None  # the voter set the snapshot carries (kraft.version 1)


@dataclass
class PendingProposal:
    node: int
    incarnation: int
    result: ProposeResult
    records: tuple[bytes, ...]


@dataclass
class SimNode:
    node_id: int
    log_store: MemoryLogStore = field(default_factory=MemoryLogStore)
    state_store: MemoryQuorumStateStore = field(default_factory=MemoryQuorumStateStore)
    core: RaftNode | None = None
    incarnation: int = 0
    drift: float = 0.0
    clock_offset_us: int = 0
    applied: dict[int, bytes] = field(default_factory=dict)
    applied_end: int = 0
    snapshot: tuple[SnapshotId, dict[int, bytes]] | None = None
    snapshot_voters: VoterSet | None = None
    snapshot_wait: SnapshotId | None = None  # a download in progress (membership runs)
    next_tick_us: int | None = None

    @property
    def alive(self) -> bool:
        return self.core is not None


class Simulation(OperatorActions):
    """Run `run()`; it raises InvariantViolation (with the replay command) on a bug."""

    def __init__(
        self,
        seed: int,
        mix: FaultMix,
        voters: int = 3,
        observers: int = 0,
        fault_ms: int = 8000,
        liveness_bound_ms: int = 10000,
        node_factory: NodeFactory = RaftNode,
        snapshot_every: int = 60,
        trace: Callable[[str], None] | None = None,
        forger: bool = False,
        membership: bool = False,
        kraft_upgrade: bool = False,
    ) -> None:
        self.seed = seed
        self.mix = mix
        self.rng = random.Random(seed)
        self.fault_ms = fault_ms
        self.liveness_bound_ms = liveness_bound_ms
        self.node_factory = node_factory
        self.snapshot_every = snapshot_every
        self.trace = trace
        self.voters = frozenset(range(1, voters + 1))
        ids = list(range(1, voters + observers + 1))
        self.nodes = {i: SimNode(i) for i in ids}
        for node in self.nodes.values():
            node.drift = self.rng.uniform(-mix.max_clock_drift, mix.max_clock_drift)
            node.clock_offset_us = self.rng.randrange(0, 10_000_000)
        self.invariants = Invariants()
        self.now_us = 0
        self._queue: list[tuple[int, int, str, tuple[Any, ...]]] = []
        self._seq = 0
        self.blocked: set[tuple[int, int]] = set()
        self.pending: list[PendingProposal] = []
        self.faults_active = True
        self.acked_count = 0
        self.commits = 0
        self.elections = 0
        self.max_epoch = 0
        self._next_payload = 0
        # A planted forger: an outsider sending Vote, BeginQuorumEpoch and
        # EndQuorumEpoch that claim to come from a voter (see `_forge`).
        self.forger = forger
        self.forged = 0
        self.refused = 0
        # The largest gap between an epoch a request asked a node to take and
        # the epoch of that node's last log entry (real traffic only): how far
        # below `max_epoch_jump` real elections stay.
        self.max_epoch_gap = 0
        # KIP-853: with `membership`, the nodes run kraft.version 1 and a client
        # adds and removes voters (observers are the nodes to add) during the faults.
        self.membership = membership or kraft_upgrade
        # With `kraft_upgrade` the nodes start at kraft.version 0 and the operator's
        # first voter change is the upgrade to 1 (`upgrade_kraft_version`).
        self.kraft_upgrade = kraft_upgrade
        self.voter_changes = 0
        self.voter_changes_committed = 0
        self.voter_changes_refused: dict[str, int] = {}
        # Stalls (quorum/sim/stalls.py): a paused node handles nothing until its
        # resume time, while what reaches it waits, as in its sockets' buffers.
        # `silent_cuts`: a cut link never resets (a blackholing proxy).
        self.paused_until: dict[int, int] = {}
        self.silent_cuts = False

    # --------------------------------------------------------------- plumbing

    def replay_command(self) -> str:
        extra = (
            f" --membership --observers {len(self.nodes) - len(self.voters)}"
            if self.membership
            else ""
        )
        if self.kraft_upgrade:
            extra += " --kraft-upgrade"
        if self.fault_ms != 8000:
            extra += f" --fault-ms {self.fault_ms}"
        return f"python -m quorum.sim --seed {self.seed} --mix {self.mix.name}{extra}"

    def _log(self, text: str) -> None:
        if self.trace:
            self.trace(f"{self.now_us / 1000:10.1f} ms  {text}")

    def _schedule(self, at_us: int, kind: str, *args: Any) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (at_us, self._seq, kind, args))

    def local_ms(self, node: SimNode) -> int:
        return int((self.now_us * (1.0 + node.drift) + node.clock_offset_us) // 1000)

    def _global_us(self, node: SimNode, local_ms: int) -> int:
        return int((local_ms * 1000 - node.clock_offset_us) / (1.0 + node.drift)) + 1

    def _delay_us(self) -> int:
        return int(self.rng.uniform(self.mix.min_delay_ms, self.mix.max_delay_ms) * 1000)

    # ---------------------------------------------------------------- nodes

    def _start_node(self, node: SimNode) -> None:
        node.incarnation += 1
        snapshot_id, batches = node.log_store.recover()
        log = RaftLog(snapshot_id)
        for batch in batches:
            log.append(batch)
        state = node.state_store.read()
        self.invariants.epochs.on_epoch(node.node_id, state.epoch)
        rng = random.Random(self.rng.getrandbits(32))
        if self.membership:
            version = 0 if self.kraft_upgrade else KRAFT_VERSION_DYNAMIC
            config = RaftConfig(node.node_id, self.voters, kraft_version=version)
            node.core = self.node_factory(
                config, rng, self.local_ms(node), state, log, snapshot_voters=node.snapshot_voters
            )
        else:
            config = RaftConfig(node.node_id, self.voters)
            node.core = self.node_factory(config, rng, self.local_ms(node), state, log)
        # The state machine restarts from the snapshot; committed entries are replayed.
        if node.snapshot is not None:
            node.applied = dict(node.snapshot[1])
            node.applied_end = node.snapshot[0].end_offset
        else:
            node.applied, node.applied_end = {}, 0
        node.next_tick_us = None
        node.snapshot_wait = None
        self._after_event(node)

    def _crash(self, node: SimNode) -> None:
        self._log(f"crash node {node.node_id}")
        node.core = None
        node.log_store.crash()
        self.pending = [p for p in self.pending if p.node != node.node_id]

    def _after_event(self, node: SimNode, answers_lost_to: int | None = None) -> None:
        """Run the node's effects; answers to `answers_lost_to` are dropped (they
        answer a forged request, so they go to the forger, not the voter)."""
        core = node.core
        if core is None:
            return
        now = self.local_ms(node)
        for effect in core.poll(now):
            if (
                isinstance(effect, SendMessage)
                and effect.destination == answers_lost_to
                and isinstance(effect.message, RESPONSE_TYPES)
            ):
                continue
            self._execute(node, effect)
        if self._maybe_snapshot(node):
            for effect in core.poll(now):
                self._execute(node, effect)
        deadline_us = max(self._global_us(node, core.next_deadline()), self.now_us + 1)
        if node.next_tick_us is None or deadline_us != node.next_tick_us:
            node.next_tick_us = deadline_us
            self._schedule(deadline_us, "tick", node.node_id, node.incarnation)

    def _execute(self, node: SimNode, effect: object) -> None:
        core = node.core
        assert core is not None
        match effect:
            case PersistQuorumState():
                self.invariants.epochs.on_epoch(node.node_id, effect.epoch)
                node.state_store.write(
                    type(node.state_store.read())(effect.epoch, effect.voted_for, effect.leader_id)
                )
            case AppendBatches():
                node.log_store.append(effect.batches)
                if self.membership:
                    self._check_voter_changes(node, effect.batches)
            case TruncateLog():
                self.invariants.agreement.on_truncate(
                    node.node_id, effect.end_offset, core.high_watermark
                )
                node.log_store.truncate(effect.end_offset)
            case AdvanceLogStart():
                node.log_store.advance_start(effect.snapshot_id)
            case ResetLog():
                node.log_store.reset_to_snapshot(effect.snapshot_id)
            case FlushLog():
                delay = int(self.rng.uniform(0.05, self.mix.max_flush_ms) * 1000)
                self._schedule(
                    self.now_us + delay,
                    "flushed",
                    node.node_id,
                    node.incarnation,
                    effect.end_offset,
                    effect.generation,
                )
            case SendMessage():
                self._send(node.node_id, effect.destination, effect.message)
            case HighWatermarkChanged():
                self.invariants.high_watermarks.on_high_watermark(
                    node.node_id, node.incarnation, effect.high_watermark
                )
                self.invariants.voter_change.on_high_watermark(effect.high_watermark)
                self._apply_committed(node, effect.high_watermark)
            case RoleChanged():
                self.invariants.epochs.on_epoch(node.node_id, effect.epoch)
                self.max_epoch = max(self.max_epoch, effect.epoch)
                if effect.role is Role.LEADER:
                    self.elections += 1
                    self._log(f"node {node.node_id} leads epoch {effect.epoch}")
                    self.invariants.leaders.on_leader(node.node_id, effect.epoch)
            case FetchSnapshot():
                self._send(node.node_id, effect.leader_id, SnapshotRequest(effect.snapshot_id))
                if self.membership:
                    # As the driver's transfer does, give up on a download whose
                    # request or answer was lost, and fetch again: a voter stuck
                    # waiting for ever may be the one a new voter set cannot lack.
                    node.snapshot_wait = effect.snapshot_id
                    self._schedule(
                        self.now_us + 1_000_000,
                        "snapshot_timeout",
                        node.node_id,
                        node.incarnation,
                        effect.snapshot_id,
                    )
            case RequestRefused():
                self.refused += 1
                self._log(f"node {node.node_id} refused {effect.request}: {effect.reason}")

    def _apply_committed(self, node: SimNode, high_watermark: int) -> None:
        core = node.core
        assert core is not None
        log = core.log
        offset = max(node.applied_end, log.start_offset)
        while offset < high_watermark:
            batch = log.batch_at(offset)
            if batch is None:
                break
            for i, record in enumerate(batch.records):
                at = batch.base_offset + i
                if at < node.applied_end:
                    continue
                self.invariants.agreement.on_commit(node.node_id, at, batch.epoch, record)
                if not batch.control:
                    node.applied[at] = record
                elif self.membership and is_voters_record(record):
                    self._voter_change_committed(at, batch.epoch, record)
                self.commits += 1
            offset = batch.next_offset
        node.applied_end = max(node.applied_end, min(offset, high_watermark))
        self._acknowledge(node, high_watermark)

    def _acknowledge(self, node: SimNode, high_watermark: int) -> None:
        core = node.core
        assert core is not None
        still: list[PendingProposal] = []
        for p in self.pending:
            if p.node != node.node_id or p.result.last_offset >= high_watermark:
                still.append(p)
                continue
            if p.incarnation != node.incarnation:
                continue
            if core.log.epoch_at(p.result.last_offset) == p.result.epoch:
                for i, record in enumerate(p.records):
                    offset = p.result.first_offset + i
                    self.invariants.durability.on_ack(offset, record)
                    if node.applied.get(offset) != record:
                        raise InvariantViolation(f"acknowledged {record!r} not applied at {offset}")
                    self.acked_count += 1
        self.pending = still

    def _maybe_snapshot(self, node: SimNode) -> bool:
        core = node.core
        assert core is not None
        base = node.snapshot[0].end_offset if node.snapshot else 0
        end = node.applied_end
        if end - base < self.snapshot_every or end > core.high_watermark:
            return False
        epoch = core.log.epoch_at(end - 1)
        following = core.log.batch_at(end)
        if epoch is None or (following is not None and following.base_offset != end):
            return False
        snapshot_id = SnapshotId(end, epoch)
        node.snapshot = (snapshot_id, {o: r for o, r in node.applied.items() if o < end})
        node.snapshot_voters = core.voter_set_at(end)
        core.on_snapshot_taken(snapshot_id)
        return True

    # ---------------------------------------------------------------- network

    def _send(self, src: int, dst: int, message: object) -> None:
        target = self.nodes[dst]
        cut = (src, dst) in self.blocked
        # A refused connection (dead node) or, sometimes, a reset one (cut link)
        # is visible to the sender, as it would be to a gRPC client.
        if not target.alive or (cut and not self.silent_cuts and self.rng.random() < 0.5):
            self._schedule(self.now_us + self._delay_us(), "unreachable", src, dst)
        if not target.alive or cut:
            return
        if self.faults_active and self.rng.random() < self.mix.drop_rate:
            return
        copies = 2 if self.faults_active and self.rng.random() < self.mix.duplicate_rate else 1
        for _ in range(copies):
            self._schedule(self.now_us + self._delay_us(), "deliver", dst, src, message)

    def _deliver(self, dst: int, src: int, message: object) -> None:
        node = self.nodes[dst]
        if node.core is None or (src, dst) in self.blocked:
            return
        now = self.local_ms(node)
        if isinstance(message, SnapshotRequest):
            have = node.snapshot
            state = have[1] if have and have[0] == message.snapshot_id else None
            voters = node.snapshot_voters if state is not None else None
            self._send(dst, src, SnapshotReply(message.snapshot_id, state, voters))
            return
        if isinstance(message, SnapshotReply):
            if self.membership:
                if node.snapshot_wait != message.snapshot_id:
                    return  # a late answer to a download given up on
                node.snapshot_wait = None
            if message.state is None:
                node.core.on_snapshot_failed(now)
            else:
                node.snapshot = (message.snapshot_id, dict(message.state))
                node.snapshot_voters = message.voters
                if message.snapshot_id.end_offset > node.applied_end:
                    node.applied = dict(message.state)
                    node.applied_end = message.snapshot_id.end_offset
                node.core.on_snapshot_installed(message.snapshot_id, now, message.voters)
            self._after_event(node)
            return
        assert not isinstance(message, SnapshotRequest | SnapshotReply)
        msg: Message = message  # type: ignore[assignment]
        self._note_epoch_gap(node.core, msg)
        node.core.on_message(src, msg, now)
        self._after_event(node)

    def _note_epoch_gap(self, core: RaftNode, msg: Message) -> None:
        match msg:
            case VoteRequest(pre_vote=False):
                epoch = msg.candidate_epoch
            case BeginQuorumEpochRequest() | EndQuorumEpochRequest():
                epoch = msg.leader_epoch
            case _:
                return
        if epoch > core.epoch:
            self.max_epoch_gap = max(self.max_epoch_gap, epoch - core.log.last_epoch)

    # ---------------------------------------------------------------- clients

    def _client_step(self) -> None:
        leaders = [
            n
            for n in self.nodes.values()
            if n.core is not None
            and n.core.role is Role.LEADER
            and self.paused_until.get(n.node_id, 0) <= self.now_us
        ]
        if leaders:
            node = self.rng.choice(leaders)
            assert node.core is not None
            count = self.rng.randrange(1, 4)
            records = []
            for _ in range(count):
                self._next_payload += 1
                records.append(f"r{self._next_payload}".encode())
            try:
                result = node.core.propose(records, self.local_ms(node))
            except NotLeaderError:
                pass
            else:
                self.pending.append(
                    PendingProposal(node.node_id, node.incarnation, result, tuple(records))
                )
                self._after_event(node)
        self._schedule(self.now_us + self.rng.randrange(2_000, 20_000), "client")

    # -------------------------------------------------------------------- run

    def run(self) -> SimulationResult:
        for node in self.nodes.values():
            self._start_node(node)
        self._schedule(self.rng.randrange(100_000, 1_000_000), "fault")
        self._schedule(1_000, "client")
        if self.forger:
            self._schedule(self.rng.randrange(100_000, 500_000), "forge")
        if self.membership:
            self._schedule(self.rng.randrange(100_000, 500_000), "member")
        heal_at = self.fault_ms * 1000
        self._schedule(heal_at, "heal")
        try:
            recovered_at = self._run_until(heal_at)
            return self._finish(heal_at, recovered_at)
        except Exception as exc:
            # The core's own assertions and errors count as failures too.
            raise InvariantViolation(f"{exc}\nreplay: {self.replay_command()}") from exc

    def _run_until(self, heal_at: int) -> int | None:
        deadline = heal_at + self.liveness_bound_ms * 1000
        acked_at_heal: int | None = None
        while self._queue:
            at, _, kind, args = heapq.heappop(self._queue)
            if at > deadline:
                break
            self.now_us = at
            self._dispatch(kind, args)
            if kind == "heal":
                acked_at_heal = self.acked_count
            if acked_at_heal is not None and self.acked_count > acked_at_heal:
                return at
        return None

    def advance_to(self, until_us: int, stop: Callable[[], bool] | None = None) -> bool:
        """Handle every event up to `until_us`, or until `stop()` holds after one
        (whether it did): for scenarios that drive the clock themselves."""
        while self._queue and self._queue[0][0] <= until_us:
            at, _, kind, args = heapq.heappop(self._queue)
            self.now_us = at
            self._dispatch(kind, args)
            if stop is not None and stop():
                return True
        self.now_us = until_us
        return False

    def _dispatch(self, kind: str, args: tuple[Any, ...]) -> None:
        resume = self.paused_until.get(args[0], 0) if kind in _NODE_EVENTS else 0
        if resume > self.now_us:  # the node is paused: it sees this when it resumes
            if kind == "tick":
                self.nodes[args[0]].next_tick_us = resume
            self._schedule(resume, kind, *args)
            return
        if kind == "deliver":
            self._deliver(*args)
        elif kind == "tick":
            node_id, incarnation = args
            node = self.nodes[node_id]
            if node.core is None or node.incarnation != incarnation:
                return
            if node.next_tick_us != self.now_us:
                return
            node.next_tick_us = None
            node.core.on_tick(self.local_ms(node))
            self._after_event(node)
        elif kind == "flushed":
            node_id, incarnation, end_offset, generation = args
            node = self.nodes[node_id]
            if node.core is None or node.incarnation != incarnation:
                return
            node.log_store.flush(end_offset)
            node.core.on_flushed(end_offset, generation, self.local_ms(node))
            self._after_event(node)
        elif kind == "unreachable":
            src, _dst = args
            node = self.nodes[src]
            if node.core is not None and node.core.leader_id == _dst:
                node.core.on_leader_unreachable(self.local_ms(node))
                self._after_event(node)
        elif kind == "client":
            self._client_step()
        elif kind == "fault":
            self._fault_step()
        elif kind == "heal":
            self._heal_everything()
        elif kind == "forge":
            self._forge()
        elif kind == "member":
            self._member_step()
        elif kind == "snapshot_timeout":
            node_id, incarnation, snapshot_id = args
            node = self.nodes[node_id]
            if node.core is None or node.incarnation != incarnation:
                return
            if node.snapshot_wait == snapshot_id:
                node.snapshot_wait = None
                node.core.on_snapshot_failed(self.local_ms(node))
                self._after_event(node)

    def _finish(self, heal_at: int, recovered_at: int | None) -> SimulationResult:
        if recovered_at is None:
            raise InvariantViolation(
                f"liveness: no proposal committed within {self.liveness_bound_ms} ms "
                "of the faults ending"
            )
        for node in self.nodes.values():
            self.invariants.durability.check_state(node.node_id, node.applied, node.applied_end)
        return SimulationResult(
            seed=self.seed,
            mix=self.mix.name,
            recovery_ms=(recovered_at - heal_at) / 1000,
            acked=self.acked_count,
            commits=self.commits,
            elections=self.elections,
            max_epoch=self.max_epoch,
            refused=self.refused,
            forged=self.forged,
            max_epoch_gap=self.max_epoch_gap,
            voter_changes=self.voter_changes,
            voter_changes_committed=self.voter_changes_committed,
            final_voters=self._final_voters(),
        )

    def _final_voters(self) -> tuple[int, ...]:
        """The voter set of the node with the most committed: where the run ended up."""
        live = [n.core for n in self.nodes.values() if n.core is not None]
        ahead = max(live, key=lambda core: (core.high_watermark, -core.node_id), default=None)
        return tuple(sorted(ahead.voters)) if ahead is not None else ()
