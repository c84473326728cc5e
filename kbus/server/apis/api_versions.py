"""ApiVersions (18): advertise exactly the dispatch table."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from kio.schema.api_versions.v4.request import ApiVersionsRequest
from kio.schema.api_versions.v4.response import (
    ApiVersion,
    ApiVersionsResponse,
    FinalizedFeatureKey,
    SupportedFeatureKey,
)
from kio.schema.errors import ErrorCode

from kbus.common.broker_config import parse_rebalance_protocols
from kbus.common.cluster import SUPPORTED_FEATURES, BrokerInfo
from kbus.protocol.kio_types import NO_TIME, i16_, i64_
from kbus.server.apis.registry import API_TABLE, RequestContext, api

if TYPE_CHECKING:
    from kbus.server.apis.managers import Managers


# the consumer group protocol's APIs (KIP-848): not advertised when group.coordinator.rebalance.protocols leaves
# it out, as Kafka's ApiVersionManager does
CONSUMER_PROTOCOL_APIS = frozenset({68, 69})


def finalized_features(brokers: list[BrokerInfo]) -> tuple[list[tuple[str, int]], int]:
    """The cluster's finalized feature levels and their epoch. Kafka finalizes a level once every broker supports
    it (KRaft's controller, ZooKeeper mode's /feature znode through kafka-features.sh); kbus finalizes the highest
    level every live broker registered (its BrokerIdZNode "features"), so a rolling upgrade turns transactions v2
    (transaction.version 2) on only once no broker without it is left, and a kbus from before it counts as level
    0. A client keeps the features of the highest epoch it has seen and ignores the others (Java's ApiVersions),
    so the epoch must grow whenever the levels change, withdrawals included: it is the newest live registration's
    ZooKeeper zxid (its czxid, which no clock skew can reorder). A broker joining (an older kbus withdrawing the
    level) has the newest registration; a broker leaving cannot raise the epoch, so clients that saw the
    withdrawal keep transactions v1 (which every kbus serves) until the next registration, such as that broker's
    return upgraded."""
    finalized = []
    for name, _, high in SUPPORTED_FEATURES:
        level = high
        for b in brokers:
            level = min(level, next((top for n, _, top in b.supported_features if n == name), 0))
        if level > 0:
            finalized.append((name, level))
    return finalized, max((b.registration_zxid for b in brokers), default=0)


def with_features(ctx: RequestContext, response: ApiVersionsResponse, brokers: list[BrokerInfo]
                  ) -> ApiVersionsResponse:  # fmt: skip
    """`response` with ApiVersions v3+'s tagged feature fields. Before v4 a feature whose lowest supported level
    is 0 is left out of the supported ones (KIP-1022: older clients cannot read level 0)."""
    if ctx.api_version < 3:
        return response  # no such fields: left at their defaults, dropped when written
    supported = tuple(SupportedFeatureKey(name=name, min_version=i16_(low), max_version=i16_(high))
                      for name, low, high in SUPPORTED_FEATURES if ctx.api_version >= 4 or low > 0)
    levels, epoch = finalized_features(brokers)
    finalized = tuple(FinalizedFeatureKey(name=name, max_version_level=i16_(level), min_version_level=i16_(level))
                      for name, level in levels)
    return replace(response, supported_features=supported, finalized_features_epoch=i64_(epoch),
                   finalized_features=finalized)


def api_version_entries(hidden: frozenset[int] = frozenset()) -> tuple[ApiVersion, ...]:
    return tuple(
        ApiVersion(api_key=i16_(s.key), min_version=i16_(s.min_version), max_version=i16_(s.max_version))
        for s in sorted(API_TABLE.values(), key=lambda s: s.key)
        if s.key not in hidden
    )


# v4 (Kafka 3.9) is v3's layout; Kafka 3.9's Java clients send it first, and an UNSUPPORTED_VERSION answer costs
# each of their connections a second round trip (and the bootstrap one a visible pause) before anything else.
@api(18, 0, 4, before_auth=True, request=ApiVersionsRequest)
async def api_versions(m: Managers, ctx: RequestContext, request: ApiVersionsRequest) -> ApiVersionsResponse:
    consumer = "consumer" in parse_rebalance_protocols(m.config.group_coordinator_rebalance_protocols)
    hidden = frozenset() if consumer else CONSUMER_PROTOCOL_APIS
    response = ApiVersionsResponse(error_code=ErrorCode.none, api_keys=api_version_entries(hidden),
                                   throttle_time=NO_TIME)
    return with_features(ctx, response, m.cluster.brokers())
