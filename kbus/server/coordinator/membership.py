"""Group membership (the classic protocol's half of Kafka's GroupCoordinator): JoinGroup, SyncGroup, Heartbeat,
LeaveGroup. The admin views (ListGroups, DescribeGroups, DeleteGroups) are group_admin.py's.

Requests that must wait (JoinGroup until the rebalance completes, SyncGroup until the leader's assignment is
stored) await futures the state machine resolves; deadlines (session timeouts, rebalance timeouts, the initial
rebalance delay, pending syncs) live in the store's `Timers` wheel on an injected clock, so every transition is
testable without sockets or sleeps.

Why ~620 lines: one state machine, Kafka's classic rebalance protocol, whose steps (join, the rebalance, sync,
heartbeats, expirations, leave) each move the same group through its states.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable

from kio.schema.errors import ErrorCode as E

from kbus.server.coordinator.commit_path import serving_consumer_group
from kbus.server.coordinator.consumer_group import ConsumerGroup
from kbus.server.coordinator.group import Group, GroupState, JoinResult, Member, SyncResult
from kbus.server.coordinator.migration import GroupMigration

log = logging.getLogger("kbus.coordinator")

NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000
# a JoinGroup's member details: client id, client host, rebalance and session timeouts (ms), protocol type and the
# (name, metadata) protocols it supports
JoinArgs = tuple[str, str, int, int, str, list[tuple[str, bytes]]]
STATES_BY_LOWER = {s.value.lower(): s for s in GroupState}




class GroupMembership(GroupMigration):
    def _consumer_group_with_members(self, group_id: str) -> ConsumerGroup | None:
        """The consumer group serving this group id's classic requests (Kafka 4's online migration)."""
        return serving_consumer_group(self.consumer_groups, group_id)

    # ================================================================ JoinGroup

    async def join_group(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        *,
        require_known_member_id: bool,
        supports_skip_assignment: bool,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
    ) -> JoinResult:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[JoinResult] = loop.create_future()

        def respond(result: JoinResult) -> None:
            if not fut.done():
                fut.set_result(result)

        error = self.validate_group_status(group_id, "join")
        if error is not None:
            return JoinResult(error, member_id)
        if not self.config.min_session_timeout_ms <= session_timeout_ms <= self.config.max_session_timeout_ms:
            return JoinResult(E.invalid_session_timeout, member_id)
        if rebalance_timeout_ms < 0:  # JoinGroup v0 has no rebalance timeout: Kafka uses the session timeout
            rebalance_timeout_ms = session_timeout_ms
        is_unknown = member_id == ""
        if group_id in self.share_groups:
            return JoinResult(E.inconsistent_group_protocol, member_id)  # a share group is never classic
        cgroup = self.consumer_groups.get(group_id)
        if cgroup is not None:
            if cgroup.members:
                # A consumer-protocol group with members: the classic member joins it (Kafka 4's
                # classicGroupJoinToConsumerGroup, whatever group.consumer.migration.policy says)
                return await self.classic_join_to_consumer_group(
                    cgroup, member_id, group_instance_id, require_known_member_id=require_known_member_id,
                    client_id=client_id, client_host=client_host, rebalance_timeout_ms=rebalance_timeout_ms,
                    session_timeout_ms=session_timeout_ms, protocol_type=protocol_type, protocols=protocols,
                )
            del self.consumer_groups[group_id]  # an empty consumer group becomes classic, as in Kafka
        group = self.groups.get(group_id)
        if group is None:
            if not is_unknown:
                return JoinResult(E.unknown_member_id, member_id)
            group = Group(group_id, self.partition_for(group_id), current_state_timestamp=self.clock())
            self.groups[group_id] = group
        if not self._accept_joining_member(group, member_id):
            group.remove(member_id)
            return JoinResult(E.group_max_size_reached, "")
        args = (client_id, client_host, rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols)
        if is_unknown:
            self._do_new_member_join(
                group, group_instance_id, require_known_member_id, supports_skip_assignment, args, fut, respond
            )
        else:
            self._do_current_member_join(group, member_id, group_instance_id, args, fut, respond)
        self._check_join(group)
        return await fut

    def _accept_joining_member(self, group: Group, member_id: str) -> bool:
        if group.state in (GroupState.EMPTY, GroupState.DEAD):
            return True
        if group.is_(GroupState.PREPARING_REBALANCE):
            return (group.has(member_id) and group.get(member_id).is_awaiting_join) or (
                group.num_awaiting_join() < self.config.max_size
            )
        return group.has(member_id) or group.size < self.config.max_size

    def _do_new_member_join(
        self,
        group: Group,
        instance_id: str | None,
        require_known: bool,
        skip_ok: bool,
        args: JoinArgs,
        fut: asyncio.Future[JoinResult],
        respond: Callable[[JoinResult], None],
    ) -> None:
        client_id, _host, rebalance_ms, session_ms, protocol_type, protocols = args
        if group.is_(GroupState.DEAD):
            return respond(JoinResult(E.coordinator_not_available, ""))
        if not group.supports_protocols(protocol_type, [n for n, _ in protocols]):
            return respond(JoinResult(E.inconsistent_group_protocol, ""))
        new_member_id = f"{instance_id or client_id}-{uuid.uuid4()}"
        if instance_id is not None:
            old_member_id = group.static_member_id(instance_id)
            if old_member_id is not None:
                return self._update_static_member_and_rebalance(
                    group,
                    old_member_id,
                    new_member_id,
                    instance_id,
                    protocols,
                    rebalance_ms,
                    session_ms,
                    fut,
                    skip_ok,
                )
            return self._add_member_and_rebalance(group, new_member_id, instance_id, args, fut)
        if require_known:
            group.pending_members.add(new_member_id)
            self.timers.schedule(
                ("pending", group.group_id, new_member_id),
                self.clock() + session_ms,
                lambda: self._on_expire_pending(group, new_member_id),
            )
            return respond(JoinResult(E.member_id_required, new_member_id))
        return self._add_member_and_rebalance(group, new_member_id, None, args, fut)

    def _do_current_member_join(
        self,
        group: Group,
        member_id: str,
        instance_id: str | None,
        args: JoinArgs,
        fut: asyncio.Future[JoinResult],
        respond: Callable[[JoinResult], None],
    ) -> None:
        _client_id, _host, rebalance_ms, session_ms, protocol_type, protocols = args
        if group.is_(GroupState.DEAD):
            return respond(JoinResult(E.coordinator_not_available, member_id))
        if not group.supports_protocols(protocol_type, [n for n, _ in protocols]):
            return respond(JoinResult(E.inconsistent_group_protocol, member_id))
        if member_id in group.pending_members:
            self.timers.cancel(("pending", group.group_id, member_id))
            return self._add_member_and_rebalance(group, member_id, None, args, fut)
        error = self._validate_current_member(group, member_id, instance_id)
        if error is not None:
            return respond(JoinResult(error, member_id))
        member = group.get(member_id)
        state = group.state
        if state is GroupState.PREPARING_REBALANCE:
            return self._update_member_and_rebalance(group, member, protocols, rebalance_ms, session_ms, fut)
        if state is GroupState.COMPLETING_REBALANCE:
            if member.matches(protocols):
                # Same metadata: the member probably lost the JoinGroup response; answer with this generation.
                return respond(self._join_result(group, member, include_members=group.is_leader(member_id)))
            return self._update_member_and_rebalance(group, member, protocols, rebalance_ms, session_ms, fut)
        if state is GroupState.STABLE:
            if group.is_leader(member_id) or not member.matches(protocols):
                # The leader re-joining forces a rebalance (it may have seen metadata changes the members can't).
                return self._update_member_and_rebalance(group, member, protocols, rebalance_ms, session_ms, fut)
            return respond(self._join_result(group, member, include_members=False))
        return respond(JoinResult(E.unknown_member_id, member_id))

    def _join_result(
        self,
        group: Group,
        member: Member,
        *,
        include_members: bool,
        skip_assignment: bool = False,
        leader_id: str | None = None,
    ) -> JoinResult:
        return JoinResult(
            E.none,
            member.member_id,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader_id=(group.leader_id or "") if leader_id is None else leader_id,
            skip_assignment=skip_assignment,
            members=group.current_member_metadata() if include_members else (),
        )

    def _add_member_and_rebalance(
        self,
        group: Group,
        member_id: str,
        instance_id: str | None,
        args: JoinArgs,
        fut: asyncio.Future[JoinResult],
    ) -> None:
        client_id, client_host, rebalance_ms, session_ms, protocol_type, protocols = args
        member = Member(
            member_id,
            instance_id,
            client_id,
            client_host,
            rebalance_ms,
            session_ms,
            protocol_type,
            list(protocols),
            is_new=True,
        )
        if group.is_(GroupState.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member, fut)
        # A new member has no id to heartbeat with while its JoinGroup is parked; bound it generously instead.
        self._schedule_heartbeat(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(group, f"adding new member {member_id}")

    def _update_member_and_rebalance(
        self,
        group: Group,
        member: Member,
        protocols: list[tuple[str, bytes]],
        rebalance_ms: int,
        session_ms: int,
        fut: asyncio.Future[JoinResult],
    ) -> None:
        group.update_member(member, list(protocols), rebalance_ms, session_ms, fut)
        self._maybe_prepare_rebalance(group, f"member {member.member_id} re-joined")

    def _update_static_member_and_rebalance(
        self,
        group: Group,
        old_member_id: str,
        new_member_id: str,
        instance_id: str,
        protocols: list[tuple[str, bytes]],
        rebalance_ms: int,
        session_ms: int,
        fut: asyncio.Future[JoinResult],
        skip_ok: bool,
    ) -> None:
        current_leader = group.leader_id or ""
        member = group.replace_static_member(
            instance_id,
            old_member_id,
            new_member_id,
            JoinResult(E.fenced_instance_id, old_member_id),
            SyncResult(E.fenced_instance_id),
        )
        self.timers.cancel(("hb", group.group_id, old_member_id))
        self._schedule_heartbeat(group, member)
        old = (list(member.protocols), member.rebalance_timeout_ms, member.session_timeout_ms)
        group.update_member(member, list(protocols), rebalance_ms, session_ms, fut)
        if group.is_(GroupState.STABLE):
            if group.protocol_name == group.select_protocol():
                # The known instance came back with a compatible subscription: no rebalance, just persist the
                # new member id and hand back the current generation.
                assignment = {m.member_id: m.assignment for m in group.members.values()}
                self.run_in_background(
                    self._finish_static_rejoin(
                        group,
                        member,
                        old_member_id,
                        new_member_id,
                        instance_id,
                        old,
                        assignment,
                        current_leader,
                        skip_ok,
                    )
                )
            else:
                self._maybe_prepare_rebalance(group, f"static member {instance_id} changed protocols")
        elif group.is_(GroupState.COMPLETING_REBALANCE):
            # The leader may already hold the old member id; only a new generation can assign the new one.
            self._prepare_rebalance(group, f"static member {instance_id} re-joined during CompletingRebalance")

    async def _finish_static_rejoin(
        self,
        group: Group,
        member: Member,
        old_member_id: str,
        new_member_id: str,
        instance_id: str,
        old: tuple[list[tuple[str, bytes]], int, int],
        assignment: dict[str, bytes],
        current_leader: str,
        skip_ok: bool,
    ) -> None:
        error = await self._store_group(group, assignment)
        if member.join_future is None:
            return
        if not self._live(group) or not group.has(member.member_id):
            fut, member.join_future = member.join_future, None
            if not fut.done():  # unloaded or removed meanwhile: never leave the member waiting
                fut.set_result(JoinResult(E.not_coordinator if not self._live(group) else E.unknown_member_id, ""))
            return
        if error != E.none:
            # The new member id could not be persisted: restore the old one and fail this join.
            fut, member.join_future = member.join_future, None
            if group.static_member_id(instance_id) == new_member_id:
                group.update_member(member, old[0], old[1], old[2], None)
                restored = group.replace_static_member(
                    instance_id, new_member_id, old_member_id, JoinResult(error, ""), SyncResult(error)
                )
                self.timers.cancel(("hb", group.group_id, new_member_id))
                self._schedule_heartbeat(group, restored)
            if not fut.done():
                fut.set_result(JoinResult(error, ""))
            return
        if skip_ok:
            # JoinGroup v9+ (KIP-814): tell a returning static leader it leads, but skip the assignor.
            is_leader = group.is_leader(new_member_id)
            member.complete_join(self._join_result(group, member, include_members=is_leader, skip_assignment=is_leader))
        else:
            # Older clients: report the old leader id so the returning leader does not run a pointless
            # assignment a Stable group would ignore.
            member.complete_join(self._join_result(group, member, include_members=False, leader_id=current_leader))

    # ---------------------------------------------------------------- rebalancing

    def _maybe_prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.is_(GroupState.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, E.rebalance_in_progress)
        self._remove_sync_expiration(group)
        now = self.clock()
        key = ("join", group.group_id)
        if group.is_(GroupState.EMPTY):
            delay = self.config.initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            self.timers.schedule(key, now + delay, lambda: self._on_initial_join_expire(group, delay, remaining))
            group.join_kind = "initial"
        else:
            self.timers.schedule(key, now + group.rebalance_timeout_ms(), lambda: self._on_join_expire(group))
            group.join_kind = "normal"
        group.transition_to(GroupState.PREPARING_REBALANCE, now)
        log.info(
            "Preparing to rebalance group %s with old generation %d (__consumer_offsets-%d) (reason: %s)",
            group.group_id,
            group.generation_id,
            group.partition,
            reason,
        )
        self._check_join(group)

    def _check_join(self, group: Group) -> None:
        """DelayedJoin.tryComplete: the rebalance completes as soon as every known member has re-joined."""
        if (
            group.is_(GroupState.PREPARING_REBALANCE)
            and group.join_kind == "normal"
            and group.has_all_members_joined()
            and self._live(group)
        ):
            self.timers.cancel(("join", group.group_id))
            self._on_complete_join(group)

    def _on_initial_join_expire(self, group: Group, delay: int, remaining: int) -> None:
        if not self._live(group) or not group.is_(GroupState.PREPARING_REBALANCE):
            return
        if group.new_member_added and remaining != 0:
            # Members keep arriving: wait another delay, bounded by the rebalance timeout.
            group.new_member_added = False
            next_delay = min(delay, remaining)
            next_remaining = max(remaining - delay, 0)
            self.timers.schedule(
                ("join", group.group_id),
                self.clock() + next_delay,
                lambda: self._on_initial_join_expire(group, next_delay, next_remaining),
            )
        else:
            self._on_complete_join(group)

    def _on_join_expire(self, group: Group) -> None:
        if self._live(group) and group.is_(GroupState.PREPARING_REBALANCE):
            self._on_complete_join(group)

    def _on_complete_join(self, group: Group) -> None:
        for member in [m for m in group.not_yet_rejoined_members() if not m.is_static]:
            log.info("Group %s removed dynamic member %s who did not re-join in time", group.group_id, member.member_id)
            member.complete_sync(SyncResult(E.unknown_member_id))
            group.remove(member.member_id)
            self.timers.cancel(("hb", group.group_id, member.member_id))
        if group.is_(GroupState.DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Nobody re-joined: keep waiting until session timeouts clear out the silent members.
            log.error("Group %s could not complete rebalance because no members rejoined", group.group_id)
            group.join_kind = "normal"
            self.timers.schedule(
                ("join", group.group_id),
                self.clock() + group.rebalance_timeout_ms(),
                lambda: self._on_join_expire(group),
            )
            return
        group.init_next_generation(self.clock())
        if group.is_(GroupState.EMPTY):
            log.info("Group %s with generation %d is now empty", group.group_id, group.generation_id)
            self.run_in_background(self._store_group(group, {}))
            return
        log.info(
            "Stabilized group %s generation %d (__consumer_offsets-%d) with %d members",
            group.group_id,
            group.generation_id,
            group.partition,
            group.size,
        )
        for member in list(group.members.values()):
            result = self._join_result(group, member, include_members=group.is_leader(member.member_id))
            member.complete_join(result)
            self._schedule_heartbeat(group, member)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        generation = group.generation_id
        self.timers.schedule(
            ("sync", group.group_id),
            self.clock() + group.rebalance_timeout_ms(),
            lambda: self._on_expire_pending_sync(group, generation),
        )

    def _remove_sync_expiration(self, group: Group) -> None:
        group.pending_sync_members.clear()
        self.timers.cancel(("sync", group.group_id))

    def _on_expire_pending_sync(self, group: Group, generation: int) -> None:
        if not self._live(group) or generation != group.generation_id:
            return
        if group.state not in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            return
        pending = list(group.pending_sync_members)
        if not pending:
            return
        for member_id in pending:
            member = group.remove(member_id)
            if member is not None:
                member.complete_sync(SyncResult(E.unknown_member_id))
            self.timers.cancel(("hb", group.group_id, member_id))
        self._prepare_rebalance(group, f"removing {pending} on pending sync request expiration")

    def _reset_and_propagate_assignment_error(self, group: Group, error: int) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: Group, error: int) -> None:
        ok = error == E.none
        for member in list(group.members.values()):
            result = SyncResult(
                error,
                group.protocol_type if ok else None,
                group.protocol_name if ok else None,
                member.assignment,
            )
            if member.complete_sync(result):
                self._schedule_heartbeat(group, member)

    # ---------------------------------------------------------------- liveness

    def _on_expire_heartbeat(self, group: Group, member_id: str) -> None:
        if not self._live(group):
            return
        member = group.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat():
            return
        log.info("Member %s in group %s has failed, removing it from the group", member_id, group.group_id)
        self._remove_member_and_update_group(group, member, "heartbeat expiration")

    def _on_expire_pending(self, group: Group, member_id: str) -> None:
        if self._live(group) and member_id in group.pending_members:
            group.pending_members.discard(member_id)
            self._check_join(group)

    def _remove_member_and_update_group(self, group: Group, member: Member, reason: str) -> None:
        # A member removed with a parked JoinGroup gets UNKNOWN_MEMBER_ID so a live client re-joins from scratch.
        member.complete_join(JoinResult(E.unknown_member_id, ""))
        member.complete_sync(SyncResult(E.unknown_member_id))
        group.remove(member.member_id)
        self.timers.cancel(("hb", group.group_id, member.member_id))
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, f"removing member {member.member_id} on {reason}")
        elif group.is_(GroupState.PREPARING_REBALANCE):
            self._check_join(group)

    # ================================================================ SyncGroup

    async def sync_group(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        *,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
    ) -> SyncResult:
        error = self.validate_group_status(group_id, "sync")
        if error == E.coordinator_load_in_progress:
            # The rebalance state was lost: make the member re-join without rediscovering the coordinator.
            return SyncResult(E.rebalance_in_progress)
        if error is not None:
            return SyncResult(error)
        cgroup = self._consumer_group_with_members(group_id)
        if cgroup is not None:
            return self.classic_sync_to_consumer_group(
                cgroup, generation_id, member_id, group_instance_id, protocol_type, protocol_name
            )
        group = self.groups.get(group_id)
        if group is None:
            return SyncResult(E.unknown_member_id)
        if group.is_(GroupState.DEAD):
            return SyncResult(E.coordinator_not_available)
        error = self._validate_current_member(group, member_id, group_instance_id)
        if error is None and generation_id != group.generation_id:
            error = E.illegal_generation
        if error is None and protocol_type is not None and group.protocol_type != protocol_type:
            error = E.inconsistent_group_protocol
        if error is None and protocol_name is not None and group.protocol_name != protocol_name:
            error = E.inconsistent_group_protocol
        if error is not None:
            return SyncResult(error)
        if group.is_(GroupState.EMPTY):
            return SyncResult(E.unknown_member_id)
        if group.is_(GroupState.PREPARING_REBALANCE):
            return SyncResult(E.rebalance_in_progress)
        member = group.get(member_id)
        if group.is_(GroupState.STABLE):
            group.pending_sync_members.discard(member_id)
            self._schedule_heartbeat(group, member)
            return SyncResult(E.none, group.protocol_type, group.protocol_name, member.assignment)
        # CompletingRebalance: park until the leader's assignment is stored.
        fut: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
        if member.sync_future is not None:
            member.complete_sync(SyncResult(E.rebalance_in_progress))
        member.sync_future = fut
        group.pending_sync_members.discard(member_id)
        if group.is_leader(member_id):
            full = {m: assignments.get(m, b"") for m in group.members}
            self.run_in_background(self._store_leader_assignment(group, generation_id, full))
        return await fut

    async def _store_leader_assignment(self, group: Group, generation: int, assignment: dict[str, bytes]) -> None:
        error = await self._store_group(group, assignment)
        if not self._live(group) or not group.is_(GroupState.COMPLETING_REBALANCE):
            return
        if generation != group.generation_id:
            return
        if error != E.none:
            self._reset_and_propagate_assignment_error(group, error)
            self._maybe_prepare_rebalance(group, f"error {error} storing the group assignment")
            return
        for member in group.members.values():
            member.assignment = assignment.get(member.member_id, b"")
        self._propagate_assignment(group, E.none)
        group.transition_to(GroupState.STABLE, self.clock())
        if not group.pending_sync_members:
            self.timers.cancel(("sync", group.group_id))

    # ================================================================ Heartbeat / LeaveGroup

    def heartbeat(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None) -> int:
        return self.commit_path.heartbeat(group_id, generation_id, member_id, group_instance_id)  # compiled

    def leave_group(self, group_id: str, members: list[tuple[str, str | None]]) -> tuple[int, list[int]]:
        """Returns (top-level error, one error per leaving member)."""
        error = self.validate_group_status(group_id, "leave")
        if error is not None:
            return error, []
        cgroup = self._consumer_group_with_members(group_id)
        if cgroup is not None:
            return self.classic_leave_to_consumer_group(cgroup, members)
        group = self.groups.get(group_id)
        if group is None:
            return E.none, [E.unknown_member_id for _ in members]
        if group.is_(GroupState.DEAD):
            return E.coordinator_not_available, []
        out: list[int] = []
        for member_id, instance_id in members:
            if member_id == "":
                current = group.static_member_id(instance_id)
                if current is None:
                    out.append(E.unknown_member_id)
                    continue
                self._remove_member_and_update_group(group, group.get(current), "LeaveGroup")
                out.append(E.none)
            elif member_id in group.pending_members:
                group.pending_members.discard(member_id)
                self.timers.cancel(("pending", group.group_id, member_id))
                self._check_join(group)
                out.append(E.none)
            else:
                err = self._validate_current_member(group, member_id, instance_id)
                if err is None:
                    self._remove_member_and_update_group(group, group.get(member_id), "LeaveGroup")
                    out.append(E.none)
                else:
                    out.append(err)
        return E.none, out
