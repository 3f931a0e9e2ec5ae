"""Golden transcripts of the core, in the etcd-io/raft `testdata/` style.

Each `testdata/*.txt` file drives one `RaftNode` through a script of events and
holds, under every command, the effects the node produced. Reading a file tells
you the protocol; a diff tells you what a change did to it.

    command arg=value flag ...
    ----
    expected output (one effect or fact per line, no blank lines)

Lines starting with `#` and blank lines between blocks are commentary. To
rewrite the expected output after an intended change, run

    REWRITE_GOLDEN=1 .venv/bin/pytest -q tests/raft/test_golden.py
    .venv/bin/pytest -q tests/raft/test_golden.py --rewrite

and review the diff before committing it.

The commands are documented on `Script`. Randomness is a fixed source that
always draws the smallest value (`rng=max` on `init` draws the largest), so
every timer in a transcript is the configured minimum and easy to check.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from quorum.raft.config import QuorumStateData, RaftConfig
from quorum.raft.effects import (
    AdvanceLogStart,
    AppendBatches,
    Effect,
    FetchSnapshot,
    FlushLog,
    HighWatermarkChanged,
    PersistQuorumState,
    RequestRefused,
    ResetLog,
    RoleChanged,
    SendMessage,
    TruncateLog,
)
from quorum.raft.log import RaftLog
from quorum.raft.messages import (
    MAX_EPOCH,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    ErrorCode,
    FetchRequest,
    FetchResponse,
    Message,
    VoteRequest,
    VoteResponse,
)
from quorum.raft.node import NotLeaderError, RaftNode
from quorum.raft.records import (
    LEADER_CHANGE_MAGIC,
    Batch,
    OffsetAndEpoch,
    SnapshotId,
    decode_leader_change,
    encode_leader_change,
)
from quorum.raft.states import EpochState
from quorum.raft.transitions import Trigger
from quorum.raft.voters import (
    Voter,
    VoterChangeRefused,
    VoterSet,
    decode_voters,
    encode_voters,
    is_voters_record,
)

TESTDATA = Path(__file__).parent / "testdata"
SEPARATOR = "----"


# ------------------------------------------------------------------ the format


@dataclass
class Block:
    """One command of a transcript: the text before it, the command and its output."""

    preamble: list[str]
    command: str
    expected: list[str]


def parse(text: str) -> tuple[list[Block], list[str]]:
    """Split a transcript into blocks; returns them and any trailing commentary."""
    blocks: list[Block] = []
    preamble: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip() or line.startswith("#"):
            preamble.append(line)
            i += 1
            continue
        command = line
        if i + 1 >= len(lines) or lines[i + 1] != SEPARATOR:
            raise ValueError(f"line {i + 1}: {command!r} is not followed by {SEPARATOR!r}")
        i += 2
        expected: list[str] = []
        while i < len(lines) and lines[i].strip():
            expected.append(lines[i])
            i += 1
        blocks.append(Block(preamble, command, expected))
        preamble = []
    return blocks, preamble


def render(blocks: list[Block], outputs: list[list[str]], trailer: list[str]) -> str:
    out: list[str] = []
    for block, output in zip(blocks, outputs, strict=True):
        out.extend(block.preamble)
        out.append(block.command)
        out.append(SEPARATOR)
        out.extend(output or ["ok"])
    out.extend(trailer)
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- arguments


def parse_args(command: str) -> tuple[str, dict[str, str]]:
    name, *words = command.split()
    args: dict[str, str] = {}
    for word in words:
        key, _, value = word.partition("=")
        args[key] = value if _ else "true"
    return name, args


def opt_id(text: str) -> int | None:
    return None if text == "none" else int(text)


def show_id(value: int | None) -> str:
    return "none" if value is None else str(value)


def parse_epoch(text: str) -> int:
    """`MAX`, `MAX-1` and `MAX+1` name the epoch limit of the wire."""
    if text.startswith("MAX"):
        return MAX_EPOCH + int(text[3:] or 0)
    return int(text)


def show_epoch(epoch: int) -> str:
    if abs(epoch - MAX_EPOCH) <= 2:
        delta = epoch - MAX_EPOCH
        return "MAX" if delta == 0 else f"MAX{delta:+d}"
    return str(epoch)


def voter_set(ids: str) -> VoterSet:
    """`1,2,4` is voters 1, 2 and 4 with directory ids d1, d2 and d4."""
    return VoterSet(tuple(Voter(int(i), f"d{i}") for i in ids.split(",")))


def parse_batches(text: str, voters: frozenset[int], now: int) -> tuple[Batch, ...]:
    """`0@1:LC(1);1@1:a,b` is a LeaderChange by node 1 at offset 0, then records a, b;
    `2@1:VR(1,2,4)` a VotersRecord naming voters 1, 2 and 4."""
    batches: list[Batch] = []
    for spec in filter(None, text.split(";")):
        head, _, body = spec.partition(":")
        base, _, epoch = head.partition("@")
        if body.startswith("VR(") and body.endswith(")"):
            record = encode_voters(voter_set(body[3:-1]))
            batches.append(Batch(int(base), parse_epoch(epoch), (record,), now, control=True))
        elif body.startswith("LC(") and body.endswith(")"):
            leader = int(body[3:-1])
            batches.append(
                Batch(
                    int(base),
                    parse_epoch(epoch),
                    (encode_leader_change(leader, voters),),
                    now,
                    control=True,
                )
            )
        else:
            records = tuple(r.encode() for r in body.split(","))
            batches.append(Batch(int(base), parse_epoch(epoch), records, now))
    return tuple(batches)


def show_batch(batch: Batch) -> str:
    head = f"{batch.base_offset}@{show_epoch(batch.epoch)}"
    if batch.control and batch.records[0].startswith(LEADER_CHANGE_MAGIC):
        leader, _ = decode_leader_change(batch.records[0])
        return f"{head}:LC({leader})"
    if batch.control and is_voters_record(batch.records[0]):
        ids = ",".join(str(v) for v in sorted(decode_voters(batch.records[0]).ids))
        return f"{head}:VR({ids})"
    return f"{head}:" + ",".join(r.decode() for r in batch.records)


def show_batches(batches: tuple[Batch, ...]) -> str:
    return ";".join(show_batch(b) for b in batches)


def parse_position(text: str) -> tuple[int, int]:
    offset, _, epoch = text.partition("@")
    return int(offset), parse_epoch(epoch)


def show_snapshot(snapshot: SnapshotId) -> str:
    return f"{snapshot.end_offset}@{show_epoch(snapshot.epoch)}"


def show_error(error: ErrorCode) -> str:
    return "" if error is ErrorCode.NONE else f" error={error.name}"


# ---------------------------------------------------------------- rendering


def show_message(message: Message) -> str:
    match message:
        case VoteRequest():
            kind = "pre-vote" if message.pre_vote else "vote"
            return (
                f"{kind} epoch={show_epoch(message.candidate_epoch)} "
                f"candidate={message.candidate_id} "
                f"last={message.last_offset}@{show_epoch(message.last_offset_epoch)}"
            )
        case VoteResponse():
            kind = "pre-vote-response" if message.pre_vote else "vote-response"
            return (
                f"{kind} epoch={show_epoch(message.epoch)} "
                f"granted={str(message.vote_granted).lower()} "
                f"leader={show_id(message.leader_id)}{show_error(message.error)}"
            )
        case BeginQuorumEpochRequest():
            epoch = show_epoch(message.leader_epoch)
            return f"begin-epoch epoch={epoch} leader={message.leader_id}"
        case EndQuorumEpochRequest():
            successors = ",".join(str(s) for s in message.preferred_successors) or "none"
            return (
                f"end-epoch epoch={show_epoch(message.leader_epoch)} "
                f"leader={message.leader_id} successors={successors}"
            )
        case BeginQuorumEpochResponse() | EndQuorumEpochResponse():
            kind = (
                "begin-epoch-response"
                if isinstance(message, BeginQuorumEpochResponse)
                else "end-epoch-response"
            )
            return (
                f"{kind} epoch={show_epoch(message.epoch)} "
                f"leader={show_id(message.leader_id)}{show_error(message.error)}"
            )
        case FetchRequest():
            return (
                f"fetch replica={message.replica_id} epoch={show_epoch(message.epoch)} "
                f"offset={message.fetch_offset} "
                f"last-epoch={show_epoch(message.last_fetched_epoch)} "
                f"hw={message.known_high_watermark}"
            )
        case FetchResponse():
            text = (
                f"fetch-response epoch={show_epoch(message.epoch)} "
                f"leader={show_id(message.leader_id)} hw={message.high_watermark} "
                f"start={message.log_start_offset}"
            )
            if message.batches:
                text += f" batches={show_batches(message.batches)}"
            if message.diverging_epoch is not None:
                d = message.diverging_epoch
                text += f" diverging={d.offset}@{show_epoch(d.epoch)}"
            if message.snapshot_id is not None:
                text += f" snapshot={show_snapshot(message.snapshot_id)}"
            return text + show_error(message.error)
    raise AssertionError(f"unknown message {message!r}")


def show_effect(effect: Effect) -> str:
    match effect:
        case PersistQuorumState():
            return (
                f"persist epoch={show_epoch(effect.epoch)} voted={show_id(effect.voted_for)} "
                f"leader={show_id(effect.leader_id)}"
            )
        case RoleChanged():
            return (
                f"role {effect.role.value} epoch={show_epoch(effect.epoch)} "
                f"leader={show_id(effect.leader_id)}"
            )
        case SendMessage():
            return f"send {effect.destination} {show_message(effect.message)}"
        case AppendBatches():
            return f"append {show_batches(effect.batches)}"
        case FlushLog():
            return f"flush end={effect.end_offset} generation={effect.generation}"
        case TruncateLog():
            return f"truncate end={effect.end_offset}"
        case AdvanceLogStart():
            return f"advance-log-start snapshot={show_snapshot(effect.snapshot_id)}"
        case ResetLog():
            return f"reset-log snapshot={show_snapshot(effect.snapshot_id)}"
        case HighWatermarkChanged():
            return f"high-watermark {effect.high_watermark}"
        case FetchSnapshot():
            snapshot = show_snapshot(effect.snapshot_id)
            return f"fetch-snapshot leader={effect.leader_id} snapshot={snapshot}"
        case RequestRefused():
            return f"refused {effect.request} from={effect.source}: {effect.reason}"
    raise AssertionError(f"unknown effect {effect!r}")


# ------------------------------------------------------------------- driver


class FixedRandom:
    """Always the smallest (or the largest) value: timers read as configured."""

    def __init__(self, largest: bool = False) -> None:
        self.largest = largest

    def randrange(self, start: int, stop: int) -> int:
        return stop - 1 if self.largest else start


@dataclass
class Script:
    """Interprets the commands of one transcript against one node.

    Any command may take `now=`, which moves the node's clock there first (it
    must not go back); without it the clock stays put. `init` starts a new node
    with its clock at 0 (or its `now=`). After each event the node is
    polled and its effects are printed in order.

    init id= voters=1,2,3 [epoch= voted= leader= snapshot=END@EPOCH log=BATCHES
         rng=max election-timeout= fetch-timeout= fetch-max-wait= backoff-max=
         linger= max-batch= max-fetch= max-epoch-jump= kraft-version=]
    tick | state | propose records=a,b | resign | unreachable
    flushed end= [generation=]
    snapshot-taken snapshot=END@EPOCH | snapshot-installed snapshot=END@EPOCH
    snapshot-failed
    add-voter id= | remove-voter id= [directory=]     (kraft-version=1; d<id> by default)
    vote | pre-vote from= epoch= last=OFFSET@EPOCH
    vote-response | pre-vote-response from= epoch= granted=true|false [leader=] [error=NAME]
    begin-epoch from= epoch= [leader=]   | begin-epoch-response from= epoch= leader=
    end-epoch from= epoch= [leader=] successors=2,3 | end-epoch-response ...
    fetch from= epoch= offset= last-epoch= [hw=]
    fetch-response from= epoch= leader= hw= [start=] [batches=] [diverging=O@E]
                   [snapshot=O@E] [error=NAME]
    """

    node: RaftNode | None = None
    node_factory: type[RaftNode] = RaftNode
    now: int = 0
    voters: frozenset[int] = field(default_factory=frozenset)

    def run(self, command: str) -> list[str]:
        name, args = parse_args(command)
        if name == "init":
            self.now = 0  # each node starts its own clock
        if "now" in args:
            now = int(args.pop("now"))
            if now < self.now:
                raise ValueError(f"time goes back from {self.now} to {now}")
            self.now = now
        if name == "init":
            return self._init(args)
        node = self.node
        if node is None:
            raise ValueError("init first")
        if name == "state":
            return self._state(node)
        out: list[str] = []
        try:
            self._event(node, name, args, out)
        except (AssertionError, ValueError) as err:
            # The core refuses an impossible input loudly; the transcript says so.
            kind = "AssertionError" if isinstance(err, AssertionError) else "ValueError"
            out.append(f"raised {kind}: {err}")
        out.extend(show_effect(e) for e in node.poll(self.now))
        return out

    def _event(self, node: RaftNode, name: str, args: dict[str, str], out: list[str]) -> None:
        if name == "tick":
            node.on_tick(self.now)
        elif name == "propose":
            records = [r.encode() for r in args["records"].split(",")]
            try:
                result = node.propose(records, self.now)
            except NotLeaderError as err:
                out.append(f"error {err}")
            else:
                offsets = f"{result.first_offset}..{result.last_offset}"
                out.append(f"proposed epoch={result.epoch} offsets={offsets}")
        elif name == "resign":
            node.resign(self.now)
        elif name == "unreachable":
            node.on_leader_unreachable(self.now)
        elif name == "flushed":
            generation = int(args.get("generation", "0"))
            node.on_flushed(int(args["end"]), generation, self.now)
        elif name == "snapshot-taken":
            node.on_snapshot_taken(SnapshotId(*parse_position(args["snapshot"])))
        elif name == "snapshot-installed":
            node.on_snapshot_installed(SnapshotId(*parse_position(args["snapshot"])), self.now)
        elif name == "snapshot-failed":
            node.on_snapshot_failed(self.now)
        elif name in ("add-voter", "remove-voter"):
            self._voter_change(node, name, args, out)
        else:
            source, message = self._message(name, args)
            node.on_message(source, message, self.now)

    def _voter_change(
        self, node: RaftNode, name: str, args: dict[str, str], out: list[str]
    ) -> None:
        voter_id = int(args["id"])
        try:
            if name == "add-voter":
                result = node.add_voter(Voter(voter_id, f"d{voter_id}"), self.now)
            else:
                result = node.remove_voter(voter_id, args.get("directory"), self.now)
        except (NotLeaderError, VoterChangeRefused) as err:
            out.append(f"error {err}")
        else:
            out.append(f"proposed epoch={result.epoch} offsets={result.first_offset}")
        out.append(f"voters={','.join(str(v) for v in sorted(node.voters))}")

    def _init(self, args: dict[str, str]) -> list[str]:
        self.voters = frozenset(int(v) for v in args.get("voters", "1,2,3").split(","))
        options = {
            "election-timeout": "election_timeout_ms",
            "fetch-timeout": "fetch_timeout_ms",
            "backoff-max": "election_backoff_max_ms",
            "fetch-max-wait": "fetch_max_wait_ms",
            "linger": "high_watermark_linger_ms",
            "max-batch": "max_batch_records",
            "max-fetch": "max_fetch_records",
            "max-epoch-jump": "max_epoch_jump",
            "kraft-version": "kraft_version",
        }
        config_args = {
            field_: parse_epoch(args[key]) for key, field_ in options.items() if key in args
        }
        config = RaftConfig(int(args["id"]), self.voters, **config_args)
        snapshot = SnapshotId(*parse_position(args["snapshot"])) if "snapshot" in args else None
        log = RaftLog(snapshot)
        for batch in parse_batches(args.get("log", ""), self.voters, self.now):
            log.append(batch)
        state = QuorumStateData(
            parse_epoch(args.get("epoch", "0")),
            opt_id(args.get("voted", "none")),
            opt_id(args.get("leader", "none")),
        )
        rng = FixedRandom(largest=args.get("rng") == "max")
        self.node = self.node_factory(config, rng, self.now, state, log)
        return [show_effect(e) for e in self.node.poll(self.now)]

    def _state(self, node: RaftNode) -> list[str]:
        log = node.log
        out = [
            f"role={node.role.value} epoch={show_epoch(node.epoch)} "
            f"leader={show_id(node.leader_id)} voted={show_id(node.voted_for)}",
            f"log=[{log.start_offset},{log.end_offset}) last-epoch={show_epoch(log.last_epoch)} "
            f"flushed={node.flushed_end} hw={node.high_watermark} "
            f"next-deadline={node.next_deadline()}",
        ]
        for replica, p in sorted(node.replica_progress().items()):
            out.append(
                f"progress {replica}: end={p.end_offset} last-fetch={show_id(p.last_fetch_ms)} "
                f"caught-up={show_id(p.last_caught_up_ms)} "
                f"fetched-this-epoch={str(p.fetched_this_epoch).lower()}"
            )
        return out

    def _message(self, name: str, args: dict[str, str]) -> tuple[int, Message]:
        if name in ("pre-vote", "pre-vote-response"):
            name, args = name.removeprefix("pre-"), {**args, "pre": "true"}
        source = int(args["from"])
        epoch = parse_epoch(args["epoch"])
        leader = opt_id(args.get("leader", str(source)))
        error = ErrorCode[args.get("error", "NONE")]
        message: Message
        if name == "vote":
            offset, last_epoch = parse_position(args.get("last", "0@0"))
            message = VoteRequest(epoch, source, last_epoch, offset, pre_vote="pre" in args)
        elif name == "vote-response":
            granted = args["granted"] == "true"
            leader = opt_id(args.get("leader", "none"))
            message = VoteResponse(epoch, granted, leader, "pre" in args, error)
        elif name == "begin-epoch":
            message = BeginQuorumEpochRequest(epoch, source if leader is None else leader)
        elif name == "begin-epoch-response":
            message = BeginQuorumEpochResponse(epoch, leader, error)
        elif name == "end-epoch":
            successors = tuple(int(s) for s in args.get("successors", "").split(",") if s)
            message = EndQuorumEpochRequest(epoch, source if leader is None else leader, successors)
        elif name == "end-epoch-response":
            message = EndQuorumEpochResponse(epoch, leader, error)
        elif name == "fetch":
            message = FetchRequest(
                source,
                epoch,
                int(args["offset"]),
                parse_epoch(args.get("last-epoch", "0")),
                int(args.get("hw", "0")),
            )
        elif name == "fetch-response":
            diverging = snapshot = None
            if "diverging" in args:
                diverging = OffsetAndEpoch(*parse_position(args["diverging"]))
            if "snapshot" in args:
                snapshot = SnapshotId(*parse_position(args["snapshot"]))
            message = FetchResponse(
                epoch,
                leader,
                int(args.get("hw", "0")),
                int(args.get("start", "0")),
                parse_batches(args.get("batches", ""), self.voters, self.now),
                diverging,
                snapshot,
                error,
            )
        else:
            raise ValueError(f"unknown command {name!r}")
        return source, message


# -------------------------------------------------------------------- tests


def rewriting(config: pytest.Config) -> bool:
    return bool(os.environ.get("REWRITE_GOLDEN")) or bool(config.getoption("rewrite", False))


TRANSCRIPTS = sorted(TESTDATA.glob("*.txt"))


@pytest.mark.parametrize("path", TRANSCRIPTS, ids=[p.stem for p in TRANSCRIPTS])
def test_transcript(path: Path, request: pytest.FixtureRequest) -> None:
    blocks, trailer = parse(path.read_text())
    script = Script()
    outputs = [script.run(block.command) for block in blocks]
    if rewriting(request.config):
        path.write_text(render(blocks, outputs, trailer))
        return
    for block, output in zip(blocks, outputs, strict=True):
        assert (output or ["ok"]) == block.expected, (
            f"{path.name}: {block.command!r}\n"
            "rewrite with REWRITE_GOLDEN=1 and review the diff if the change is intended"
        )


def test_there_are_enough_transcripts() -> None:
    assert len(TRANSCRIPTS) >= 20


def test_the_transcripts_take_every_kind_of_transition() -> None:
    """Between them the transcripts show every trigger of the transition table."""
    seen: set[Trigger] = set()

    class Recording(RaftNode):
        def _transition(self, trigger: Trigger, new: EpochState, now: int) -> None:
            seen.add(trigger)
            super()._transition(trigger, new, now)

    for path in TRANSCRIPTS:
        blocks, _ = parse(path.read_text())
        script = Script(node_factory=Recording)
        for block in blocks:
            script.run(block.command)
    assert seen == set(Trigger)
