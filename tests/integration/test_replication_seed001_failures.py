"""Seed 001's two failure scenarios (KIP-101) on real broker processes: both
happen when followers truncate to their own HW (the pre-0.11 rule, a test-only
mode), neither with leader-epoch truncation.

One cluster, two sets of three brokers running the same steps side by side (in
two threads, so the sessions' expiries overlap): brokers 10, 11, 12 run the
test-only HW mode (`broker_agent/switches_for_tests.py`: two environment
variables, the second allowing the first), brokers 20, 21, 22 the production
leader-epoch mode. In each set A is the first, B the second, C the third.

The seed's scenarios, as tests/broker_agent/replication/test_replication_seed001.py
replays them on the pure rules, need a follower that restarts and stays in the
ISR; here the controller refuses a restarted broker's registration until its
old session has expired, which takes it out of every ISR first. So each is
replayed in the nearest form that can happen on real processes:

**Data loss** (the pure test's `_acked_m2_with_follower_behind_on_hw`: a record
acknowledged by the leader's HW while the follower's HW is behind; the follower
truncates to that HW and then leads). RF 3, A leads, unclean election off.
A gate in front of A (`fetch_gate.py`) lets B's and C's fetches reach A one at a
time: m0 is produced with `acks=all`; B and C fetch it (LEO 1, HW 0: A's HW is
still 0 when it answers); their next fetches, at 1, move A's HW to 1 and the
producer is answered, but those answers (carrying HW 1) never reach B and C:
kill -9 A. B, in the ISR, leads; C follows B, and here is the seed's
truncation, triggered by the leader change instead of a restart: in HW mode C
cuts its log to its HW 0, with epochs it asks B where epoch 0 ends (1) and
keeps m0. A gate in front of B holds C's next fetch, so C cannot get m0 back
before B is killed too. C, still in the ISR, leads (a clean election: no
unclean election in this scenario): in HW mode without the acknowledged m0.

**Divergence** (the pure test's `_diverging_after_restart`: A leads with m1, m2
and HW 2, B has only m1 and HW 1 after leaving the ISR; A crashes, B leads and
writes m3 at offset 1; A restarts and follows B). Here C is the seed's A and B
the seed's B: RF 2 (C, B), unclean election on. m1 reaches both; a gate in
front of C then holds B's fetches, so C drops B from the ISR after
`replica.lag.time.max.ms` (1 s on C) and acknowledges m2 alone (HW 2, which C
checkpoints before it is killed; a gate rather than SIGSTOP, because a stopped
B could still find m2 in an answer already waiting on its socket). kill -9 C: B
leads through the one unclean election of the module, and m2 is lost in both
modes (the price of unclean election, counted). m3 goes to offset 1 on B. C
restarts as B's follower: in HW mode it truncates to its HW 2, keeps m2 and
fetches from offset 2, so offset 1 holds m2 on C and m3 on B while both sit in
the ISR, and the compare tool (`python -m broker_agent.partitions.compare`)
reports them different; a preferred election making C the leader again shows
consumers m2 where they had read m3. With epochs C asks B where epoch 0 ends
(1), drops m2, and the replicas are byte-identical.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest
from kio.schema.errors import ErrorCode

from broker_agent.partitions.compare import stored_batches
from broker_agent.partitions.partition_log import HW_CHECKPOINT
from broker_agent.partitions.record_codec import records_of, value_of
from broker_agent.replication.follower import TruncationMode
from broker_agent.switches_for_tests import ALLOW_ENV, ALLOW_VALUE, TRUNCATION_MODE_ENV
from quorum.common.config import render_properties
from quorum.gen import admin_pb2 as api
from tests.broker_agent.partitions.partitions_cluster import make_batch
from tests.integration import replica_ops as ops
from tests.integration.controller_cluster import Cluster
from tests.integration.fetch_gate import FetchGate

pytestmark = pytest.mark.slow
HW_MODE, EPOCH_MODE = TruncationMode.HIGH_WATERMARK, TruncationMode.LEADER_EPOCH
SESSION_MS = "2000"
T = TypeVar("T")


@dataclass
class Side:
    """Three brokers running one truncation mode, and the gates in front of them."""

    mode: TruncationMode
    a: int
    b: int
    c: int
    gate_a: FetchGate  # holds the loss topic's follower fetches to A
    gate_b: FetchGate  # ... to B
    gate_c: FetchGate  # holds the divergence topic's follower fetches to C

    @property
    def loss_topic(self) -> str:
        return loss_topic(self.mode)

    @property
    def divergence_topic(self) -> str:
        return divergence_topic(self.mode)


def loss_topic(mode: TruncationMode) -> str:
    return f"seed001-loss-{mode.value}"


def divergence_topic(mode: TruncationMode) -> str:
    return f"seed001-divergence-{mode.value}"


def make_side(mode: TruncationMode, first: int) -> Side:
    loss, divergence = loss_topic(mode), divergence_topic(mode)
    return Side(mode, first, first + 1, first + 2,
                FetchGate(loss), FetchGate(loss), FetchGate(divergence))  # fmt: skip


@pytest.fixture(scope="module")
def sides() -> Iterator[dict[TruncationMode, Side]]:
    made = {HW_MODE: make_side(HW_MODE, 10), EPOCH_MODE: make_side(EPOCH_MODE, 20)}
    yield made
    for side in made.values():
        for gate in (side.gate_a, side.gate_b, side.gate_c):
            gate.close()


@pytest.fixture(scope="module")
def cluster(
    tmp_path_factory: pytest.TempPathFactory, sides: dict[TruncationMode, Side]
) -> Iterator[Cluster]:
    # One controller: the metadata quorum is not what this module is about. The
    # brokers are formatted before it starts, and all start together (they retry
    # until it answers): on a busy machine each of those steps takes seconds.
    c = Cluster.create(
        Path(tmp_path_factory.mktemp("seed001-failures")), voters=1,
        extra={"broker.session.timeout.ms": SESSION_MS},
    )  # fmt: skip
    c.add_brokers(*(b for side in sides.values() for b in (side.a, side.b, side.c)),
                  broker__heartbeat__interval__ms="500")  # fmt: skip
    for side in sides.values():
        for broker, gate, lag_ms in (
            # A and B lead while the gates hold their followers: no ISR change by lag.
            (side.a, side.gate_a, "300000"),
            (side.b, side.gate_b, "300000"),
            # C drops B from the divergence topic's ISR by lag.
            (side.c, side.gate_c, "1000"),
        ):
            proc = c.brokers[broker]
            own = {"advertised.listeners": f"PLAINTEXT://127.0.0.1:{gate.port}",
                   "replica.lag.time.max.ms": lag_ms}  # fmt: skip
            proc.config.write_text(proc.config.read_text() + render_properties(own))
            gate.upstream_port = proc.port
            if side.mode is HW_MODE:
                proc.env = {TRUNCATION_MODE_ENV: HW_MODE.value, ALLOW_ENV: ALLOW_VALUE}
    try:
        c.start()
        c.start_brokers()
        c.wait_for_leader()
        ops.wait(lambda: all(ops.online(c, b) for b in c.brokers), "the brokers ONLINE")
        yield c
    finally:
        c.stop_all()


# --------------------------------------------------------------------- helpers


def side_by_side(
    sides: dict[TruncationMode, Side], scenario: Callable[[Side], T]
) -> dict[TruncationMode, T]:
    """`scenario` on both sets of brokers at once; each one's outcome by mode."""
    with ThreadPoolExecutor(len(sides)) as pool:
        futures = {mode: pool.submit(scenario, side) for mode, side in sides.items()}
        return {mode: future.result() for mode, future in futures.items()}


