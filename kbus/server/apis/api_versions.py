"""ApiVersions (18): advertise exactly the dispatch table."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from kbus.server.apis.registry import API_TABLE, RequestContext, api

if TYPE_CHECKING:
    from kbus.server.apis.managers import Managers


def api_version_entries(ctx: RequestContext) -> list[Any]:
    return [
        ctx.nested("ApiVersion", api_key=s.key, min_version=s.min_version, max_version=s.max_version)
        for s in sorted(API_TABLE.values(), key=lambda s: s.key)
    ]


@api(18, 0, 3, before_auth=True)
async def api_versions(m: Managers, ctx: RequestContext, request: Any) -> Any:
    return ctx.build(error_code=ErrorCode.none, api_keys=api_version_entries(ctx), throttle_time=0)
