"""The group admin views of the group coordinator (Kafka's GroupCoordinator.handleListGroups /
handleDescribeGroup / handleDeleteGroups): ListGroups over the classic, consumer and share groups this broker
coordinates, DescribeGroups of a classic group, DeleteGroups of empty groups with their offsets. A mixin over the
store of groups, as membership.py and offsets.py are."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from kio.schema.errors import ErrorCode as E

from kbus.protocol.record_batch import build_batch
from kbus.server.coordinator.consumer_group import group_tombstones
from kbus.server.coordinator.group import Group, GroupState
from kbus.server.coordinator.group_store import GroupStore

log = logging.getLogger("kbus.coordinator")


@dataclass(frozen=True, slots=True)
class MemberSummary:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupSummary:
    state: str
    protocol_type: str
    protocol: str
    members: tuple[MemberSummary, ...]


@dataclass(frozen=True, slots=True)
class GroupOverview:
    group_id: str
    protocol_type: str
    state: str
    group_type: str = "classic"


DEAD_GROUP = GroupSummary(GroupState.DEAD.value, "", "", ())
EMPTY_SUMMARY = GroupSummary("", "", "", ())


class GroupAdmin(GroupStore):
    def list_groups(self, states: Iterable[str] = (), types: Iterable[str] = ()) -> tuple[int, list[GroupOverview]]:
        if not self.active:
            return E.coordinator_not_available, []
        wanted_states = {s.lower() for s in states}
        wanted_types = {t.lower() for t in types}
        out: list[GroupOverview] = []
        consumer = {g.group_id for g in self.consumer_groups.values() if not g.dead}
        if not wanted_types or "classic" in wanted_types:
            out.extend(
                GroupOverview(g.group_id, g.protocol_type or "", g.state.value)
                for g in self.groups.values()
                # the Empty classic group holding a consumer group's offsets is that consumer group
                if g.partition in self.owned and g.group_id not in consumer
                and (not wanted_states or g.state.value.lower() in wanted_states)
            )
        if not wanted_types or "consumer" in wanted_types:
            out.extend(
                GroupOverview(g.group_id, "consumer", g.state.value, "consumer")
                for g in self.consumer_groups.values()
                if g.partition in self.owned and not g.dead
                and (not wanted_states or g.state.value.lower() in wanted_states)
            )
        if not wanted_types or "share" in wanted_types:
            out.extend(
                GroupOverview(g.group_id, "share", g.state.value, "share")
                for g in self.share_groups.values()
                if g.partition in self.owned and not g.dead
                and (not wanted_states or g.state.value.lower() in wanted_states)
            )
        return (E.coordinator_load_in_progress if self.loading else E.none), out

    def describe_group(self, group_id: str) -> tuple[int, GroupSummary]:
        error = self.validate_group_status(group_id, "describe")
        if error is not None:
            return error, EMPTY_SUMMARY
        group = self.groups.get(group_id)
        if group is None or group_id in self.consumer_groups or group_id in self.share_groups:
            # a consumer-protocol group is not a classic group: Kafka describes it as Dead here
            return E.none, DEAD_GROUP
        stable = group.is_(GroupState.STABLE)
        members = tuple(
            MemberSummary(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.metadata(group.protocol_name) if stable else b"",
                m.assignment if stable else b"",
            )
            for m in group.members.values()
        )
        return E.none, GroupSummary(
            group.state.value, group.protocol_type or "", (group.protocol_name or "") if stable else "", members
        )

    async def delete_groups(self, group_ids: list[str]) -> dict[str, int]:
        errors: dict[str, int] = {}
        eligible: list[Group] = []
        for group_id in group_ids:
            error = self.validate_group_status(group_id, "delete")
            if error is not None:
                errors[group_id] = error
                continue
            if group_id in self.share_groups:
                errors[group_id] = await self.delete_share_group(group_id)
                continue
            cgroup = self.consumer_groups.get(group_id)
            deleted_consumer = cgroup is not None
            if cgroup is not None:
                if cgroup.members:
                    errors[group_id] = E.non_empty_group
                    continue
                cgroup.dead = True  # its offsets (in the classic group of the same id) go below
                del self.consumer_groups[group_id]
                try:
                    await self.log.append(cgroup.partition, build_batch(group_tombstones(group_id),
                                                                        timestamp_ms=self.clock()))
                except Exception as exc:
                    log.warning("Could not write the tombstones of consumer group %s: %s", group_id, exc)
            group = self.groups.get(group_id)
            if group is None and deleted_consumer:
                errors[group_id] = E.none
            elif group is None or group.is_(GroupState.DEAD):
                errors[group_id] = E.group_id_not_found
            elif group.is_(GroupState.EMPTY):
                group.transition_to(GroupState.DEAD, self.clock())
                eligible.append(group)
            else:
                errors[group_id] = E.non_empty_group
        if eligible:
            await self._cleanup_group_metadata(eligible, lambda g: list(g.offsets))
            errors.update({g.group_id: E.none for g in eligible})
        return errors
