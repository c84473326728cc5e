"""Hand-made Produce frames carrying a transactional batch for any producer id and epoch (kio), as an attacker
with Write on a topic sends them; and the producer id / epoch of a real transaction (DescribeTransactions)."""

from __future__ import annotations

import asyncio
import datetime

from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest
from kio.schema.describe_transactions.v0.response import DescribeTransactionsResponse
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.produce.v9.response import ProduceResponse
from kio.schema.types import TopicName, TransactionalId
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
