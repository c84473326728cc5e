"""FindCoordinator on a fresh broker (issue 20, defect 4): the first FindCoordinator creates the state topic; the
broker must not name itself coordinator before its coordinator has taken the key's partition, or the client's
next request (OffsetFetch, InitProducerId) gets NOT_COORDINATOR. Kafka answers COORDINATOR_NOT_AVAILABLE until the
partition has a leader and COORDINATOR_LOAD_IN_PROGRESS while it loads (librdkafka's test 0061 failed on a fresh
kbus broker with NOT_COORDINATOR). Real broker processes, kio frames."""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Callable
from typing import Any

import pytest
from kio.schema.errors import ErrorCode as E
from kio.schema.find_coordinator.v3.request import FindCoordinatorRequest
from kio.schema.find_coordinator.v3.response import FindCoordinatorResponse
from kio.schema.init_producer_id.v2.request import InitProducerIdRequest
from kio.schema.init_producer_id.v2.response import InitProducerIdResponse
from kio.schema.offset_fetch.v6.request import OffsetFetchRequest
from kio.schema.offset_fetch.v6.response import OffsetFetchResponse

from kbus.protocol.client import KafkaConnection

pytestmark = pytest.mark.integration

CLIENTS = 4
# Kafka's default partition counts: creating 50 logs takes long enough for the other clients' FindCoordinator
# requests to arrive while the first one's topic is still being applied
STATE_PARTITIONS = {"offsets.topic.num.partitions": "50", "transaction.state.log.num.partitions": "50"}
RETRIABLE = {E.coordinator_not_available, E.coordinator_load_in_progress}


async def find_then_use(port: int, key: str, key_type: int, use: Callable[[KafkaConnection], Any]) -> list[E]:
    """What one client sees: FindCoordinator until a coordinator is named, then the coordinator's request until it
    answers; every error code on the way."""
    seen: list[E] = []
    conn = KafkaConnection("127.0.0.1", port, f"client-{key}")
    try:
        for _ in range(200):
            found = await conn.request(FindCoordinatorRequest(key=key, key_type=key_type), FindCoordinatorResponse)
            if found.error_code != E.none:
                seen.append(found.error_code)
                await asyncio.sleep(0.05)
                continue
            assert found.node_id == 0 and found.port == port
            error = await use(conn)
            seen.append(error)
            if error not in RETRIABLE:
                return seen
            await asyncio.sleep(0.05)
    finally:
        await conn.close()
    raise AssertionError(f"no answer after 200 rounds: {seen}")


def run_clients(port: int, key: str, key_type: int, use: Callable[[KafkaConnection], Any]) -> list[list[E]]:
    async def all_clients() -> list[list[E]]:
        return list(await asyncio.gather(*(find_then_use(port, key, key_type, use) for _ in range(CLIENTS))))

    return asyncio.run(all_clients())


def test_a_fresh_broker_never_names_itself_group_coordinator_before_it_coordinates(broker_factory) -> None:
    b = broker_factory(STATE_PARTITIONS)

    async def offset_fetch(conn: KafkaConnection) -> E:
        resp = await conn.request(OffsetFetchRequest(group_id="first-group", topics=None), OffsetFetchResponse)
        return resp.error_code

    seen = run_clients(b.port, "first-group", 0, offset_fetch)
    assert all(s[-1] == E.none for s in seen), seen
    assert not any(E.not_coordinator in s for s in seen), seen
    assert all(set(s[:-1]) <= RETRIABLE for s in seen), seen


def test_a_fresh_broker_never_names_itself_transaction_coordinator_before_it_coordinates(broker_factory) -> None:
    b = broker_factory(STATE_PARTITIONS)

    async def init_producer_id(conn: KafkaConnection) -> E:
        timeout = datetime.timedelta(seconds=60)
        request = InitProducerIdRequest(transactional_id="first-txn", transaction_timeout=timeout)
        resp = await conn.request(request, InitProducerIdResponse)
        return resp.error_code

    seen = run_clients(b.port, "first-txn", 1, init_producer_id)
    # one of the clients got the id; the others were fenced by the later InitProducerId calls, or got it too
    assert all(s[-1] in (E.none, E.concurrent_transactions) for s in seen), seen
    assert not any(E.not_coordinator in s for s in seen), seen
    assert all(set(s[:-1]) <= RETRIABLE for s in seen), seen