def up(cluster: Cluster, *brokers: int) -> None:
    """These brokers running and ONLINE (whatever an earlier test left dead)."""
    for b in brokers:
        if not cluster.brokers[b].alive():
            ops.restart(cluster, b)
    ops.wait(lambda: all(ops.online(cluster, b) for b in brokers), f"brokers {brokers} ONLINE")


def wait_state(cluster: Cluster, topic: str, leader: int, isr: list[int]) -> None:
    """The committed partition state, and the leader serving it."""

    def reached() -> bool:
        p = ops.partition(cluster, topic)
        if p.leader != leader or sorted(p.isr) != sorted(isr):
            return False
        return ops.leader_in_metadata(cluster, leader, topic, 0)[0] == leader

    ops.wait(reached, f"{topic}: leader {leader}, ISR {isr}")


def figures(cluster: Cluster, topic: str, *brokers: int) -> list[tuple[int, int]]:
    """(LEO, HW) of each replica, as the seed's figures give them."""
    return [
        (
            ops.replica_log_end(cluster, b, topic, 0),
            ops.replica_high_watermark(cluster, b, topic, 0),
        )
        for b in brokers
    ]


def write(cluster: Cluster, broker: int, topic: str, value: bytes) -> int:
    """One acks=all record; its offset."""
    error, offset = ops.produce(cluster, broker, topic, 0, make_batch(value), timeout_ms=30_000)
    assert error == ErrorCode.none, error
    return offset


