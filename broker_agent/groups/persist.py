"""Groups to and from `__consumer_offsets`: a group's metadata record, and a
partition's records replayed into groups when this broker starts leading it."""

from __future__ import annotations

from collections.abc import Iterable

from broker_agent.groups import records as rec
from broker_agent.groups.group import Group, Member, OffsetEntry
from broker_agent.groups.state import GroupState


def group_record(group: Group, now: int) -> tuple[bytes, bytes | None]:
    """GroupMetadata as Kafka stores it: each member's metadata of the chosen
    protocol (its subscription) and its assignment."""
    value = rec.GroupValue(
        group.protocol_type or "",
        group.generation,
        group.protocol,
        group.leader if group.members else None,
        now,
        tuple(
            rec.MemberValue(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.session_timeout_ms,
                m.metadata(group.protocol),
                m.assignment,
            )
            for m in group.members.values()
        ),
    )
    return rec.group_key(group.group_id), rec.group_value(value)


def load_groups(
    entries: Iterable[tuple[bytes, bytes | None]], now: int
) -> tuple[dict[str, Group], int]:
    """Replay one offsets partition (oldest first; the last record of a key wins, a
    tombstone deletes). Groups with members come back Stable with their sessions
    restarted from now, as Kafka loads them; records that do not parse are skipped
    and counted."""
    groups: dict[str, rec.GroupValue | None] = {}
    offsets: dict[str, dict[tuple[str, int], OffsetEntry]] = {}
    skipped = 0
    out: dict[str, Group] = {}
    for key_bytes, value in entries:
        try:
            key = rec.parse_key(key_bytes)
            if isinstance(key, rec.OffsetKey):
                table = offsets.setdefault(key.group, {})
                if value is None:
                    table.pop((key.topic, key.partition), None)
                else:
                    v = rec.parse_offset_value(value)
                    table[(key.topic, key.partition)] = OffsetEntry(
                        v.offset, v.leader_epoch, v.metadata, v.commit_timestamp
                    )
            else:
                groups[key.group] = None if value is None else rec.parse_group_value(value)
        except (rec.MalformedRecord, UnicodeDecodeError):
            skipped += 1
    for gid in set(groups) | set(offsets):
        stored = groups.get(gid)
        if stored is None and gid in groups and not offsets.get(gid):
            continue  # deleted
        group = Group(gid, state_timestamp=now)
        if stored is not None:
            group.generation = stored.generation
            group.protocol_type = stored.protocol_type or None
            group.protocol = stored.protocol
            group.leader = stored.leader
            if stored.current_state_timestamp >= 0:
                group.state_timestamp = stored.current_state_timestamp
            for mv in stored.members:
                member = Member(
                    mv.member_id,
                    mv.group_instance_id,
                    mv.client_id,
                    mv.client_host,
                    mv.rebalance_timeout_ms,
                    mv.session_timeout_ms,
                    stored.protocol_type,
                    [(stored.protocol or "", mv.subscription)],
                    mv.assignment,
                    heartbeat_deadline=now + mv.session_timeout_ms,
                )
                group.add(member)
                if mv.group_instance_id is not None:
                    group.static[mv.group_instance_id] = mv.member_id
            if group.members:
                group.state = GroupState.STABLE
        group.offsets = offsets.get(gid, {})
        out[gid] = group
    return out, skipped
