"""DescribeClientQuotas (48) and AlterClientQuotas (49) as Kafka 3.9's ZkAdminManager answers them: users,
clients, users+clients and ip entities (defaults included; an ip's only key is connection_creation_rate) read
from and written to their /config znodes (or the local metadata file); alterations are validated per entity
(unknown key, a fractional LONG, an empty name: INVALID_REQUEST) and a user's SCRAM credentials in the same znode
are kept. Authorized as Kafka does: DescribeConfigs / AlterConfigs on the cluster."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from kio.schema.alter_client_quotas.v1 import response as aq
from kio.schema.alter_client_quotas.v1.request import AlterClientQuotasRequest
from kio.schema.alter_client_quotas.v1.response import AlterClientQuotasResponse
from kio.schema.describe_client_quotas.v1 import response as dq
from kio.schema.describe_client_quotas.v1.request import DescribeClientQuotasRequest
from kio.schema.describe_client_quotas.v1.response import DescribeClientQuotasResponse
from kio.schema.errors import ErrorCode as E

from kbus.common import quotas as q
from kbus.common.acl import Operation, ResourceType
from kbus.protocol.kio_types import NO_TIME, f64_
from kbus.server.apis.registry import RequestContext, api

if TYPE_CHECKING:
    from kbus.server.apis.managers import Managers, QuotaStore


@api(48, 0, 1, request=DescribeClientQuotasRequest)
async def describe_client_quotas(
    m: Managers, ctx: RequestContext, request: DescribeClientQuotasRequest
) -> DescribeClientQuotasResponse:
    def failed(code: E, message: str | None) -> DescribeClientQuotasResponse:
        return DescribeClientQuotasResponse(throttle_time=NO_TIME, error_code=code, error_message=message, entries=None)

    if not ctx.authorized(Operation.DESCRIBE_CONFIGS, ResourceType.CLUSTER):
        return failed(E.cluster_authorization_failed, None)
    store = m.quota_store
    if store is None:
        return failed(E.unsupported_version, "no quota store")
    components = [q.FilterComponent(c.entity_type, int(c.match_type), c.match) for c in request.components]
    configs = await asyncio.to_thread(store.quota_configs)
    try:
        found = q.describe_filter(components, bool(request.strict), configs)
    except q.QuotaRequestError as exc:
        return failed(E.invalid_request, str(exc))
    except q.QuotaUnsupportedError as exc:
        return failed(E.unsupported_version, str(exc))
    entries = tuple(
        dq.EntryData(
            entity=tuple(dq.EntityData(entity_type=t, entity_name=n) for t, n in entity.components()),
            values=tuple(dq.ValueData(key=k, value=f64_(v)) for k, v in sorted(values.items())),
        )
        for entity, values in sorted(found.items(), key=lambda item: item[0].path)
    )
    return DescribeClientQuotasResponse(throttle_time=NO_TIME, error_code=E.none, error_message=None, entries=entries)


@api(49, 0, 1, request=AlterClientQuotasRequest)
async def alter_client_quotas(
    m: Managers, ctx: RequestContext, request: AlterClientQuotasRequest
) -> AlterClientQuotasResponse:
    allowed = ctx.authorized(Operation.ALTER_CONFIGS, ResourceType.CLUSTER)
    store = m.quota_store
    results: list[aq.EntryData] = []
    for entry in request.entries:
        code, message = E.none, None
        if not allowed:
            code = E.cluster_authorization_failed
        elif store is None:
            code, message = E.unsupported_version, "no quota store"
        else:
            try:
                entity = q.entity_from_components((e.entity_type, e.entity_name) for e in entry.entity)
                ops = [(op.key, None if op.remove else float(op.value)) for op in entry.ops]
                await asyncio.to_thread(_alter, store, entity, ops, bool(request.validate_only))
            except q.QuotaRequestError as exc:
                code, message = E.invalid_request, str(exc)
        results.append(
            aq.EntryData(
                error_code=code,
                error_message=message,
                entity=tuple(aq.EntityData(entity_type=e.entity_type, entity_name=e.entity_name)
                             for e in entry.entity),
            )
        )
    return AlterClientQuotasResponse(throttle_time=NO_TIME, entries=tuple(results))


def _alter(store: QuotaStore, entity: q.QuotaEntity, ops: list[tuple[str, float | None]], validate_only: bool) -> None:
    """Read the entity's whole config, change its quota keys, write it back (other keys, e.g. SCRAM credentials,
    untouched)."""
    before = store.quota_entity_config(entity)
    after = q.apply_alterations(before, ops, q.entity_quota_keys(entity))
    if not validate_only and after != before:
        store.set_quota_entity_config(entity, after)