def consumer_reads(cluster: Cluster, broker: int, topic: str) -> list[bytes | None]:
    return [v for _, v in ops.read_all(cluster, broker, topic, 0)]


def replica_dir(cluster: Cluster, broker: int, topic: str) -> Path:
    return cluster.brokers[broker].data_dir / f"{topic}-0"


def stored_values(cluster: Cluster, broker: int, topic: str) -> list[bytes | None]:
    """Every record in the replica's files, HW or not (read-only, beside the broker)."""
    return [
        value_of(record)
        for _, _, batch in stored_batches(replica_dir(cluster, broker, topic))
        for record in records_of(batch)[1]
    ]


def compare(
    cluster: Cluster, topic: str, below: int, *brokers: int
) -> subprocess.CompletedProcess[str]:
    """The operators' compare tool, run as they would."""
    dirs = [str(replica_dir(cluster, b, topic)) for b in brokers]
    return subprocess.run(
        [sys.executable, "-m", "broker_agent.partitions.compare", *dirs, "--below", str(below)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


# -------------------------------------------------------------- data loss


@dataclass(frozen=True)
class LossOutcome:
    c_log_end_after_following_b: int  # where C's log ended when it fetched from B
    acknowledged: list[bytes]
    read_from_c: list[bytes | None]  # what consumers get once C leads


def lose_or_keep_m0(cluster: Cluster, side: Side) -> LossOutcome:
    a, b, c, topic = side.a, side.b, side.c, side.loss_topic
    up(cluster, a, b, c)
    ops.create_topic(cluster, topic, [(a, b, c)])
    try:
        with ThreadPoolExecutor(1) as pool:
            acked = pool.submit(write, cluster, a, topic, b"m0")
            ops.wait(lambda: ops.replica_log_end(cluster, a, topic, 0) == 1, "m0 on A")
            # B and C fetch m0 at their LEO 0 (A's HW is 0): each stores it, and its
            # next fetch, at 1, waits at the gate.
            for follower in (b, c):
                assert side.gate_a.release(follower).fetch_offsets[(topic, 0)] == 1
            assert figures(cluster, topic, a, b, c) == [(1, 0), (1, 0), (1, 0)]
            # Those fetches tell A both LEOs are 1: its HW moves to 1 and acks=all
            # answers; their answers (HW 1) are lost with A.
            side.gate_a.hold_answers()
            for follower in (b, c):
                side.gate_a.let_through(follower)
            assert acked.result(timeout=ops.WAIT_S) == 0
        assert figures(cluster, topic, a, b, c) == [(1, 1), (1, 0), (1, 0)]
        ops.kill(cluster, a)

        # B leads; C follows it, truncating by its mode before its first fetch.
        wait_state(cluster, topic, b, [b, c])
        c_end = side.gate_b.held(c).fetch_offsets[(topic, 0)]
        # C is in the ISR when B dies: its election is a clean one.
        assert sorted(ops.partition(cluster, topic).isr) == [b, c]
        ops.kill(cluster, b)
        wait_state(cluster, topic, c, [c])
        # C leads: what do consumers find, once one more record is written?
        write(cluster, c, topic, b"m1")
        return LossOutcome(c_end, [b"m0", b"m1"], consumer_reads(cluster, c, topic))
    finally:
        side.gate_a.open()
        side.gate_b.open()


def test_seed_001_data_loss_with_hw_truncation_and_none_with_leader_epochs(
    cluster: Cluster, sides: dict[TruncationMode, Side]
) -> None:
    outcome = side_by_side(sides, lambda side: lose_or_keep_m0(cluster, side))

    hw = outcome[HW_MODE]
    assert hw.c_log_end_after_following_b == 0  # cut to its HW 0: m0 gone from C
    assert hw.read_from_c == [b"m1"]  # the acknowledged m0 is lost...
    lost = [v for v in hw.acknowledged if v not in hw.read_from_c]
    assert lost == [b"m0"]  # ...without any unclean election

    epochs = outcome[EPOCH_MODE]
    assert epochs.c_log_end_after_following_b == 1  # epoch 0 ends at 1 on B: kept
    assert epochs.read_from_c == [b"m0", b"m1"]  # nothing acknowledged is lost


# ------------------------------------------------------------- divergence


@dataclass(frozen=True)
class DivergenceOutcome:
    acknowledged: list[bytes]
    read_from_b: list[bytes | None]  # consumers, from B leading after the unclean election
    stored_on_b: list[bytes | None]
    stored_on_c: list[bytes | None]
    compared: subprocess.CompletedProcess[str]
    read_from_c_leading: list[bytes | None]  # consumers, once C leads again


def diverge_or_not(cluster: Cluster, side: Side) -> DivergenceOutcome:
    b, c, topic, gate = side.b, side.c, side.divergence_topic, side.gate_c
    up(cluster, b, c)
    ops.create_topic(cluster, topic, [(c, b)], unclean__leader__election__enable="true")
    try:
        with ThreadPoolExecutor(1) as pool:
            acked = pool.submit(write, cluster, c, topic, b"m1")
            ops.wait(lambda: ops.replica_log_end(cluster, c, topic, 0) == 1, "m1 on C")
            assert gate.release(b).fetch_offsets[(topic, 0)] == 1  # B stores m1
            gate.release(b)  # B's fetch at 1 moves C's HW to 1; B takes HW 1 from its answer
            assert acked.result(timeout=ops.WAIT_S) == 0
        assert figures(cluster, topic, c, b) == [(1, 1), (1, 1)]

        # B's next fetch stays at the gate: C drops B from the ISR by lag and m2,
        # acknowledged by C alone, moves C's HW to 2 (checkpointed by its tick).
        assert write(cluster, c, topic, b"m2") == 1
        assert sorted(ops.partition(cluster, topic).isr) == [c]
        assert figures(cluster, topic, c, b) == [(2, 2), (1, 1)]
        checkpoint = replica_dir(cluster, c, topic) / HW_CHECKPOINT
        ops.wait(lambda: checkpoint.read_text().strip() == "2", "C's HW checkpoint at 2")
        ops.kill(cluster, c)
        gate.open()  # B's fetches to C held no more (C leads again at the end)

        # B, outside the ISR, leads by unclean election, and m3 goes to offset 1.
        wait_state(cluster, topic, b, [b])
        assert write(cluster, b, topic, b"m3") == 1
        read_from_b = consumer_reads(cluster, b, topic)

        # C restarts as B's follower, truncates by its mode and catches up.
        ops.restart(cluster, c)
        wait_state(cluster, topic, b, [b, c])
        assert write(cluster, b, topic, b"m4") == 2  # acks=all: on both replicas
        compared = compare(cluster, topic, 3, b, c)
        stored_on_b, stored_on_c = (
            stored_values(cluster, b, topic),
            stored_values(cluster, c, topic),
        )

        # C, the preferred replica, leads again: what consumers read there.
        reply = cluster.call("admin", "ElectLeaders", api.ElectLeadersRequest(
            election_type=api.PREFERRED,
            partitions=[api.TopicPartitions(topic=topic, partitions=[0])],
        ), deadline_s=20)  # fmt: skip
        assert [r.error.error_code for r in reply.results] == [0], reply
        wait_state(cluster, topic, c, [b, c])
        ops.wait(lambda: ops.fetch(cluster, c, topic, 0)[1] == 3, "C's HW at 3")
        return DivergenceOutcome(
            [b"m1", b"m2", b"m3", b"m4"], read_from_b, stored_on_b, stored_on_c, compared,
            consumer_reads(cluster, c, topic),
        )  # fmt: skip
    finally:
        gate.open()


def test_seed_001_divergence_with_hw_truncation_and_none_with_leader_epochs(
    cluster: Cluster, sides: dict[TruncationMode, Side]
) -> None:
    outcome = side_by_side(sides, lambda side: diverge_or_not(cluster, side))
    for result in outcome.values():
        # Both modes lose m2 to the unclean election (B never had it): counted.
        assert result.read_from_b == [b"m1", b"m3"]
        assert [v for v in result.acknowledged if v not in result.stored_on_b] == [b"m2"]

    hw = outcome[HW_MODE]
    # Same offsets, different records, both replicas in the ISR.
    assert hw.stored_on_b == [b"m1", b"m3", b"m4"]
    assert hw.stored_on_c == [b"m1", b"m2", b"m4"]
    assert hw.compared.returncode != 0
    assert "batch at offset 1: different bytes" in hw.compared.stdout + hw.compared.stderr
    assert hw.read_from_c_leading == [b"m1", b"m2", b"m4"]  # offset 1 read m3 before

    epochs = outcome[EPOCH_MODE]
    assert epochs.stored_on_b == epochs.stored_on_c == [b"m1", b"m3", b"m4"]
    assert epochs.compared.returncode == 0, epochs.compared.stdout + epochs.compared.stderr
    assert epochs.read_from_c_leading == [b"m1", b"m3", b"m4"]
