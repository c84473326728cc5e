"""Hand-made Produce frames carrying a transactional batch for any producer id and epoch (kio), as an attacker
with Write on a topic sends them; the producer id / epoch of a real transaction (DescribeTransactions); and a
transactions-v2 producer in raw frames (InitProducerId, Produce v12, EndTxn v5), as a Kafka 4 client speaks it."""

from __future__ import annotations

import asyncio
import datetime
import time
from typing import Any

from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest
from kio.schema.describe_transactions.v0.response import DescribeTransactionsResponse
from kio.schema.end_txn.v5.request import EndTxnRequest
from kio.schema.end_txn.v5.response import EndTxnResponse
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.init_producer_id.v4.response import InitProducerIdResponse
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.produce.v9.response import ProduceResponse
from kio.schema.produce.v12 import request as produce_v12_request
from kio.schema.produce.v12.response import ProduceResponse as ProduceResponseV12
from kio.schema.types import ProducerId, TopicName, TransactionalId
from kio.static.primitive import i16, i32

from kbus.protocol.client import PLAINTEXT, ClientSecurity, KafkaConnection
from kbus.protocol.record_batch import build_batch


def transactional_batch(producer_id: int, epoch: int, sequence: int = 0, value: bytes = b"forged") -> bytes:
    return build_batch([(None, value)], producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence,
                       is_transactional=True)


def forge_produce(
    bootstrap: str, topic: str, partition: int, records: bytes, transactional_id: str | None,
    security: ClientSecurity = PLAINTEXT,
) -> tuple[str, str | None]:
    """Send one Produce v9 (acks=-1); (error name, error message) of the partition."""
    host, port = bootstrap.split(":")

    async def send() -> tuple[str, str | None]:
        conn = KafkaConnection(host, int(port), "forger", security)
        try:
            request = ProduceRequest(
                transactional_id=None if transactional_id is None else TransactionalId(transactional_id),
                acks=i16(-1), timeout=datetime.timedelta(seconds=10),
                topic_data=(TopicProduceData(name=TopicName(topic), partition_data=(
                    PartitionProduceData(index=i32(partition), records=records),)),),
            )
            response = await conn.request(request, ProduceResponse, timeout=30)
            p = response.responses[0].partition_responses[0]
            return p.error_code.name, p.error_message
        finally:
            await conn.close()

    return asyncio.run(send())


def describe_transaction(bootstrap: str, transactional_id: str) -> tuple[int, int, str]:
    """(producer id, epoch, state) of a transactional id, asked of its coordinator at `bootstrap`."""
    host, port = bootstrap.split(":")

    async def ask() -> tuple[int, int, str]:
        conn = KafkaConnection(host, int(port), "describer")
        try:
            response = await conn.request(
                DescribeTransactionsRequest(transactional_ids=(TransactionalId(transactional_id),)),
                DescribeTransactionsResponse,
            )
            state = response.transaction_states[0]
            assert state.error_code == 0, state.error_code
            return int(state.producer_id), int(state.producer_epoch), state.transaction_state
        finally:
            await conn.close()

    return asyncio.run(ask())


def list_transactional_ids(bootstrap: str) -> list[str]:
    """ListTransactions of the broker at `bootstrap` (the ids it coordinates)."""
    from kio.schema.list_transactions.v0.request import ListTransactionsRequest
    from kio.schema.list_transactions.v0.response import ListTransactionsResponse

    host, port = bootstrap.split(":")

    async def ask() -> list[str]:
        conn = KafkaConnection(host, int(port), "lister")
        try:
            response = await conn.request(ListTransactionsRequest(state_filters=(), producer_id_filters=()),
                                          ListTransactionsResponse)
            return [str(s.transactional_id) for s in response.transaction_states]
        finally:
            await conn.close()

    return asyncio.run(ask())


def forge_txn_offset_commit(bootstrap: str, transactional_id: str, group: str, producer_id: int, epoch: int,
                            topic: str) -> str:
    """TxnOffsetCommit v3 of offset 1 for `topic`-0 under any producer id/epoch; the error name answered."""
    from kio.schema.txn_offset_commit.v3.request import (
        TxnOffsetCommitRequest,
        TxnOffsetCommitRequestPartition,
        TxnOffsetCommitRequestTopic,
    )
    from kio.schema.txn_offset_commit.v3.response import TxnOffsetCommitResponse
    from kio.schema.types import GroupId, ProducerId
    from kio.static.primitive import i64

    host, port = bootstrap.split(":")

    async def send() -> str:
        conn = KafkaConnection(host, int(port), "forger")
        try:
            request = TxnOffsetCommitRequest(
                transactional_id=TransactionalId(transactional_id), group_id=GroupId(group),
                producer_id=ProducerId(producer_id), producer_epoch=i16(epoch),
                topics=(TxnOffsetCommitRequestTopic(name=TopicName(topic), partitions=(
                    TxnOffsetCommitRequestPartition(partition_index=i32(0), committed_offset=i64(1),
                                                    committed_metadata=""),)),),
            )
            response = await conn.request(request, TxnOffsetCommitResponse, timeout=30)
            return str(response.topics[0].partitions[0].error_code.name)
        finally:
            await conn.close()

    return asyncio.run(send())


