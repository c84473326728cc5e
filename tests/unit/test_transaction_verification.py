"""Transaction verification (KIP-890 part 1), sans broker: the coordinator's verify-only answer, the log's
verification guard (the cache that makes the cost per transaction and partition), and the partition leader's
batching of questions per coordinator with Kafka's error mapping."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode as E

from kbus.common.broker_config import KafkaConfig
from kbus.common.cluster import BrokerInfo
from kbus.protocol import record_batch as rb
from kbus.protocol.control import build_marker_batch
from kbus.server.log import Log, LogConfig, OutOfOrderSequenceError
from kbus.server.log.errors import InvalidProducerEpochError, InvalidTxnStateError
from kbus.server.transaction.verification import TransactionVerifier
from tests.unit.test_txn_coordinator import loaded, make, run

# ---------------------------------------------------------------- the coordinator's answer


def test_coordinator_answers_verify_only_questions() -> None:
    async def go() -> None:
        c, *_ = make()
        assert c.verify_partitions("t", 1, 0, [("a", 0)]) == {("a", 0): E.not_coordinator}
        await loaded(c)
        assert c.verify_partitions("", 1, 0, [("a", 0)]) == {("a", 0): E.invalid_request}
        assert c.verify_partitions("t", 1, 0, [("a", 0)]) == {("a", 0): E.invalid_producer_id_mapping}
        _, pid, epoch = await c.init_producer_id("t", 10_000)
        assert c.verify_partitions("t", pid + 1, epoch, [("a", 0)]) == {("a", 0): E.invalid_producer_id_mapping}
        assert c.verify_partitions("t", pid, epoch + 1, [("a", 0)]) == {("a", 0): E.producer_fenced}
        # Empty: nothing added yet
        assert c.verify_partitions("t", pid, epoch, [("a", 0)]) == {("a", 0): E.transaction_abortable}
        assert await c.add_partitions("t", pid, epoch, [("a", 0)]) == E.none
        assert c.verify_partitions("t", pid, epoch, [("a", 0), ("a", 1)]) == {
            ("a", 0): E.none, ("a", 1): E.transaction_abortable}
        assert len(c.log.parts[0]) == 2  # type: ignore[attr-defined]  # a question writes nothing
        assert await c.end_transaction("t", pid, epoch, True) == E.none
        await c.settle()
        assert c.verify_partitions("t", pid, epoch, [("a", 0)]) == {("a", 0): E.transaction_abortable}
    run(go())


# ---------------------------------------------------------------- the log's guard


def txn_batch(seq: int, pid: int = 7, epoch: int = 0) -> bytes:
    return rb.build_batch([(None, b"v")], producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                          is_transactional=True)


@pytest.fixture
def lg(tmp_path: Path) -> Any:
    log = Log.open(tmp_path / "t-0", LogConfig())
    yield log
    log.close()


def test_a_transactions_first_write_needs_the_guard_of_its_verification(lg: Log) -> None:
    with pytest.raises(InvalidTxnStateError, match="not part of an ongoing transaction"):
        lg.append_as_leader(txn_batch(0), verify_transactions=True)
    guard = lg.maybe_start_transaction_verification(7, 0, 0)
    assert guard is not None
    assert lg.maybe_start_transaction_verification(7, 0, 0) is guard  # the verification under way
    lg.append_as_leader(txn_batch(0), verify_transactions=True, verification_guard=guard)
    # ongoing now: nothing more to verify on this partition until the transaction ends (per transaction, not
    # per batch)
    assert lg.maybe_start_transaction_verification(7, 1, 0) is None
    lg.append_as_leader(txn_batch(1), verify_transactions=True)
    lg.append_as_leader(build_marker_batch(7, 0, True, 0), from_coordinator=True)
    # the next transaction is verified again, and the old guard is worth nothing
    with pytest.raises(InvalidTxnStateError):
        lg.append_as_leader(txn_batch(2), verify_transactions=True, verification_guard=guard)
    assert lg.maybe_start_transaction_verification(7, 2, 0) not in (None, guard)


def test_a_marker_between_verification_and_append_voids_the_guard(lg: Log) -> None:
    """Kafka's ABA case: verified, then the transaction is aborted before the write lands."""
    guard = lg.maybe_start_transaction_verification(7, 0, 0)
    lg.append_as_leader(build_marker_batch(7, 0, False, 0), from_coordinator=True)
    with pytest.raises(InvalidTxnStateError):
        lg.append_as_leader(txn_batch(0), verify_transactions=True, verification_guard=guard)


