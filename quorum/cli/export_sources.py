"""What `quorumctl log export` reads, one batch or one line at a time.

- The committed log, offline from a node's directory or online from the leader.
  Offline, segments are read by the one segment reader recovery uses
  (`quorum/log/segment_reader.py`, a chunk at a time: a segment may be 1 GiB):
  header checksum, format, contiguous offsets, non-decreasing epochs and the
  CRC, a torn tail of the last segment reported and left out, anything else
  refused naming the file, byte position and offset. Online, the
  exporter is a Raft observer: it `Fetch`es from the leader like any observer
  and stops at the high watermark it saw when it started, never past it.
- The brokers' apply traces and event files, line by line. An apply trace is in
  offset order except where the agent restarted (a replay of a few offsets) or
  rebuilt its cache (from 0 or a snapshot), so it is a handful of ascending
  runs; merging the runs of every broker yields all applies in offset order with
  one open file per run, which is how the log gets its commit times without
  holding the traces in memory.
"""

from __future__ import annotations

import heapq
import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import javaproperties

from quorum.cli.export_writer import ExportFailed
from quorum.gen import metadata_pb2 as md
from quorum.gen import raft_pb2 as pb
from quorum.gen import raft_pb2_grpc as pb_grpc
from quorum.log.errors import LogCorruptionError
from quorum.log.segment_reader import read_log
from quorum.raft.records import Batch

TRACE_FILE = "apply-trace.jsonl"
EVENTS_FILE = "broker-events.jsonl"
# The replica id the exporter fetches under: an observer id no node uses.
EXPORT_REPLICA_ID = 2_147_483_000
FETCH_TIMEOUT_S = 10.0
ELECTION_WAIT_S = 15.0  # how long an online export waits for a new leader


# ------------------------------------------------------------------ identity


def _meta(directory: Path, key: str) -> str:
    path = directory / "meta.properties"
    if not path.is_file():
        raise ExportFailed(f"{directory}: not a formatted node directory (no meta.properties)")
    with path.open(encoding="utf-8") as f:
        value = javaproperties.load(f).get(key, "")
    if not value:
        raise ExportFailed(f"{path}: no {key}")
    return str(value)


def cluster_id_of(directory: Path) -> str:
    """The cluster id `quorumctl storage format` wrote into a node's directory."""
    return _meta(directory, "cluster.id")


def broker_id_of(directory: Path) -> int:
    return int(_meta(directory, "node.id"))


# --------------------------------------------------------------- offline log


def _damaged(err: LogCorruptionError) -> ExportFailed:
    return ExportFailed(
        f"damaged segment {err.path} at byte {err.position or 0} (offset {err.offset}): "
        f"{err.detail}; nothing was exported"
    )


@dataclass
class LogReadReport:
    torn_reason: str | None = None
    end_offset: int = 0


def stream_log(
    directory: Path, report: LogReadReport, headers_only: bool = False
) -> Iterator[Batch]:
    """Every whole batch of the log under `directory` (an `__cluster_metadata-0`), in
    offset order. `headers_only` skips payloads (records come back empty): enough
    to learn where a broker's cache ends."""
    try:
        for reader in read_log(directory, payloads=not headers_only):
            for found in reader:
                batch = found.header_only() if headers_only else found.decode()
                report.end_offset = found.header.next_offset
                yield batch
            if reader.torn_reason is not None:
                report.torn_reason = f"{reader.path.name}: {reader.torn_reason}"
    except LogCorruptionError as err:
        raise _damaged(err) from None


# ---------------------------------------------------------------- online log


@dataclass(frozen=True)
class LeaderView:
    address: str
    leader_id: int
    epoch: int
    high_watermark: int
    log_start_offset: int


def describe_leader(addresses: list[str], cluster_id: str) -> LeaderView:
    """Ask the bootstrap controllers who leads, then the leader itself."""
    problems: list[str] = []
    for address in addresses:
        try:
            view = _describe(address, cluster_id)
            if view.role != "leader" and view.leader_address:
                address = view.leader_address
                view = _describe(address, cluster_id)
        except grpc.RpcError as err:
            problems.append(f"{address}: {err.code().name} {err.details()}")
            continue
        if view.role == "leader":
            return LeaderView(
                address,
                view.leader_id,
                view.leader_epoch,
                view.high_watermark,
                view.log_start_offset,
            )
        problems.append(f"{address}: knows no leader")
    raise ExportFailed(f"no controller leads (tried {', '.join(problems) or addresses})")


def _describe(address: str, cluster_id: str) -> pb.DescribeQuorumResponse:
    with grpc.insecure_channel(address) as channel:
        stub = pb_grpc.RaftQuorumStub(channel)
        reply: pb.DescribeQuorumResponse = stub.DescribeQuorum(
            pb.DescribeQuorumRequest(cluster_id=cluster_id), timeout=5
        )
        return reply


