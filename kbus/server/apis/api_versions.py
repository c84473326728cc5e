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
from kio.static.protocol import Entity

from kbus.common.broker_config import parse_rebalance_protocols
from kbus.common.cluster import SUPPORTED_FEATURES, BrokerInfo
from kbus.protocol.codec import encode_entity
from kbus.protocol.fetch_response import EncodedBody
from kbus.protocol.kio_types import NO_TIME, i16_, i64_
from kbus.protocol.upgrade import to_version
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


def with_features(version: int, response: ApiVersionsResponse, brokers: list[BrokerInfo]) -> ApiVersionsResponse:
    """`response` with ApiVersions v3+'s tagged feature fields. Before v4 a feature whose lowest supported level
    is 0 is left out of the supported ones (KIP-1022: older clients cannot read level 0)."""
    if version < 3:
        return response  # no such fields: left at their defaults, dropped when written
    supported = tuple(SupportedFeatureKey(name=name, min_version=i16_(low), max_version=i16_(high))
                      for name, low, high in SUPPORTED_FEATURES if version >= 4 or low > 0)
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
async def api_versions(m: Managers, ctx: RequestContext, request: ApiVersionsRequest
                       ) -> ApiVersionsResponse | EncodedBody:  # fmt: skip
    consumer = "consumer" in parse_rebalance_protocols(m.config.group_coordinator_rebalance_protocols)
    hidden = frozenset() if consumer else CONSUMER_PROTOCOL_APIS
    brokers = m.cluster.brokers()
    if m.quotas.request.enabled:
        # a request quota may throttle this answer: the network layer sets throttle_time_ms in kio's object
        # (ApiVersions' field follows its api_keys array, so an encoded body cannot be patched in place)
        return _response(ctx.api_version, hidden, brokers)
    features = finalized_features(brokers) if ctx.api_version >= 3 else ((), 0)
    key = (ctx.api_version, hidden, tuple(features[0]), features[1])
    encoded = _ENCODED.get(key)
    if encoded is None:
        response = _response(ctx.api_version, hidden, brokers)
        source: type[Entity] = ApiVersionsResponse
        target = ctx.response_type
        encoded = encode_entity(response if source is target else to_version(source, target)(response))
        if len(_ENCODED) >= _ENCODED_MAX:
            _ENCODED.clear()
        _ENCODED[key] = encoded
    return EncodedBody(encoded)


# Every connection's first request (librdkafka, the Java client) asks for the same answer: its body is encoded
# once per (version, APIs hidden by configuration, finalized features and their epoch), as Kafka's
# ApiVersionManager keeps its api keys ready. Building and writing ~70 entries through kio cost ~0.9 ms a request.
_ENCODED: dict[tuple[int, frozenset[int], tuple[tuple[str, int], ...], int], bytes] = {}
_ENCODED_MAX = 64


def _response(version: int, hidden: frozenset[int], brokers: list[BrokerInfo]) -> ApiVersionsResponse:
    response = ApiVersionsResponse(error_code=ErrorCode.none, api_keys=api_version_entries(hidden),
                                   throttle_time=NO_TIME)
    return with_features(version, response, brokers)
