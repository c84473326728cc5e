"""kbus.protocol.upgrade.to_version: a handler's newest-version kio response, written in the request's version.

Fields the requested version lacks are dropped; an error code it lacks that is not NONE is refused as Kafka's
writer refuses it (unless Kafka's schema marks it ignorable); a field Kafka removed gets its zero; nested entities
convert with their parent. Every registered API's newest response converts to each version it advertises.
"""

from __future__ import annotations

import datetime

import pytest
from kio.schema.add_partitions_to_txn.v3.response import AddPartitionsToTxnResponse as AddPartitionsV3
from kio.schema.add_partitions_to_txn.v5.response import AddPartitionsToTxnResponse as AddPartitionsV5
from kio.schema.describe_client_quotas.v0 import response as quotas_v0
from kio.schema.describe_client_quotas.v1 import response as quotas_v1
from kio.schema.elect_leaders.v0.response import ElectLeadersResponse as ElectV0
from kio.schema.elect_leaders.v1.response import ElectLeadersResponse as ElectV1
from kio.schema.errors import ErrorCode as E
from kio.schema.offset_commit.v9 import response as commit_v9
from kio.schema.offset_commit.v10 import response as commit_v10
from kio.schema.sasl_authenticate.v0.response import SaslAuthenticateResponse as SaslV0
from kio.schema.sasl_authenticate.v2.response import SaslAuthenticateResponse as SaslV2
from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse

import kbus.server.apis  # noqa: F401  (registers every handler)
from kbus.protocol.codec import RequestHeader, encode_response, response_type
from kbus.protocol.kio_types import NO_TIME, f64_, i32_, ms64, topic
from kbus.protocol.upgrade import ResponseVersionError, UpgradeError, to_version
from kbus.server.apis.registry import API_TABLE


def _header(key: int, version: int, flexible: bool = False) -> RequestHeader:
    return RequestHeader(key, version, 7, "c", flexible)


def test_a_field_the_version_lacks_is_dropped_and_the_frame_is_that_versions() -> None:
    newest = SaslV2(error_code=E.none, error_message=None, auth_bytes=b"tok", session_lifetime=ms64(5000))
    old = to_version(SaslV2, SaslV0)(newest)
    assert type(old) is SaslV0
    assert old == SaslV0(error_code=E.none, error_message=None, auth_bytes=b"tok")
    # encode_response converts by itself: the same bytes as v0's own class
    assert encode_response(_header(36, 0), newest) == encode_response(_header(36, 0), old)
    assert encode_response(_header(36, 2, True), newest) != encode_response(_header(36, 0), old)


def test_nested_entities_convert_with_their_parent() -> None:
    newest = quotas_v1.DescribeClientQuotasResponse(
        throttle_time=NO_TIME, error_code=E.none, error_message=None,
        entries=(quotas_v1.EntryData(
            entity=(quotas_v1.EntityData(entity_type="user", entity_name="alice"),),
            values=(quotas_v1.ValueData(key="producer_byte_rate", value=f64_(1024.0)),)),),
    )  # fmt: skip
    old = to_version(quotas_v1.DescribeClientQuotasResponse, quotas_v0.DescribeClientQuotasResponse)(newest)
    assert type(old) is quotas_v0.DescribeClientQuotasResponse
    assert old.entries is not None
    entry = old.entries[0]
    assert type(entry) is quotas_v0.EntryData
    assert type(entry.entity[0]) is quotas_v0.EntityData and entry.entity[0].entity_name == "alice"
    assert type(entry.values[0]) is quotas_v0.ValueData and entry.values[0].value == 1024.0


def test_an_error_code_the_version_lacks_is_refused_unless_none() -> None:
    fine = ElectV1(throttle_time=NO_TIME, error_code=E.none, replica_election_results=())
    assert to_version(ElectV1, ElectV0)(fine) == ElectV0(throttle_time=NO_TIME, replica_election_results=())
    lost = ElectV1(throttle_time=NO_TIME, error_code=E.cluster_authorization_failed, replica_election_results=())
    with pytest.raises(ResponseVersionError, match="non-default error_code"):
        to_version(ElectV1, ElectV0)(lost)
    with pytest.raises(ResponseVersionError):  # the connection closes (a ProtocolError), as Kafka's does
        encode_response(_header(43, 0), lost)


def test_an_error_code_kafka_marks_ignorable_is_dropped() -> None:
    # AddPartitionsToTxnResponse.json: the top-level ErrorCode of v4+ is "ignorable": true
    # (and v3's results_by_topic_v3_and_below, which Kafka removed at v4, gets its zero: an empty array)
    newest = AddPartitionsV5(throttle_time=NO_TIME, error_code=E.invalid_request, results_by_transaction=())
    assert to_version(AddPartitionsV5, AddPartitionsV3)(newest) == AddPartitionsV3(
        throttle_time=NO_TIME, results_by_topic_v3_and_below=())


def test_a_field_kafka_removed_gets_its_zero() -> None:
    # v10 names topics by id only; v9's name is what Kafka's one class holds when its handler never set it
    newest = commit_v10.OffsetCommitResponse(throttle_time=NO_TIME, topics=(commit_v10.OffsetCommitResponseTopic(
        topic_id=None, partitions=(commit_v10.OffsetCommitResponsePartition(partition_index=i32_(3),
                                                                           error_code=E.none),)),))  # fmt: skip
    old = to_version(commit_v10.OffsetCommitResponse, commit_v9.OffsetCommitResponse)(newest)
    assert type(old) is commit_v9.OffsetCommitResponse
    assert old.topics[0].name == topic("")
    assert old.topics[0].partitions[0].partition_index == 3


def test_a_response_of_another_api_is_refused() -> None:
    with pytest.raises(UpgradeError, match="not a response of"):
        to_version(SaslHandshakeResponse, SaslV0)


def test_the_requests_own_class_is_written_as_it_is() -> None:
    own = SaslV0(error_code=E.none, error_message=None, auth_bytes=b"x")
    frame = encode_response(_header(36, 0), own)
    assert frame.endswith(b"\x00\x00\x00\x01x")


@pytest.mark.parametrize("key", sorted(API_TABLE))
def test_every_apis_newest_response_converts_to_each_advertised_version(key: int) -> None:
    spec = API_TABLE[key]
    newest = response_type(key, spec.max_version)
    for version in range(spec.min_version, spec.max_version + 1):
        target = response_type(key, version)
        convert = to_version(newest, target)  # UpgradeError when a shape cannot be matched
        assert callable(convert)


def test_kio_types_narrow_without_changing_the_value() -> None:
    assert ms64(1500) == datetime.timedelta(milliseconds=1500)
    assert i32_(5) == 5 and type(i32_(5)) is int
