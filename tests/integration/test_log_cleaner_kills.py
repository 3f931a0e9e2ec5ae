"""`kill -9` of a broker at random points while it cleans (issue 34, 20 runs).

Two brokers hold one compacted partition (RF 2, 128 KiB segments, 100 keys of
~1 KiB values); the follower is the victim. Its cleaner is throttled
(`log.cleaner.io.max.bytes.per.second`) so that a round over one run's records
takes about half a second, most of it with a `.cleaned` file on disk. Each run
produces 500 records, then SIGKILLs the victim either a random delay after a
`.cleaned` file appears (mid-rewrite, between groups, in a swap or just after
the round) or a random delay after the records were acknowledged (before or
while mapping). After each kill:

* the dead broker's partition directory, copied and opened with the broker's
  own recovery code (`PartitionLog`), has no `.cleaned` or `.swap` file left,
  strictly increasing offsets, and every key's latest value of the records it
  held (each value is unique, so a latest value lost or resurrected shows);
* the restarted broker catches up and holds every key's latest value of all
  records sent, at strictly increasing offsets, and its cleaner checkpoint
  reaches its active segment (so the next run's round covers one run's
  records, not all the killed rounds' ones).

A run takes 3-5 s, mostly the broker's restart (its old session, 2 s here,
must run out before it registers again). Batches of 20 records, so segments
roll (librdkafka would send a run as one 500 KB batch). The seed is printed;
`CLEANER_KILL_SEED=<seed>` replays a run's kill points.
test_log_cleaner_crash.py stops a cleaner child at every step of a swap,
deterministically; this test is the real broker's restart around it.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import time
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path

import pytest

from broker_agent.partitions.compare import compare_compacted, latest_values, stored_batches
from broker_agent.partitions.partition_log import CLEANER_CHECKPOINT, LogConfig, PartitionLog
from broker_agent.partitions.record_codec import records_of
from quorum.log.segment import parse_log_file_name
from tests.integration.controller_cluster import Cluster, ctl_json, running_cluster
from tests.integration.kafka_wire import leader_of, wait_for_topic_everywhere

pytestmark = pytest.mark.slow
BROKERS = (101, 102)
TOPIC = "changelog-kills"
RUNS = 20
RECORDS_PER_RUN = 500
KEYS = 100
SEGMENT_BYTES = 131_072
THROTTLE_BYTES_PER_S = 2_000_000
LEFTOVER_SUFFIXES = (".cleaned", ".swap")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    # A short broker session: a SIGKILLed broker registers again once its old
    # session ran out (DUPLICATE_BROKER_REGISTRATION until then).
    root = tmp_path_factory.mktemp("cleaner-kills")
    with running_cluster(root, voters=1, extra={"broker.session.timeout.ms": "2000"}) as c:
        c.add_brokers(
            *BROKERS,
            broker__heartbeat__interval__ms="250",
            log__cleaner__backoff__ms="100",
            log__cleaner__dedupe__buffer__size="1048576",
            log__cleaner__io__max__bytes__per__second=str(THROTTLE_BYTES_PER_S),
        )
        c.start_brokers()
        c.wait_until(
            lambda: sorted(r["Id"] for r in ctl_json(c, "brokers", "list")
                           if r["State"] == "ONLINE") == sorted(BROKERS),
            30, "the brokers ONLINE",
        )  # fmt: skip
        ctl_json(c, "topics", "create", TOPIC, "--partitions", "1", "--replication-factor", "2",
                 "--config", "cleanup.policy=compact",
                 "--config", f"segment.bytes={SEGMENT_BYTES}",
                 "--config", "min.cleanable.dirty.ratio=0.1")  # fmt: skip
        wait_for_topic_everywhere(c, TOPIC)
        yield c


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(LEFTOVER_SUFFIXES))


def record_offsets(directory: Path) -> list[int]:
    return [r.offset for _, _, data in stored_batches(directory) for r in records_of(data)[1]]


def increasing(offsets: list[int]) -> bool:
    return all(a < b for a, b in pairwise(offsets))


def latest_below(sent: dict[int, tuple[bytes, bytes]], end: int) -> dict[bytes, bytes]:
    """Every key's latest value among the acknowledged records below offset `end`."""
    return {key: value for offset, (key, value) in sorted(sent.items()) if offset < end}


def holds_latest(directory: Path, sent: dict[int, tuple[bytes, bytes]], end: int) -> bool:
    held = {k: v for k, (_, v) in latest_values(directory, end).items()}
    return held == latest_below(sent, end)