def test_a_v2_next_epoch_before_the_marker_is_not_part_of_the_open_transaction(lg: Log) -> None:
    """Transactions v2: the next transaction (epoch + 1) may write before the previous one's marker reached this
    partition; it must not slip into the open transaction of the old epoch (Kafka 4's hasOngoingTransaction
    compares epochs): it is verified (added) first, and the coordinator holds it back until the markers are
    written."""
    guard = lg.maybe_start_transaction_verification(7, 0, 0)
    lg.append_as_leader(txn_batch(0), verify_transactions=True, verification_guard=guard)
    assert lg.maybe_start_transaction_verification(7, 1, 0) is None  # the same transaction
    assert lg.maybe_start_transaction_verification(7, 0, 1) is not None  # the next one
    with pytest.raises(InvalidTxnStateError):
        lg.append_as_leader(txn_batch(0, epoch=1), verify_transactions=True)
    # the marker (epoch + 1, as v2 writes it) ends the old transaction and fences the old epoch
    lg.append_as_leader(build_marker_batch(7, 1, True, 0), from_coordinator=True)
    guard = lg.maybe_start_transaction_verification(7, 0, 1)
    lg.append_as_leader(txn_batch(0, epoch=1), verify_transactions=True, verification_guard=guard)
    with pytest.raises(InvalidProducerEpochError):
        lg.append_as_leader(txn_batch(1, epoch=0))


def test_higher_sequences_wait_for_the_verified_one(lg: Log) -> None:
    guard = lg.maybe_start_transaction_verification(7, 0, 0)
    with pytest.raises(OutOfOrderSequenceError, match="earliest seen sequence"):
        lg.append_as_leader(txn_batch(1), verify_transactions=True, verification_guard=guard)
    lg.append_as_leader(txn_batch(0), verify_transactions=True, verification_guard=guard)


def test_unused_verifications_expire_with_producer_ids(lg: Log) -> None:
    lg.maybe_start_transaction_verification(7, 0, 0)
    assert lg.producer_state.verification_states
    lg.remove_expired_producers(10**15, 1000)
    assert not lg.producer_state.verification_states


def test_without_verification_a_transactional_batch_needs_no_guard(lg: Log) -> None:
    lg.append_as_leader(txn_batch(0))  # transaction.partition.verification.enable=false: Kafka before 3.6


# ---------------------------------------------------------------- the leader's questions


class FakeCoordinator:
    def __init__(self) -> None:
        self.local: list[tuple[str, int, int, list[tuple[str, int]]]] = []

    def partition_for(self, tid: str) -> int:
        return 0 if tid.startswith("local") else 1

    def verify_partitions(self, tid: str, pid: int, epoch: int, tps: list[tuple[str, int]]) -> dict[Any, int]:
        self.local.append((tid, pid, epoch, tps))
        return {tp: E.transaction_abortable if tp[1] == 9 else E.none for tp in tps}


class FakeHost:
    config = KafkaConfig()
    broker_id = 1

    def partition_leader(self, topic: str, index: int) -> BrokerInfo:
        return BrokerInfo(1 if index == 0 else 2, "127.0.0.1", 1)


class RecordingVerifier(TransactionVerifier):
    """The request to the remote coordinator replaced by a recording."""

    def __init__(self, answers: dict[str, int]) -> None:
        super().__init__(FakeHost(), FakeCoordinator(), 1000)  # type: ignore[arg-type]
        self.sent: list[list[str]] = []
        self.answers = answers

    async def _send(self, broker_id: int, batch: dict[str, Any]) -> dict[str, dict[tuple[str, int], int]]:
        self.sent.append(list(batch))
        await asyncio.sleep(0)
        return {tid: dict.fromkeys(q.partitions, self.answers.get(tid, E.none)) for tid, q in batch.items()}