def fetch_committed(
    addresses: list[str], cluster_id: str, leader: LeaderView, deadline_s: float = 120.0
) -> Iterator[Batch]:
    """Committed batches from the leader, cut at `leader.high_watermark`, as an
    observer's Fetch gets them; follows a leader change."""
    stop = leader.high_watermark
    offset, last_epoch = 0, 0  # an empty log's last epoch is 0, as followers send it
    deadline = time.monotonic() + deadline_s
    channel = grpc.insecure_channel(leader.address)
    try:
        while offset < stop:
            if time.monotonic() > deadline:
                raise ExportFailed(f"could not read offsets {offset}..{stop} within {deadline_s}s")
            request = pb.FetchRequest(
                cluster_id=cluster_id,
                replica_id=EXPORT_REPLICA_ID,
                epoch=leader.epoch,
                fetch_offset=offset,
                last_fetched_epoch=last_epoch,
                known_high_watermark=stop,
            )
            try:
                reply = pb_grpc.RaftQuorumStub(channel).Fetch(request, timeout=FETCH_TIMEOUT_S)
            except grpc.RpcError as err:
                if err.code() == grpc.StatusCode.INVALID_ARGUMENT or "CLUSTER_ID" in (
                    err.details() or ""
                ):
                    raise ExportFailed(f"the controllers refuse: {err.details()}") from err
                # Unreachable, or no longer the leader of the epoch we asked in:
                # find the current leader; what is below `stop` is committed, so
                # it holds it.
                channel.close()
                time.sleep(0.1)
                leader = _current_leader(addresses, cluster_id)
                channel = grpc.insecure_channel(leader.address)
                continue
            if reply.HasField("snapshot_id") and reply.snapshot_id.end_offset > offset:
                # Below the log start: what precedes is only in a snapshot.
                offset, last_epoch = reply.snapshot_id.end_offset, reply.snapshot_id.epoch
                continue
            if reply.HasField("diverging_epoch") and reply.diverging_epoch.offset < offset:
                raise ExportFailed("the leader's log diverges from what was read; export again")
            for b in reply.batches:
                if b.base_offset >= stop:
                    break
                records = tuple(b.records)[: stop - b.base_offset]
                yield Batch(b.base_offset, b.leader_epoch, records, b.append_time_ms, b.control)
                offset, last_epoch = b.base_offset + len(b.records), b.leader_epoch
    finally:
        channel.close()


def _current_leader(addresses: list[str], cluster_id: str) -> LeaderView:
    """`describe_leader`, tolerating the moments of an election: nobody leads yet."""
    give_up = time.monotonic() + ELECTION_WAIT_S
    while True:
        try:
            return describe_leader(addresses, cluster_id)
        except ExportFailed:
            if time.monotonic() > give_up:
                raise
            time.sleep(0.2)


# ----------------------------------------------------------------- entities


def entity_of(
    record: md.MetadataRecord, kind: str, topics: dict[str, str]
) -> tuple[str, str, str | None, int | None, int | None]:
    """(entity_type, entity, topic, partition, broker_id) for the log table.

    `topics` maps topic ids to names as TopicRecords go by."""
    body: Any = getattr(record, kind)
    if kind in (
        "register_broker",
        "unregister_broker",
        "fence_broker",
        "unfence_broker",
        "broker_registration_change",
        "producer_ids",
    ):
        entity_type = "producer_ids" if kind == "producer_ids" else "broker"
        return entity_type, str(body.broker_id), None, None, int(body.broker_id)
    if kind == "topic":
        topics[body.topic_id] = body.name
        return "topic", body.name, body.name, None, None
    if kind == "remove_topic":
        name = topics.get(body.topic_id, body.topic_id)
        return "topic", name, name, None, None
    if kind in ("partition", "partition_change"):
        name = topics.get(body.topic_id, body.topic_id)
        return "partition", f"{name}:{body.partition_id}", name, int(body.partition_id), None
    if kind == "config":
        resource = md.ConfigResourceType.Name(body.resource_type).removeprefix("CONFIG_RESOURCE_")
        entity = f"{resource.lower()}:{body.resource_name}:{body.name}"
        topic = body.resource_name if body.resource_type == md.CONFIG_RESOURCE_TOPIC else None
        return "config", entity, topic, None, None
    if kind in ("access_control_entry", "remove_access_control_entry"):
        return "acl", body.id, None, None, None
    if kind == "feature_level":
        return "feature", body.name, None, None, None
    return "none", "", None, None, None


