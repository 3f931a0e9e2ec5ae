"""A group's committed offsets and its records in `__consumer_offsets` (seed 002):
OffsetCommit, OffsetFetch, OffsetDelete, offsets retention, DeleteGroups and
loading a partition's groups when this broker becomes its leader.

Pure, like the rest of the machine (every call takes `now`, writes are `Write`
effects). Kept apart from the membership protocol (`machine.py`: JoinGroup,
SyncGroup, Heartbeat, LeaveGroup), as Kafka keeps its GroupMetadataManager
apart from the GroupCoordinator: what is stored for a group, and how members
come and go, change for different reasons. `GroupMachine` extends this class,
so the driver and the tests see one machine.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from kio.schema.errors import ErrorCode

from broker_agent.groups import records as rec
from broker_agent.groups.effects import CommitPlan, Effect, Write
from broker_agent.groups.group import Group, GroupConfig, OffsetEntry
from broker_agent.groups.persist import group_record, load_groups
from broker_agent.groups.state import GroupState


class GroupOffsets:
    """The groups this broker coordinates, and what is stored for each."""

    def __init__(self, config: GroupConfig | None = None) -> None:
        self.config = config or GroupConfig()
        self.groups: dict[str, Group] = {}

    @staticmethod
    def _fenced(group: Group, member_id: str, instance: str | None) -> bool:
        return instance is not None and group.static.get(instance) != member_id

    # ---------------------------------------------------------------- offsets

    def commit(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation: int,
        offsets: list[tuple[str, int, int, int, str | None]],
        now: int,
    ) -> CommitPlan:
        """OffsetCommit's checks, in Kafka's order; offsets take effect on `apply`."""

        def refused(error: ErrorCode) -> CommitPlan:
            return CommitPlan(error, {(t, p): error for t, p, *_ in offsets}, (), {})

        if not group_id:
            return refused(ErrorCode.invalid_group_id)
        group = self.groups.get(group_id)
        if group is None:
            if generation >= 0:
                # A member of a group this coordinator does not know (Kafka: the
                # generation check fails for an unknown group).
                return refused(ErrorCode.illegal_generation)
            group = self.groups[group_id] = Group(group_id, state_timestamp=now)
        if group.state is GroupState.DEAD:
            return refused(ErrorCode.coordinator_not_available)
        if not (generation < 0 and group.state is GroupState.EMPTY):
            if self._fenced(group, member_id, group_instance_id):
                return refused(ErrorCode.fenced_instance_id)
            if group.state is GroupState.COMPLETING_REBALANCE:
                return refused(ErrorCode.rebalance_in_progress)
            if member_id not in group.members:
                return refused(ErrorCode.unknown_member_id)
            if generation != group.generation:
                return refused(ErrorCode.illegal_generation)
            member = group.members[member_id]
            member.heartbeat_deadline = now + member.session_timeout_ms
        errors: dict[tuple[str, int], ErrorCode] = {}
        records: list[tuple[bytes, bytes | None]] = []
        accepted: dict[tuple[str, int], OffsetEntry] = {}
        for topic, partition, offset, epoch, metadata in offsets:
            text = metadata or ""
            if len(text.encode()) > self.config.offset_metadata_max_bytes:
                errors[(topic, partition)] = ErrorCode.offset_metadata_too_large
                continue
            entry = OffsetEntry(offset, epoch, text, now)
            errors[(topic, partition)] = ErrorCode.none
            accepted[(topic, partition)] = entry
            records.append(
                (
                    rec.offset_key(group_id, topic, partition),
                    rec.offset_value(rec.OffsetValue(offset, epoch, text, now)),
                )
            )
        return CommitPlan(ErrorCode.none, errors, tuple(records), accepted)

    def apply(self, group_id: str, accepted: dict[tuple[str, int], OffsetEntry]) -> None:
        group = self.groups.get(group_id)
        if group is not None and group.state is not GroupState.DEAD:
            group.offsets.update(accepted)

    def fetch_offsets(
        self, group_id: str, partitions: list[tuple[str, int]] | None
    ) -> dict[tuple[str, int], OffsetEntry | None]:
        """Committed offsets (None: nothing committed); `partitions` None: all."""
        group = self.groups.get(group_id)
        offsets = group.offsets if group is not None else {}
        if partitions is None:
            return dict(sorted(offsets.items()))
        return {tp: offsets.get(tp) for tp in partitions}

    def delete_offsets(
        self,
        group_id: str,
        partitions: list[tuple[str, int]],
        subscribed: Callable[[Group], set[str]],
    ) -> tuple[ErrorCode, dict[tuple[str, int], ErrorCode], list[Effect]]:
        """OffsetDelete: refused for topics the group's members still consume."""
        group = self.groups.get(group_id)
        if group is None or group.state is GroupState.DEAD:
            return ErrorCode.group_id_not_found, {}, []
        topics = subscribed(group) if group.state is not GroupState.EMPTY else set()
        errors: dict[tuple[str, int], ErrorCode] = {}
        tombstones = []
        for topic, partition in partitions:
            if topic in topics:
                errors[(topic, partition)] = ErrorCode.group_subscribed_to_topic
                continue
            errors[(topic, partition)] = ErrorCode.none
            if group.offsets.pop((topic, partition), None) is not None:
                tombstones.append((rec.offset_key(group_id, topic, partition), None))
        effects: list[Effect] = [Write(group_id, tuple(tombstones))] if tombstones else []
        return ErrorCode.none, errors, effects

    def _expire_offsets(self, group: Group, now: int) -> list[Effect]:
        """offsets.retention.minutes: an empty group's offsets expire that long after
        it became empty (Kafka 2.1+, KIP-211)."""
        if group.state is not GroupState.EMPTY or not group.offsets:
            return []
        if now - group.state_timestamp < self.config.offsets_retention_ms:
            return []
        tombstones = tuple((rec.offset_key(group.group_id, t, p), None) for t, p in group.offsets)
        group.offsets.clear()
        return [Write(group.group_id, tombstones)]

    # ----------------------------------------------------------- administration

    def delete_group(self, group_id: str, now: int) -> tuple[ErrorCode, list[Effect]]:
        group = self.groups.get(group_id)
        if not group_id:
            return ErrorCode.invalid_group_id, []
        if group is None or group.state is GroupState.DEAD:
            return ErrorCode.group_id_not_found, []
        if group.state is not GroupState.EMPTY:
            return ErrorCode.non_empty_group, []
        records = [(rec.offset_key(group_id, t, p), None) for t, p in group.offsets]
        records.append((rec.group_key(group_id), None))
        group.transition(GroupState.DEAD, now)
        del self.groups[group_id]
        return ErrorCode.none, [Write(group_id, tuple(records))]

    # ------------------------------------------------------------------ loading

    def load(self, entries: Iterable[tuple[bytes, bytes | None]], now: int) -> int:
        """Replay one offsets partition's records (see `persist.load_groups`);
        returns how many records did not parse and were skipped."""
        groups, skipped = load_groups(entries, now)
        self.groups.update(groups)
        return skipped

    def _group_record(self, group: Group, now: int) -> tuple[bytes, bytes | None]:
        return group_record(group, now)


__all__ = ["GroupOffsets"]
