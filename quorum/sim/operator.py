"""What the simulated operator and the world do to the cluster, apart from its
clients: faults (partitions, heals, crashes, restarts), a forger outside the
quorum, and KIP-853 voter changes at the leader with their invariant checks.

A mixin of `Simulation` (quorum/sim/cluster.py), which owns the nodes, the clock,
the event queue and the random source these steps draw from, in the same order
as before the split: a seed replays the same run.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from quorum.raft.effects import Role
from quorum.raft.messages import (
    MAX_EPOCH,
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    Message,
    VoteRequest,
)
from quorum.raft.node import NotLeaderError, RaftNode
from quorum.raft.records import Batch
from quorum.raft.voters import (
    Voter,
    VoterChangeRefused,
    VoterSet,
    decode_voters,
    is_voters_record,
)
from quorum.sim.faults import FaultMix
from quorum.sim.invariants import Invariants

if TYPE_CHECKING:
    from quorum.sim.cluster import SimNode


class OperatorActions:
    """Faults, forged requests and voter changes; `Simulation` supplies the state."""

    nodes: dict[int, SimNode]
    rng: random.Random
    mix: FaultMix
    voters: frozenset[int]
    invariants: Invariants
    faults_active: bool
    blocked: set[tuple[int, int]]
    forged: int
    voter_changes: int
    voter_changes_committed: int
    voter_changes_refused: dict[str, int]
    now_us: int

    def _schedule(self, at_us: int, kind: str, *args: object) -> None:
        raise NotImplementedError

    def _log(self, text: str) -> None:
        raise NotImplementedError

    def local_ms(self, node: SimNode) -> int:
        raise NotImplementedError

    def _after_event(self, node: SimNode, answers_lost_to: int | None = None) -> None:
        raise NotImplementedError

    def _crash(self, node: SimNode) -> None:
        raise NotImplementedError

    def _start_node(self, node: SimNode) -> None:
        raise NotImplementedError

    def _forge(self) -> None:
        """One forged request, from outside the quorum, to a random live node:
        a far-future epoch (refused by the epoch bound) or a near one (taken
        within the bound, or ignored by a voter that still hears its leader)."""
        if not self.faults_active:
            return
        self._schedule(self.now_us + self.rng.randrange(20_000, 200_000), "forge")
        live = [n for n in self.nodes.values() if n.core is not None]
        if not live:
            return
        node = self.rng.choice(live)
        assert node.core is not None
        claimed = self.rng.choice(sorted(self.voters - {node.node_id}))
        far = self.rng.random() < 0.5
        near = min(node.core.epoch + 5, MAX_EPOCH)
        epoch = self.rng.choice([MAX_EPOCH - 1, MAX_EPOCH]) if far else near
        kind = self.rng.randrange(3)
        message: Message
        if kind == 0:
            message = VoteRequest(epoch, claimed, epoch, 2**62, pre_vote=False)
        elif kind == 1:
            message = BeginQuorumEpochRequest(epoch, claimed)
        else:
            message = EndQuorumEpochRequest(epoch, claimed, (node.node_id,))
        self.forged += 1
        node.core.on_message(claimed, message, self.local_ms(node))
        self._after_event(node, answers_lost_to=claimed)

    # --------------------------------------------------------- voter changes

    def _member_step(self) -> None:
        """An operator adds an observer as a voter or removes a voter (the leader
        itself included), at the leader, while the faults go on."""
        if not self.faults_active:
            return
        self._schedule(self.now_us + self.rng.randrange(50_000, 600_000), "member")
        leaders = [n for n in self.nodes.values() if n.core and n.core.role is Role.LEADER]
        if not leaders:
            return
        node = self.rng.choice(leaders)
        core = node.core
        assert core is not None
        voters = sorted(core.voters)
        spare = sorted(set(self.nodes) - set(voters))
        now = self.local_ms(node)
        try:
            if core.kraft_version == 0:
                static = VoterSet(tuple(Voter(v, f"dir-{v}") for v in sorted(self.voters)))
                result = core.upgrade_kraft_version(static, now)
                what = "upgrade kraft.version to 1"
            elif spare and (len(voters) < 2 or self.rng.random() < 0.5):
                added = self.rng.choice(spare)
                result = core.add_voter(Voter(added, f"dir-{added}"), now)
                what = f"add voter {added}"
            else:
                removed = self.rng.choice(voters)
                result = core.remove_voter(removed, f"dir-{removed}", now)
                what = f"remove voter {removed}"
        except VoterChangeRefused as refused:
            name = refused.error.name
            self.voter_changes_refused[name] = self.voter_changes_refused.get(name, 0) + 1
            return
        except NotLeaderError:
            return
        self.voter_changes += 1
        self._log(f"node {node.node_id} appends {what} at {result.first_offset}")
        self._after_event(node)

    def _check_voter_changes(self, node: SimNode, batches: tuple[Batch, ...]) -> None:
        core = node.core
        assert core is not None
        for batch in batches:
            if not batch.control:
                continue
            for i, record in enumerate(batch.records):
                if is_voters_record(record):
                    in_log = self._voters_offsets(
                        core, self.invariants.voter_change.commit_frontier
                    )
                    offset = batch.base_offset + i
                    self.invariants.voter_change.on_voters_appended(node.node_id, offset, in_log)

    @staticmethod
    def _voters_offsets(core: RaftNode, start: int) -> list[int]:
        """Where `core`'s log holds VotersRecords, from `start` on."""
        found: list[int] = []
        for batch in core.log.read(max(start, core.log.start_offset), 2**62):
            if batch.control:
                found.extend(
                    batch.base_offset + i
                    for i, record in enumerate(batch.records)
                    if is_voters_record(record)
                )
        return found

    def _voter_change_committed(self, offset: int, epoch: int, record: bytes) -> None:
        if offset in self.invariants.voter_quorum.checked:
            return
        holders = {
            n.node_id for n in self.nodes.values() if n.log_store.durable_epoch_at(offset) == epoch
        }
        new_voters = decode_voters(record).ids
        self.invariants.voter_quorum.on_voters_committed(offset, new_voters, holders)
        self.voter_changes_committed += 1
        self._log(f"voter change at {offset} committed: voters {sorted(new_voters)}")

    # ----------------------------------------------------------------- faults

    def _fault_step(self) -> None:
        if not self.faults_active:
            return
        mix = self.mix
        choices = []
        if mix.partitions:
            choices += ["partition", "heal"]
        if mix.crashes:
            choices += ["crash", "restart"]
        if not choices:
            return
        action = self.rng.choice(choices)
        ids = sorted(self.nodes)
        if action == "partition":
            leaders = [
                n.node_id for n in self.nodes.values() if n.core and n.core.role is Role.LEADER
            ]
            victim = self.rng.choice(leaders if leaders and self.rng.random() < 0.5 else ids)
            others = [i for i in ids if i != victim]
            symmetric = self.rng.random() < 0.6
            self.blocked = set()
            for other in others:
                self.blocked.add((other, victim))
                if symmetric:
                    self.blocked.add((victim, other))
            self._log(f"partition node {victim} ({'both ways' if symmetric else 'inbound only'})")
        elif action == "heal":
            self.blocked = set()
            self._log("heal network")
        elif action == "crash":
            live = [n for n in self.nodes.values() if n.alive]
            leading = [n for n in live if n.core and n.core.role is Role.LEADER]
            pool = leading if leading and self.rng.random() < 0.5 else live
            if len(live) > 1 and pool:
                self._crash(self.rng.choice(pool))
        else:
            dead = [n for n in self.nodes.values() if not n.alive]
            if dead:
                node = self.rng.choice(dead)
                self._log(f"restart node {node.node_id}")
                self._start_node(node)
        self._schedule(self.now_us + self.rng.randrange(200_000, 1_500_000), "fault")

    def _heal_everything(self) -> None:
        self.faults_active = False
        self.blocked = set()
        for node in self.nodes.values():
            if not node.alive:
                self._start_node(node)
        self._log("faults over: network healed, every node running")