def call(bootstrap: str, request: Any, response_type: type) -> Any:
    """One request to the broker at `bootstrap`, its response."""
    host, port = bootstrap.split(":")

    async def send() -> Any:
        conn = KafkaConnection(host, int(port), "txn-v2")
        try:
            return await conn.request(request, response_type, timeout=30)
        finally:
            await conn.close()

    return asyncio.run(send())


def init_producer(bootstrap: str, tid: str) -> tuple[int, int]:
    deadline = time.monotonic() + 20
    while True:
        r = call(bootstrap, InitProducerIdRequest(transactional_id=TransactionalId(tid),
                                          transaction_timeout=datetime.timedelta(seconds=60),
                                          producer_id=ProducerId(-1), producer_epoch=i16(-1)),
                 InitProducerIdResponse)
        if r.error_code == 0:
            return int(r.producer_id), int(r.producer_epoch)
        assert time.monotonic() < deadline, r.error_code
        time.sleep(0.2)


def produce_v12(bootstrap: str, tid: str, topic: str, batch: bytes, partition: int = 0) -> str:
    """Produce v12 (a transactions-v2 client's), retrying the retriable answer (the previous transaction's markers
    still being written) as the client does; the partition's error name."""
    deadline = time.monotonic() + 20
    while True:
        v12 = produce_v12_request
        r = call(bootstrap, v12.ProduceRequest(
            transactional_id=TransactionalId(tid), acks=i16(-1), timeout=datetime.timedelta(seconds=10),
            topic_data=(v12.TopicProduceData(name=TopicName(topic), partition_data=(
                v12.PartitionProduceData(index=i32(partition), records=batch),)),)), ProduceResponseV12)
        error = r.responses[0].partition_responses[0].error_code.name
        if error != "not_enough_replicas" or time.monotonic() > deadline:
            return str(error)
        time.sleep(0.1)


def end_txn(bootstrap: str, tid: str, pid: int, epoch: int, commit: bool) -> tuple[str, int, int]:
    deadline = time.monotonic() + 20
    while True:
        r = call(bootstrap, EndTxnRequest(transactional_id=TransactionalId(tid), producer_id=ProducerId(pid),
                                  producer_epoch=i16(epoch), committed=commit), EndTxnResponse)
        if r.error_code.name != "concurrent_transactions" or time.monotonic() > deadline:
            return str(r.error_code.name), int(r.producer_id), int(r.producer_epoch)
        time.sleep(0.1)


def txn_offset_commit_v5(bootstrap: str, tid: str, group: str, pid: int, epoch: int, topic: str, offset: int) -> str:
    """TxnOffsetCommit v5 (transactions v2: no AddOffsetsToTxn first) of `topic`-0 at `offset`, retried while the
    group's coordinator is not ready or the previous transaction's markers are being written; the error name."""
    from kio.schema.txn_offset_commit.v5 import request as v5
    from kio.schema.txn_offset_commit.v5.response import TxnOffsetCommitResponse
    from kio.schema.types import GroupId
    from kio.static.primitive import i64

    retriable = {"coordinator_not_available", "not_coordinator", "coordinator_load_in_progress",
                 "concurrent_transactions"}
    deadline = time.monotonic() + 20
    while True:
        r = call(bootstrap, v5.TxnOffsetCommitRequest(
            transactional_id=TransactionalId(tid), group_id=GroupId(group), producer_id=ProducerId(pid),
            producer_epoch=i16(epoch), generation_id=i32(-1), member_id="", group_instance_id=None,
            topics=(v5.TxnOffsetCommitRequestTopic(name=TopicName(topic), partitions=(
                v5.TxnOffsetCommitRequestPartition(partition_index=i32(0), committed_offset=i64(offset),
                                                   committed_leader_epoch=i32(-1), committed_metadata=""),)),),
        ), TxnOffsetCommitResponse)
        error = str(r.topics[0].partitions[0].error_code.name)
        if error not in retriable or time.monotonic() > deadline:
            return error
        time.sleep(0.2)

