"""CreateAcls (30), DescribeAcls (29), DeleteAcls (31): Kafka's AclAuthorizer administration. Without
authorizer.class.name they answer SECURITY_DISABLED, as Kafka does."""

from __future__ import annotations

import asyncio
import enum
from typing import TYPE_CHECKING, TypeVar

from kio.schema.create_acls.v3.request import AclCreation, CreateAclsRequest
from kio.schema.create_acls.v3.response import AclCreationResult, CreateAclsResponse
from kio.schema.delete_acls.v3.request import DeleteAclsFilter, DeleteAclsRequest
from kio.schema.delete_acls.v3.response import DeleteAclsFilterResult, DeleteAclsMatchingAcl, DeleteAclsResponse
from kio.schema.describe_acls.v3.request import DescribeAclsRequest
from kio.schema.describe_acls.v3.response import AclDescription, DescribeAclsResource, DescribeAclsResponse
from kio.schema.errors import ErrorCode as E

from kbus.common.acl import (
    CLUSTER_NAME,
    WILDCARD,
    AclBinding,
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from kbus.protocol.kio_types import NO_TIME, i8_
from kbus.server.apis.registry import RequestContext, api

if TYPE_CHECKING:
    from kbus.server.apis.managers import Managers

NO_AUTHORIZER = "No Authorizer is configured on the broker"


EnumT = TypeVar("EnumT", bound=enum.IntEnum)


def _enum(cls: type[EnumT], value: int) -> EnumT | None:
    try:
        return cls(value)
    except ValueError:
        return None


def _binding(c: AclCreation, version: int) -> tuple[AclBinding | None, str]:
    """An AclCreation as a binding, or (None, why it is invalid)."""
    rtype = _enum(ResourceType, c.resource_type)
    pattern = PatternType.LITERAL if version == 0 else _enum(PatternType, c.resource_pattern_type)
    op, perm = _enum(Operation, c.operation), _enum(Permission, c.permission_type)
    if rtype in (None, ResourceType.ANY) or pattern in (None, PatternType.ANY, PatternType.MATCH):
        return None, "Invalid resource type or pattern type"
    if op in (None, Operation.ANY) or perm in (None, Permission.ANY):
        return None, "Invalid operation or permission type"
    if not c.resource_name:
        return None, "Resource name must not be empty"
    if rtype == ResourceType.CLUSTER and c.resource_name != CLUSTER_NAME:
        return None, f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if pattern == PatternType.PREFIXED and c.resource_name == WILDCARD:
        return None, "Prefixed ACLs cannot use the wildcard resource name"
    kind, sep, name = (c.principal or "").partition(":")
    if not sep or not kind or not name:
        return None, f"Invalid principal {c.principal!r} (expected Type:name, e.g. User:alice)"
    # the host as given: Kafka stores an empty one, which matches no client (only `*` matches every host)
    return AclBinding(rtype, c.resource_name, pattern, c.principal, c.host, op, perm), ""


def _filter(f: DescribeAclsRequest | DeleteAclsFilter, version: int) -> AclFilter | None:
    rtype = _enum(ResourceType, f.resource_type_filter)
    pattern = PatternType.LITERAL if version == 0 else _enum(PatternType, f.pattern_type_filter)
    op, perm = _enum(Operation, f.operation), _enum(Permission, f.permission_type)
    if rtype is None or pattern is None or op is None or perm is None:
        return None
    return AclFilter(rtype, f.resource_name_filter, pattern, f.principal_filter, f.host_filter, op, perm)


@api(30, 1, 3, request=CreateAclsRequest)
async def create_acls(m: Managers, ctx: RequestContext, request: CreateAclsRequest) -> CreateAclsResponse:
    def result(code: E, message: str | None = None) -> AclCreationResult:
        return AclCreationResult(error_code=code, error_message=message)

    if ctx.authorizer is None or m.acls is None:
        return CreateAclsResponse(
            throttle_time=NO_TIME, results=tuple(result(E.security_disabled, NO_AUTHORIZER) for _ in request.creations)
        )
    if not ctx.authorized(Operation.ALTER, ResourceType.CLUSTER):
        return CreateAclsResponse(
            throttle_time=NO_TIME, results=tuple(result(E.cluster_authorization_failed) for _ in request.creations)
        )
    results: list[AclCreationResult] = []
    adds: list[AclBinding] = []
    for c in request.creations:
        binding, why = _binding(c, ctx.api_version)
        if binding is None:
            results.append(result(E.invalid_request, why))
        else:
            adds.append(binding)
            results.append(result(E.none))
    if adds:
        # returns once this broker's authorizer has it (others follow the change notification)
        await asyncio.to_thread(m.acls.alter_acls, adds, [])
    return CreateAclsResponse(throttle_time=NO_TIME, results=tuple(results))


def _description(acl: AclBinding) -> AclDescription:
    return AclDescription(
        principal=acl.principal,
        host=acl.host,
        operation=i8_(acl.operation),
        permission_type=i8_(acl.permission),
    )


@api(29, 1, 3, request=DescribeAclsRequest)
async def describe_acls(m: Managers, ctx: RequestContext, request: DescribeAclsRequest) -> DescribeAclsResponse:
    def failed(code: E, message: str | None) -> DescribeAclsResponse:
        return DescribeAclsResponse(throttle_time=NO_TIME, error_code=code, error_message=message, resources=())

    if ctx.authorizer is None or m.acls is None:
        return failed(E.security_disabled, NO_AUTHORIZER)
    if not ctx.authorized(Operation.DESCRIBE, ResourceType.CLUSTER):
        return failed(E.cluster_authorization_failed, None)
    flt = _filter(request, ctx.api_version)
    if flt is None:
        return failed(E.invalid_request, "Invalid ACL filter")
    groups: dict[tuple[ResourceType, str, PatternType], list[AclBinding]] = {}
    for acl in sorted(await asyncio.to_thread(m.acls.acls)):
        if flt.matches(acl):
            groups.setdefault((acl.resource_type, acl.name, acl.pattern), []).append(acl)
    resources = tuple(
        DescribeAclsResource(
            resource_type=i8_(t),
            resource_name=n,
            pattern_type=i8_(p),
            acls=tuple(_description(a) for a in acls),
        )
        for (t, n, p), acls in groups.items()
    )
    return DescribeAclsResponse(throttle_time=NO_TIME, error_code=E.none, error_message=None, resources=resources)


@api(31, 1, 3, request=DeleteAclsRequest)
async def delete_acls(m: Managers, ctx: RequestContext, request: DeleteAclsRequest) -> DeleteAclsResponse:
    def filter_result(code: E, message: str | None, matching: tuple[DeleteAclsMatchingAcl, ...] = ()
                      ) -> DeleteAclsFilterResult:  # fmt: skip
        return DeleteAclsFilterResult(error_code=code, error_message=message, matching_acls=matching)

    if ctx.authorizer is None or m.acls is None:
        return DeleteAclsResponse(
            throttle_time=NO_TIME,
            filter_results=tuple(filter_result(E.security_disabled, NO_AUTHORIZER) for _ in request.filters),
        )
    if not ctx.authorized(Operation.ALTER, ResourceType.CLUSTER):
        return DeleteAclsResponse(
            throttle_time=NO_TIME,
            filter_results=tuple(filter_result(E.cluster_authorization_failed, None) for _ in request.filters),
        )
    current = await asyncio.to_thread(m.acls.acls)
    results: list[DeleteAclsFilterResult] = []
    removed: set[AclBinding] = set()
    for f in request.filters:
        flt = _filter(f, ctx.api_version)
        if flt is None:
            results.append(filter_result(E.invalid_request, "Invalid ACL filter"))
            continue
        hits = [a for a in current if flt.matches(a)]
        removed.update(hits)
        results.append(
            filter_result(
                E.none,
                None,
                tuple(
                    DeleteAclsMatchingAcl(
                        error_code=E.none,
                        error_message=None,
                        resource_type=i8_(a.resource_type),
                        resource_name=a.name,
                        pattern_type=i8_(a.pattern),
                        principal=a.principal,
                        host=a.host,
                        operation=i8_(a.operation),
                        permission_type=i8_(a.permission),
                    )
                    for a in hits
                ),
            )
        )
    if removed:
        await asyncio.to_thread(m.acls.alter_acls, [], sorted(removed))
    return DeleteAclsResponse(throttle_time=NO_TIME, filter_results=tuple(results))