# Lifecycle events that committed broker records stand for.
def lifecycle_of(record: md.MetadataRecord, kind: str) -> list[tuple[int, str, int]]:
    """[(broker_id, event, broker_epoch)] for a committed broker record."""
    body: Any = getattr(record, kind)
    simple = {
        "register_broker": "registered",
        "unregister_broker": "unregistered",
        "fence_broker": "fenced",
        "unfence_broker": "unfenced",
    }
    if kind in simple:
        return [(body.broker_id, simple[kind], body.broker_epoch)]
    if kind != "broker_registration_change":
        return []
    events = []
    if body.fenced == md.FENCE_CHANGE_FENCE:
        events.append((body.broker_id, "fenced", body.broker_epoch))
    elif body.fenced == md.FENCE_CHANGE_UNFENCE:
        events.append((body.broker_id, "unfenced", body.broker_epoch))
    if body.HasField("in_controlled_shutdown") and body.in_controlled_shutdown:
        events.append((body.broker_id, "controlled_shutdown", body.broker_epoch))
    return events


# ------------------------------------------------------------------- traces


ApplyRow = tuple[Any, ...]  # the apply table's columns, in order
_decode = json.JSONDecoder().decode


def _bad_line(path: Path, number: int, detail: str) -> ExportFailed:
    return ExportFailed(f"{path}, line {number}: {detail}; nothing was exported")


_OFFSET = re.compile(rb'"offset":(-?\d+)')


def _offset_of(line: bytes) -> int | None:
    found = _OFFSET.search(line)
    return int(found.group(1)) if found else None


@dataclass(frozen=True)
class TraceRun:
    path: Path
    start: int  # byte position of the run's first line
    end: int  # byte position after its last whole line
    first_line: int


@dataclass
class TraceScan:
    runs: list[TraceRun]
    max_offset: int
    lines: int
    torn_tail: bool


def scan_trace(path: Path) -> TraceScan:
    """Find the ascending runs of an apply trace (one cheap pass, offsets only)."""
    runs: list[TraceRun] = []
    previous, max_offset, number = -1, -1, 0
    run_start, run_line, position = 0, 1, 0
    torn = False
    with path.open("rb") as f:
        for line in f:
            number += 1
            if not line.endswith(b"\n"):
                torn = True  # a write cut short by a crash: never flushed, never counted
                break
            offset = _offset_of(line)
            if offset is None:
                if line.strip():
                    raise _bad_line(path, number, "not an apply-trace line (no offset)")
                position += len(line)
                continue
            if offset <= previous:
                runs.append(TraceRun(path, run_start, position, run_line))
                run_start, run_line = position, number
            previous = offset
            max_offset = max(max_offset, offset)
            position += len(line)
    if position > run_start:
        runs.append(TraceRun(path, run_start, position, run_line))
    return TraceScan(runs, max_offset, number, torn)


def read_run(run: TraceRun) -> Iterator[ApplyRow]:
    with run.path.open("rb") as f:
        f.seek(run.start)
        number, position = run.first_line - 1, run.start
        while position < run.end:
            line = f.readline()
            position += len(line)
            number += 1
            if not line.strip():
                continue
            try:
                r = _decode(line.decode())
                commit = r.get("commit_time_ms") or None
                yield (
                    int(r["broker_id"]),
                    int(r["offset"]),
                    int(r["epoch"]),
                    str(r["record_type"]),
                    str(r.get("state", "")),
                    int(r["apply_time_ms"]),
                    commit,
                    r.get("fetch_send_time_ms"),
                    r.get("controller_receive_time_ms"),
                    r.get("controller_send_time_ms"),
                    int(r["receive_time_ms"]),
                    r.get("controller_id"),
                    float(r["clock_offset_ms"]),
                )
            except (ValueError, KeyError, TypeError) as err:
                raise _bad_line(run.path, number, f"unreadable apply-trace line ({err!r})") from err


def merged_applies(runs: list[TraceRun]) -> Iterator[ApplyRow]:
    """Every apply of every run, in offset order."""
    return heapq.merge(*(read_run(r) for r in runs), key=lambda row: row[1])


def read_events(path: Path, cluster_id: str) -> Iterator[dict[str, Any]]:
    """A broker's event lines; one from another cluster stops the export."""
    with path.open("rb") as f:
        for number, line in enumerate(f, start=1):
            if not line.endswith(b"\n"):
                return  # torn by a crash
            if not line.strip():
                continue
            try:
                event: dict[str, Any] = json.loads(line)
                kind = event["event"]
                int(event["time_ms"])
            except (ValueError, KeyError, TypeError) as err:
                raise _bad_line(path, number, f"unreadable event line ({err!r})") from err
            foreign = event.get("cluster_id") or cluster_id
            if foreign != cluster_id:
                raise _bad_line(
                    path,
                    number,
                    f"{kind} event from cluster {foreign!r}, but the log is cluster {cluster_id!r}",
                )
            yield event
