"""Client quotas at the request level, shared by the network layer and the handlers that encode their own
responses (Produce, Fetch): Kafka records a request's handling time against request_percentage once, when the
response is made, and answers with the larger of the byte-rate and request throttle times. CreateTopics,
CreatePartitions and DeleteTopics also answer with controller_mutation_rate's (KIP-599)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from kbus.server.quotas.manager import NANOS_TO_PERCENTAGE_PER_SECOND, ControllerMutationQuota

if TYPE_CHECKING:
    from kbus.server.apis.managers import Managers
    from kbus.server.apis.registry import RequestContext


def request_quota_throttle(m: Managers, ctx: RequestContext) -> int:
    """Record this request's time (ClientRequestQuotaManager) once and return its throttle time in ms: the time
    since it was dispatched, less what the handler spent parked (acks=all, a fetch's long poll), as a percentage
    of one second. 0 when no request_percentage is configured, for a follower's fetch, or when already recorded."""
    quota = m.quotas.request
    if not quota.enabled or ctx.quota_exempt or ctx.request_time_recorded:
        return 0
    ctx.request_time_recorded = True
    busy_ns = max(time.perf_counter() - ctx.started - ctx.parked_s, 0.0) * 1e9
    return quota.record_and_throttle(ctx.principal.name, ctx.client_id, busy_ns * NANOS_TO_PERCENTAGE_PER_SECOND)


def mutation_quota(m: Managers, ctx: RequestContext, strict_since: int) -> ControllerMutationQuota | None:
    """Kafka's ControllerMutationQuotaManager.newQuotaFor: strict from `strict_since` on (the request's topics
    fail with THROTTLING_QUOTA_EXCEEDED once over), permissive before; None without a controller_mutation_rate
    for this client."""
    manager = m.quotas.controller_mutation
    if not manager.enabled:
        return None
    return manager.quota_for(ctx.principal.name, ctx.client_id, ctx.api_version >= strict_since)


def mutation_throttle(m: Managers, ctx: RequestContext, quota: ControllerMutationQuota | None) -> int:
    """sendResponseMaybeThrottleWithControllerQuota: the larger of the mutation and request throttle times, put
    in the response and the connection muted for it."""
    throttle = quota.throttle_time_ms if quota is not None else 0
    if m.quotas.request.enabled:
        throttle = max(throttle, request_quota_throttle(m, ctx))
    ctx.throttle_time_ms = max(ctx.throttle_time_ms, throttle)
    return ctx.throttle_time_ms
