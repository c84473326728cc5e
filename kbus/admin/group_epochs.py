"""What librdkafka's describe_consumer_groups leaves out of a consumer-protocol group (KIP-848): its state as Kafka
names it (librdkafka knows no Assigning/Reconciling), the group and target-assignment epochs and each member's
epoch, read with ConsumerGroupDescribe (API 69) from the group's coordinator."""

from __future__ import annotations

import dataclasses
from typing import Any

from kbus.admin.errors import AdminError
from kbus.admin.models import GroupDescription
from kbus.admin.wire import AdminSession, WireAdmin, build

CONSUMER_GROUP_DESCRIBE_KEY = 69


def with_epochs(wire: WireAdmin, desc: GroupDescription) -> GroupDescription:
    """`desc` with the state and epochs its coordinator reports; unchanged when it cannot say (not a consumer
    group, coordinator gone)."""
    if desc.group_type != "consumer" or desc.coordinator is None:
        return desc
    host, port = desc.coordinator.host, desc.coordinator.port

    async def ask(session: AdminSession) -> Any:
        resp, _ = await session.send(
            host, port, CONSUMER_GROUP_DESCRIBE_KEY, (0, 1),
            lambda cls, v: build(cls, group_ids=(desc.group_id,), include_authorized_operations=False),
        )  # fmt: skip
        return resp

    try:
        resp = wire.run(ask)
    except (AdminError, ConnectionError):
        return desc
    described = next((g for g in resp.groups if g.group_id == desc.group_id and int(g.error_code) == 0), None)
    if described is None:
        return desc
    epochs = {m.member_id: int(m.member_epoch) for m in described.members}
    members = [dataclasses.replace(m, member_epoch=epochs.get(m.member_id)) for m in desc.members]
    return dataclasses.replace(
        desc,
        state=described.group_state,
        members=members,
        group_epoch=int(described.group_epoch),
        target_assignment_epoch=int(described.assignment_epoch),
    )
