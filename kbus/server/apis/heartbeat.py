"""Heartbeat (12), compiled (setup.py COMPILED): every classic consumer sends one each heartbeat.interval.ms. The
handler and the coordinator's check were about ten interpreted frames a request (the handler, the coordinator's
heartbeat and its wrappers around compiled code); the check is coordinator/commit_path.py's CommitPath.heartbeat,
called directly, and the response is encoded by hand (protocol/group_responses.py).

`m` is the broker's Managers (or a test's stand-in): only its `groups` and `quotas` are read, through Python
attribute access (Managers is an interpreted dataclass).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from kio.schema.errors import ErrorCode as E
from kio.schema.heartbeat.v4.response import HeartbeatResponse

from kbus.common.acl import Operation, ResourceType
from kbus.protocol.codec import Response
from kbus.protocol.group_requests import HeartbeatRequest
from kbus.protocol.group_responses import encode_heartbeat_response
from kbus.protocol.kio_types import NO_TIME
from kbus.server.apis.registry import RequestContext, api
from kbus.server.coordinator.commit_path import CommitPath

if TYPE_CHECKING:
    from kbus.server.apis.managers import Managers

# plain ints (the kio enum's members are looked up through its class on each use)
_GROUP_AUTHORIZATION_FAILED: Final = int(E.group_authorization_failed)
_COORDINATOR_NOT_AVAILABLE: Final = int(E.coordinator_not_available)
_READ: Final = Operation.READ
_GROUP: Final = ResourceType.GROUP


@api(12, 0, 4)
async def heartbeat(m: Managers, ctx: RequestContext, req: HeartbeatRequest) -> Response:
    coordinator = m.groups
    error: int
    if not ctx.authorized(_READ, _GROUP, req.group_id):
        error = _GROUP_AUTHORIZATION_FAILED
    elif coordinator is None:
        error = _COORDINATOR_NOT_AVAILABLE
    else:
        # GroupCoordinator.heartbeat delegates to its compiled CommitPath: called directly
        path: CommitPath = coordinator.commit_path
        error = path.heartbeat(req.group_id, req.generation_id, req.member_id, req.group_instance_id)
    if m.quotas.request.enabled:  # the network layer writes the request quota's throttle time into kio objects
        return HeartbeatResponse(throttle_time=NO_TIME, error_code=E(error))
    return encode_heartbeat_response(ctx.api_version, error)  # by hand: kio's writer was a tenth of its CPU