def check_crashed_log(directory: Path, copy: Path, sent: dict[int, tuple[bytes, bytes]]) -> str:
    """The dead broker's log as its recovery opens it; returns what it found."""
    shutil.copytree(directory, copy)
    plog = PartitionLog(copy, LogConfig(segment_bytes=SEGMENT_BYTES, cleanup_policy="compact"),
                        int(time.time() * 1000))  # fmt: skip
    try:
        end = plog.log_end_offset
        assert leftovers(copy) == []
        offsets = record_offsets(copy)
        assert increasing(offsets) and (not offsets or offsets[-1] < end)
        assert holds_latest(copy, sent, end)
    finally:
        plog.close()
    return f"log end {end}, {len(offsets)} records"


def cleaned_below_active(directory: Path) -> bool:
    """Whether the cleaner's checkpoint reached the active segment: nothing
    below it is dirty (so the next run's round covers that run's records only)."""
    bases = [parse_log_file_name(p.name) for p in directory.glob("*.log")]
    checkpoint = int((directory / CLEANER_CHECKPOINT).read_text())
    return checkpoint >= max(b for b in bases if b is not None)


def test_a_broker_killed_while_it_cleans_loses_no_latest_value(
    cluster: Cluster, tmp_path: Path
) -> None:
    from confluent_kafka import Producer

    seed = int(os.environ.get("CLEANER_KILL_SEED") or random.SystemRandom().randrange(1 << 32))
    print(f"CLEANER_KILL_SEED={seed}")
    rng = random.Random(seed)
    leader, _ = leader_of(cluster, TOPIC, 0)
    victim = next(b for b in BROKERS if b != leader)
    victim_dir = cluster.brokers[victim].data_dir / f"{TOPIC}-0"
    bootstrap = ",".join(f"127.0.0.1:{cluster.brokers[b].port}" for b in BROKERS)
    # Batches of 20 records (~20 KB): librdkafka would send a run in one batch of
    # 500 KB, and a segment rolls only between batches.
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5,
                         "batch.num.messages": 20})  # fmt: skip
    sent: dict[int, tuple[bytes, bytes]] = {}
    errors: list[str] = []

    def delivered(err: object, message: object) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            sent[message.offset()] = (message.key(), message.value())  # type: ignore[attr-defined]

    mid_rewrite = 0
    for run in range(RUNS):
        for i in range(RECORDS_PER_RUN):
            value = (b"run-%d-%d-" % (run, i)).ljust(1000, b".")
            producer.produce(TOPIC, value, b"key-%d" % rng.randrange(KEYS), on_delivery=delivered)
        assert producer.flush(60) == 0 and not errors, (seed, errors[:3])

        # The kill point: a random delay after a .cleaned file shows, or after the acks.
        after_cleaned = rng.random() < 0.6
        delay = rng.choice((0.0, rng.uniform(0.0, 0.5))) if after_cleaned else rng.uniform(0, 1)
        if after_cleaned:
            deadline = time.monotonic() + 20
            while not leftovers(victim_dir) and time.monotonic() < deadline:
                time.sleep(0.002)
        time.sleep(delay)
        seen = leftovers(victim_dir)
        proc = cluster.brokers[victim]
        assert proc.popen is not None
        proc.popen.send_signal(signal.SIGKILL)
        proc.popen.wait(10)
        mid_rewrite += bool(seen)
        found = check_crashed_log(victim_dir, tmp_path / f"run-{run}", sent)
        print(
            f"run {run}: killed {'after a .cleaned file' if after_cleaned else 'after the acks'}"
            f" + {delay:.3f} s with {seen or 'no round files'} on disk; reopened: {found}"
        )

        cluster.start_brokers(victim)
        end = max(sent) + 1
        cluster.wait_until(
            lambda end=end: holds_latest(victim_dir, sent, end)
            and increasing(record_offsets(victim_dir))
            and cleaned_below_active(victim_dir),
            60, f"the victim caught up and cleaned (run {run}, seed {seed})",
        )  # fmt: skip

    assert mid_rewrite >= 1, f"no kill landed with a round's file on disk (seed {seed})"
    dirs = [cluster.brokers[b].data_dir / f"{TOPIC}-0" for b in (leader, victim)]
    assert compare_compacted(dirs, max(sent) + 1) == [], seed
    for broker in BROKERS:
        assert "marked uncleanable" not in cluster.brokers[broker].log_text(), broker