def test_questions_to_one_coordinator_are_batched_and_mapped() -> None:
    async def go() -> None:
        v = RecordingVerifier({"b": E.producer_fenced, "c": E.transaction_abortable})
        results = await asyncio.gather(
            v.verify("a", 1, 0, [("t", 0)], False), v.verify("b", 2, 0, [("t", 0)], False),
            v.verify("c", 3, 0, [("t", 0)], False), v.verify("c2", 3, 0, [("t", 0)], True),
        )
        assert v.sent == [["a", "b", "c", "c2"]]  # one request for all four
        assert results == [{}, {("t", 0): E.invalid_producer_epoch}, {("t", 0): E.invalid_txn_state}, {}]
        v.answers["c2"] = E.transaction_abortable  # a Produce v11 client knows TRANSACTION_ABORTABLE
        assert await v.verify("c2", 3, 0, [("t", 0)], True) == {("t", 0): E.transaction_abortable}
        # the local coordinator answers without a request
        assert await v.verify("local", 4, 0, [("t", 9)], False) == {("t", 9): E.invalid_txn_state}
        assert len(v.sent) == 2
    run(go())


def test_the_same_transactional_id_asked_twice_keeps_one_question() -> None:
    async def go() -> None:
        v = RecordingVerifier({})
        same, retry, newer, older = await asyncio.gather(
            v.verify("x", 1, 3, [("t", 0)], False), v.verify("x", 1, 3, [("t", 1)], False),
            v.verify("x", 1, 4, [("t", 2)], False), v.verify("x", 1, 2, [("t", 3)], False),
        )
        assert same == {("t", 0): E.network_exception}  # superseded by the retry (Kafka's same-epoch case)
        assert retry == {("t", 1): E.invalid_producer_epoch}  # fenced by the newer epoch
        assert newer == {}
        assert older == {("t", 3): E.invalid_producer_epoch}
        assert v.sent == [["x"]]
    run(go())


class BrokenConnection:
    """A coordinator connection whose answer does not match its request (a correlation id mismatch)."""

    closed = False

    async def request(self, body: Any, response_type: type, timeout: float) -> Any:
        from kbus.protocol.errors import ProtocolError

        raise ProtocolError("correlation id 3 != 4")

    async def close(self) -> None:
        self.closed = True


def test_a_connection_that_broke_the_protocol_is_dropped() -> None:
    """Its state is unknown: the question gets a retriable error and the next one a new connection."""
    async def go() -> None:
        v = TransactionVerifier(FakeHost(), FakeCoordinator(), 1000)  # type: ignore[arg-type]
        broken = BrokenConnection()
        v._connections[(2, False)] = broken  # type: ignore[assignment]
        assert await v.verify("x", 1, 0, [("t", 0)], False) == {("t", 0): E.network_exception}
        assert broken.closed and (2, False) not in v._connections
        await v.close()
    run(go())


# ---------------------------------------------------------------- the Produce handler


class SlowVerifier:
    """Answers once `release` is set, with `errors`."""

    def __init__(self, errors: dict[tuple[str, int], int]) -> None:
        self.release = asyncio.Event()
        self.errors = errors
        self.asked: list[tuple[str, int, int, list[tuple[str, int]]]] = []

    async def verify(self, tid: str, pid: int, epoch: int, tps: list[tuple[str, int]], abortable_known: bool,
                     add: bool = False) -> Any:
        self.asked.append((tid, pid, epoch, tps))
        await self.release.wait()
        return {tp: code for tp, code in self.errors.items() if tp in tps}


class FakeService:
    def __init__(self, verifier: SlowVerifier) -> None:
        self.verifier = verifier


def produce_call(m: Any, order: Any, records: bytes, index: int, tid: str | None) -> Any:
    from kbus.protocol.codec import RequestHeader, encode_response, response_type
    from kbus.protocol.produce_request_decode import PartitionProduceData, ProduceRequest, TopicProduceData
    from kbus.server.apis.registry import API_TABLE, RequestContext

    # what the connection's hand decoder gives the handler (timeout in milliseconds)
    req = ProduceRequest(tid, -1, 5000, [TopicProduceData("t", [PartitionProduceData(index, records)])])
    header = RequestHeader(0, 9, 7, "client", True)
    ctx = RequestContext(header, "127.0.0.1", 50000, "c1", append_order=order)

    async def go() -> Any:
        from kio.serial import entity_reader

        response = await API_TABLE[0].handler(m, ctx, req)
        decoded, _ = entity_reader(response_type(0, 9))(encode_response(header, response), 4 + 4 + 1)
        p = decoded.responses[0].partition_responses[0]
        return p.error_code, p.error_message

    return go()


