"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51): SCRAM users managed over the wire, as
kafka-configs.sh --bootstrap-server --entity-type users does (KIP-554). Secrets never leave the broker: Describe
answers mechanisms and iterations only."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import TYPE_CHECKING

from kio.schema.alter_user_scram_credentials.v0.request import AlterUserScramCredentialsRequest
from kio.schema.alter_user_scram_credentials.v0.response import (
    AlterUserScramCredentialsResponse,
    AlterUserScramCredentialsResult,
)
from kio.schema.describe_user_scram_credentials.v0.request import DescribeUserScramCredentialsRequest
from kio.schema.describe_user_scram_credentials.v0.response import (
    CredentialInfo,
    DescribeUserScramCredentialsResponse,
    DescribeUserScramCredentialsResult,
)
from kio.schema.errors import ErrorCode as E

from kbus.common.acl import Operation, ResourceType
from kbus.protocol.kio_types import NO_TIME, i8_, i32_
from kbus.server.apis.registry import RequestContext, api
from kbus.server.security import scram

if TYPE_CHECKING:
    from kbus.server.apis.managers import Managers

_TYPE_OF = {name: t for t, name in scram.MECHANISM_TYPES.items()}


@api(50, 0, 0, request=DescribeUserScramCredentialsRequest)
async def describe_user_scram_credentials(
    managers: Managers, ctx: RequestContext, request: DescribeUserScramCredentialsRequest
) -> DescribeUserScramCredentialsResponse:
    store = managers.users
    if store is None:
        return DescribeUserScramCredentialsResponse(throttle_time=NO_TIME, error_code=E.unsupported_version,
                                                    error_message="no credential store", results=())
    if not ctx.authorized(Operation.DESCRIBE, ResourceType.CLUSTER):
        return DescribeUserScramCredentialsResponse(throttle_time=NO_TIME, error_code=E.cluster_authorization_failed,
                                                    error_message=None, results=())
    everyone = await asyncio.to_thread(store.users_credentials)
    if not request.users:  # Kafka: null or empty, every user with credentials
        wanted = sorted(u for u, c in everyone.items() if any(m in scram.MECHANISMS for m in c))
    else:
        wanted = [u.name for u in request.users]
    counts = Counter(wanted)
    results: list[DescribeUserScramCredentialsResult] = []
    for user in dict.fromkeys(wanted):
        creds = {m: c for m, c in everyone.get(user, {}).items() if m in scram.MECHANISMS}
        infos: list[CredentialInfo] = []
        if counts[user] > 1:
            code = E.duplicate_resource
            message: str | None = f"Cannot describe SCRAM credentials for the same user twice in a request: {user}"
        elif not creds:
            code, message = E.resource_not_found, f"Attempt to describe a user credential that does not exist: {user}"
        else:
            code, message = E.none, None
            for m, c in sorted(creds.items()):
                iterations = scram.ScramCredential.decode(c).iterations
                infos.append(CredentialInfo(mechanism=i8_(_TYPE_OF[m]), iterations=i32_(iterations)))
        results.append(
            DescribeUserScramCredentialsResult(
                user=user,
                error_code=code,
                error_message=message,
                credential_infos=tuple(infos),
            )
        )
    return DescribeUserScramCredentialsResponse(throttle_time=NO_TIME, error_code=E.none, error_message=None,
                                                results=tuple(results))


@api(51, 0, 0, request=AlterUserScramCredentialsRequest)
async def alter_user_scram_credentials(
    managers: Managers, ctx: RequestContext, request: AlterUserScramCredentialsRequest
) -> AlterUserScramCredentialsResponse:
    store = managers.users
    if store is None:
        return AlterUserScramCredentialsResponse(throttle_time=NO_TIME, results=())
    if not ctx.authorized(Operation.ALTER, ResourceType.CLUSTER):
        users = dict.fromkeys([d.name for d in request.deletions] + [u.name for u in request.upsertions])
        return AlterUserScramCredentialsResponse(
            throttle_time=NO_TIME,
            results=tuple(
                AlterUserScramCredentialsResult(user=u, error_code=E.cluster_authorization_failed, error_message=None)
                for u in users
            ),
        )
    seen: Counter[tuple[str, int]] = Counter(
        [(d.name, d.mechanism) for d in request.deletions] + [(u.name, u.mechanism) for u in request.upsertions]
    )
    errors: dict[str, tuple[E, str]] = {}
    order: list[str] = []

    def fail(user: str, code: E, message: str) -> None:
        errors.setdefault(user, (code, message))

    def check(user: str, mechanism_type: int) -> str | None:
        if user not in order:
            order.append(user)
        if not user:
            fail(user, E.unacceptable_credential, "Username must not be empty")
            return None
        mechanism = scram.MECHANISM_TYPES.get(mechanism_type)
        if mechanism is None:
            fail(user, E.unsupported_sasl_mechanism, "Unknown SCRAM mechanism")
            return None
        if seen[(user, mechanism_type)] > 1:
            fail(user, E.duplicate_resource, "A user credential cannot be altered twice in the same request")
            return None
        return mechanism

    deletions, upsertions = [], []
    existing = await asyncio.to_thread(store.users_credentials)
    for d in request.deletions:
        mechanism = check(d.name, d.mechanism)
        if mechanism is None:
            continue
        if mechanism not in existing.get(d.name, {}):
            fail(d.name, E.resource_not_found, "Attempt to delete a user credential that does not exist")
            continue
        deletions.append((d.name, mechanism))
    for u in request.upsertions:
        mechanism = check(u.name, u.mechanism)
        if mechanism is None:
            continue
        if u.iterations < scram.MIN_ITERATIONS:
            fail(u.name, E.unacceptable_credential, "Too few iterations")
            continue
        if u.iterations > scram.MAX_ITERATIONS:
            fail(u.name, E.unacceptable_credential, "Too many iterations")
            continue
        cred = scram.from_salted_password(mechanism, bytes(u.salted_password), bytes(u.salt), u.iterations)
        upsertions.append((u.name, mechanism, cred.encode()))
    # a user with any bad alteration gets none applied (Kafka validates per user before writing)
    for user, mechanism in deletions:
        if user not in errors:
            await asyncio.to_thread(store.alter_user_credential, user, mechanism, None)
    for user, mechanism, text in upsertions:
        if user not in errors:
            await asyncio.to_thread(store.alter_user_credential, user, mechanism, text)
    results = tuple(
        AlterUserScramCredentialsResult(
            user=user,
            error_code=errors.get(user, (E.none, ""))[0],
            error_message=errors[user][1] if user in errors else None,
        )
        for user in order
    )
    return AlterUserScramCredentialsResponse(throttle_time=NO_TIME, results=results)
