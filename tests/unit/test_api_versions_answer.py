"""ApiVersions' answer, encoded once per (version, hidden APIs, finalized features): every version decodes to what
the uncached kio response says, a change of the cluster's features or of the configured group protocols changes
it, and with a request quota configured the answer stays a kio object whose throttle time the network layer sets.

No sockets: a stand-in for the handlers' `Managers` (config, cluster, quotas)."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from kio.schema.api_versions.v4.response import ApiVersionsResponse
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

import kbus.server.apis.api_versions as av
from kbus.common.broker_config import KafkaConfig
from kbus.common.cluster import BrokerInfo
from kbus.protocol.codec import RequestHeader, encode_entity, encode_response, request_type, response_type
from kbus.protocol.fetch_response import EncodedBody
from kbus.protocol.request_body import decode_body
from kbus.protocol.upgrade import to_version
from kbus.server.apis.registry import API_TABLE, RequestContext
from kbus.server.quotas.manager import QuotaManagers


class FakeManagers:
    def __init__(self, protocols: str = "classic,consumer") -> None:
        self.config = KafkaConfig(group_coordinator_rebalance_protocols=protocols)
        self.cluster = self
        self.quotas = QuotaManagers()
        self.registered = [BrokerInfo(0, "127.0.0.1", 9092, registration_zxid=5)]

    def brokers(self) -> list[BrokerInfo]:
        return list(self.registered)


def ask(m: FakeManagers, version: int) -> tuple[object, object]:
    """(the handler's answer, the body a client decodes from its frame)."""
    cls = request_type(18, version)
    assert cls is not None
    header = RequestHeader(18, version, 9, "client", bool(cls.__flexible__))
    fields = {"client_software_name": "t", "client_software_version": "1"} if version >= 3 else {}
    req = decode_body(encode_entity(cls(**fields)), header, 0)
    ctx = RequestContext(header, "127.0.0.1", 50000, "c1")
    answer = asyncio.run(API_TABLE[18].handler(m, ctx, req))  # type: ignore[arg-type]
    assert answer is not None
    frame = encode_response(header, answer)
    decoded, _ = entity_reader(response_type(18, version))(frame, 8)  # ApiVersions: never a tagged header
    return answer, decoded


def expected(m: FakeManagers, version: int, hidden: frozenset[int]) -> object:
    newest = av.with_features(version, ApiVersionsResponse(
        error_code=ErrorCode.none, api_keys=av.api_version_entries(hidden), throttle_time=av.NO_TIME),
        m.brokers())
    target = response_type(18, version)
    return newest if type(newest) is target else to_version(ApiVersionsResponse, target)(newest)


@pytest.fixture(autouse=True)
def empty_cache() -> None:
    av._ENCODED.clear()


@pytest.mark.parametrize("version", range(0, 5))
def test_every_version_answers_what_kio_would_write(version: int) -> None:
    m = FakeManagers()
    for _ in range(2):  # the first answer fills the cache, the second comes from it
        answer, decoded = ask(m, version)
        assert isinstance(answer, EncodedBody)
        assert decoded == expected(m, version, frozenset())
    assert len(av._ENCODED) == 1


def test_a_new_feature_epoch_changes_the_answer() -> None:
    m = FakeManagers()
    _, before = ask(m, 4)
    m.registered.append(dataclasses.replace(m.registered[0], broker_id=1, registration_zxid=9))
    _, after = ask(m, 4)
    assert before != after
    assert after == expected(m, 4, frozenset())
    assert after.finalized_features_epoch == 9  # type: ignore[attr-defined]


def test_the_consumer_protocols_apis_hidden_by_configuration() -> None:
    _, classic = ask(FakeManagers("classic"), 3)
    keys = {k.api_key for k in classic.api_keys}  # type: ignore[attr-defined]
    assert not keys & av.CONSUMER_PROTOCOL_APIS
    _, both = ask(FakeManagers("classic,consumer"), 3)
    assert {k.api_key for k in both.api_keys} >= av.CONSUMER_PROTOCOL_APIS  # type: ignore[attr-defined]


def test_a_request_quota_keeps_a_kio_answer_for_its_throttle_time() -> None:
    m = FakeManagers()
    m.quotas.request.enabled = True
    answer, decoded = ask(m, 3)
    assert not isinstance(answer, EncodedBody)  # the network layer writes throttle_time_ms into it
    assert decoded == expected(m, 3, frozenset())
    assert not av._ENCODED