def test_a_produce_waiting_for_verification_keeps_the_connections_order() -> None:
    """Pipelined Produce requests: the one behind a verification appends after it, not before."""
    from kbus.server.apis.registry import AppendOrder
    from tests.unit.test_api_handlers import managers

    async def go() -> None:
        # t-0's log knows no ongoing transaction: every transactional write to it needs a verification
        m, replicas, _, _ = managers()
        verifier = SlowVerifier({})
        m.transactions = FakeService(verifier)  # type: ignore[assignment]
        order = AppendOrder()
        first = asyncio.ensure_future(produce_call(m, order, txn_batch(0), 0, "tx"))
        await asyncio.sleep(0.01)
        assert verifier.asked == [("tx", 7, 0, [("t", 0)])] and order.must_wait()
        second = asyncio.ensure_future(produce_call(m, order, rb.build_batch([(None, b"plain")]), 1, None))
        await asyncio.sleep(0.01)
        assert replicas.appended == []  # the plain one waits behind the verification
        verifier.release.set()
        assert await first == (E.none, None) and await second == (E.none, None)
        assert [(t, p) for t, p, _, _ in replicas.appended] == [("t", 0), ("t", 1)]
        assert not order.must_wait()
    run(go())


@pytest.mark.parametrize(("answer", "expected"), [
    (E.invalid_txn_state, (E.invalid_txn_state, "Partition was not added to the transaction")),
    (E.invalid_producer_id_mapping, (E.invalid_producer_id_mapping, None)),
    (E.not_coordinator, (E.not_enough_replicas, "Unable to verify the partition has been added to the transaction. "
                                                "Underlying error: NOT_COORDINATOR")),
])
def test_a_failed_verification_appends_nothing(answer: E, expected: tuple[E, str | None]) -> None:
    from kbus.server.apis.registry import AppendOrder
    from tests.unit.test_api_handlers import managers

    async def go() -> None:
        m, replicas, _, _ = managers()
        verifier = SlowVerifier({("t", 0): answer})
        verifier.release.set()
        m.transactions = FakeService(verifier)  # type: ignore[assignment]
        assert await produce_call(m, AppendOrder(), txn_batch(0), 0, "tx") == expected
        assert replicas.appended == []
        # transactional records without a transactional id: refused before anything else
        refused = await produce_call(m, AppendOrder(), txn_batch(0), 0, None)
        assert refused[0] == E.transactional_id_authorization_failed
    run(go())


def test_leadership_moving_during_the_verification_answers_not_leader() -> None:
    """The coordinator's answer can take request.timeout.ms; a partition this broker no longer leads when it
    comes is answered NOT_LEADER_OR_FOLLOWER, and nothing is appended (Kafka's appendRecordsToLeader)."""
    from kbus.server.apis.registry import AppendOrder
    from tests.unit.test_api_handlers import managers

    async def go() -> None:
        m, replicas, _, _ = managers()
        verifier = SlowVerifier({})
        m.transactions = FakeService(verifier)  # type: ignore[assignment]
        produce = asyncio.ensure_future(produce_call(m, AppendOrder(), txn_batch(0), 0, "tx"))
        await asyncio.sleep(0.01)
        assert verifier.asked  # waiting for the coordinator
        # the metadata moved the leadership to another broker meanwhile
        replicas.leader_partition = lambda topic, index: (None, E.not_leader_or_follower)  # type: ignore[method-assign]
        verifier.release.set()
        assert (await produce)[0] == E.not_leader_or_follower
        assert replicas.appended == []
    run(go())


def test_a_partition_that_became_a_follower_refuses_leader_appends(tmp_path: Path) -> None:
    """A caller holding the Partition across an await (update_state reuses it) must not write into what is now a
    follower's log, stamped with the new leader's epoch: NOT_LEADER_OR_FOLLOWER, nothing written."""
    from kbus.server.metadata.types import PartitionState
    from kbus.server.partition.errors import NotLeaderError
    from kbus.server.partition.partition import Partition

    log = Log.open(tmp_path / "t-0", LogConfig())
    try:
        part = Partition("t", 0, log, PartitionState(1, 4, [1, 2], [1, 2]), 1)
        part.append_as_leader(rb.build_batch([(None, b"x")]))
        guard = log.maybe_start_transaction_verification(7, 0, 0)
        part.update_state(PartitionState(2, 5, [1, 2], [1, 2]))  # broker 2 leads now
        with pytest.raises(NotLeaderError) as raised:
            part.append_as_leader(txn_batch(0), verify_transactions=True, verification_guard=guard)
        assert raised.value.error_code == E.not_leader_or_follower
        assert log.log_end_offset == 1 and part.epochs.entries[-1][0] == 4
    finally:
        log.close()
