"""ShareGroupPersistence: the share groups' records in ``__consumer_offsets`` (server/share/
group_records.py) written through the group coordinator's writer when a group changes, and
replayed at start-up (server/groups/loader.py hands the share record types here), as Kafka's
group coordinator keeps share groups."""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING

from kafka_sidecar.protocol import errors

from ..groups.store import append_error_to_response_error
from . import group_records as rec
from .group import ShareGroup, ShareGroupMember

if TYPE_CHECKING:
    from .coordinator import ShareCoordinator

log = logging.getLogger(__name__.rpartition(".")[0] + ".coordinator")


class ShareGroupPersistence:
    def __init__(self, coordinator: ShareCoordinator) -> None:
        self.coordinator = coordinator
        self.written: dict[str, rec.GroupView] = {}  # what was last written (or replayed) per group
        self.replayed_initialized: dict[str, set[tuple[uuid.UUID, int]]] = {}

    # ---- writing -------------------------------------------------------------------------------

    def view(self, group: ShareGroup) -> rec.GroupView:
        by_id = self.coordinator.broker.metadata.topics_by_id
        initialized: dict[uuid.UUID, list[int]] = {}
        for g, t, p in self.coordinator.share_partitions:
            if g == group.group_id and t in by_id:
                initialized.setdefault(t, []).append(p)
        members = {
            mid: rec.MemberView((m.rack_id, m.client_id, m.client_host, tuple(m.subscribed_topic_names)),
                                rec.assignment_of(m.target_assignment),
                                (m.member_epoch, m.previous_member_epoch, rec.assignment_of(m.assignment)))
            for mid, m in sorted(group.members.items())
        }
        return rec.GroupView(group.group_epoch, group.assignment_epoch, group.last_assignment_ms, members,
                             tuple((t, by_id[t].name, tuple(sorted(ps))) for t, ps in sorted(initialized.items(), key=lambda kv: str(kv[0]))))

    def sync(self, group: ShareGroup) -> int:
        """Write what changed in ``group`` since it was last written (nothing if nothing did):
        the API's error for a failed append (what was written is then unchanged), else NONE."""
        after = self.view(group)
        before = self.written.get(group.group_id)
        records = rec.diff_records(group.group_id, before, after)
        if not records:
            return errors.NONE
        error = self._write(group.group_id, records)
        if error == errors.NONE:
            self.written[group.group_id] = after
        return error

    def deleted(self, group_id: str) -> int:
        """The group is deleted: its records are tombstoned (forgotten once written)."""
        before = self.written.get(group_id)
        if before is None:
            return errors.NONE
        error = self._write(group_id, rec.tombstones(group_id, before))
        if error == errors.NONE:
            del self.written[group_id]
        return error

    def _write(self, group_id: str, records: list[rec.Record]) -> int:
        """Append to the group's __consumer_offsets partition through the coordinator runtime."""
        gc = getattr(self.coordinator.broker, "group_coordinator", None)
        if gc is None:
            return errors.NONE  # no group coordinator (unit tests): nothing is written
        error, _ = gc.writer.write(group_id, records)
        if error != errors.NONE:
            log.warning("cannot write the records of share group %s to __consumer_offsets: error %d", group_id, error)
            return append_error_to_response_error(error)
        return errors.NONE

    # ---- replay (the loader's, before serving) ---------------------------------------------------

    def replay(self, key_bytes: bytes, value: bytes | None) -> None:
        key = rec.decode_share_key(key_bytes)
        if key is None:
            return
        groups = self.coordinator.groups
        gid, t = key.group, key.record_type
        if t == rec.SHARE_GROUP_METADATA:
            if value is None:
                groups.pop(gid, None)
                self.replayed_initialized.pop(gid, None)
                return
            self._group(gid).group_epoch = rec.decode_epoch_value(value)
            return
        if t == rec.SHARE_GROUP_STATE_PARTITION_METADATA:
            if value is None:
                self.replayed_initialized.pop(gid, None)
            else:
                self.replayed_initialized[gid] = rec.decode_state_partition_metadata_value(value)
            return
        group = groups.get(gid)
        if value is None:
            if group is not None and key.member is not None and t == rec.SHARE_GROUP_MEMBER_METADATA:
                group.members.pop(key.member, None)
            return
        group = self._group(gid)
        if t == rec.SHARE_GROUP_TARGET_ASSIGNMENT_METADATA:
            group.assignment_epoch, group.last_assignment_ms = rec.decode_target_assignment_metadata_value(value)
            return
        assert key.member is not None
        member = group.members.get(key.member)
        if member is None:
            member = group.members[key.member] = ShareGroupMember(key.member, 0, "", "", None, [], 0)
        if t == rec.SHARE_GROUP_MEMBER_METADATA:
            member.rack_id, member.client_id, member.client_host, topics = rec.decode_member_metadata_value(value)
            member.subscribed_topic_names = list(topics)
        elif t == rec.SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER:
            member.target_assignment = {tid: list(ps) for tid, ps in rec.decode_target_assignment_member_value(value)}
        elif t == rec.SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT:
            member.member_epoch, member.previous_member_epoch, parts = rec.decode_current_assignment_value(value)
            member.assignment = {tid: list(ps) for tid, ps in parts}

    def _group(self, group_id: str) -> ShareGroup:
        group = self.coordinator.groups.get(group_id)
        if group is None:
            group = self.coordinator.groups[group_id] = ShareGroup(group_id)
        return group

    def replayed_partitions(self) -> dict[str, set[tuple[uuid.UUID, int]]]:
        return self.replayed_initialized

    def on_loaded(self) -> None:
        """After both replays: the groups as written; members' sessions start now (Kafka schedules
        every member's session timeout when it loads the group)."""
        now = self.coordinator.runtime.clock.now_ms()
        for group in self.coordinator.groups.values():
            for m in group.members.values():
                m.last_heartbeat_ms = now
            self.written[group.group_id] = self.view(group)
        self.replayed_initialized.clear()
