"""The transactions page: every transactional id described (long-running ones flagged), and the search for hanging
transactions that kafka-transactions.sh find-hanging does (kbus.admin.transactions.hanging_transactions)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from kbus.admin.errors import AdminError
from kbus.admin.kafka import KafkaAdmin
from kbus.admin.transactions import HangingTransaction, TransactionsAdmin, hanging_transactions

DEFAULT_MAX_TIMEOUT_MIN = 15  # Kafka's transaction.max.timeout.ms default, as find-hanging assumes
MAX_DESCRIBED = 200  # a cluster with more transactional ids lists the rest without their details


@dataclass(frozen=True)
class TxnRow:
    transactional_id: str
    coordinator: int
    producer_id: int
    state: str
    producer_epoch: int | None = None
    timeout_ms: int | None = None
    duration_ms: int | None = None  # since the transaction started; None when none is under way
    partitions: tuple[tuple[str, int], ...] = ()

    @property
    def overdue(self) -> bool:
        """Ongoing for longer than its own timeout: the coordinator should have aborted it by now."""
        return self.duration_ms is not None and self.timeout_ms is not None and self.duration_ms > self.timeout_ms


def describe_all(admin: TransactionsAdmin) -> list[TxnRow]:
    now = int(time.time() * 1000)
    rows: list[TxnRow] = []
    for n, t in enumerate(sorted(admin.list_transactions(), key=lambda t: t.transactional_id)):
        row = TxnRow(t.transactional_id, t.coordinator, t.producer_id, t.state)
        if n < MAX_DESCRIBED:
            try:
                d = admin.describe(t.transactional_id)
            except AdminError:
                rows.append(row)
                continue
            row = TxnRow(t.transactional_id, d.coordinator, d.producer_id, d.state, d.producer_epoch, d.timeout_ms,
                         now - d.start_time_ms if d.start_time_ms >= 0 else None, d.partitions)
        rows.append(row)
    return rows


def find_hanging(
    admin: TransactionsAdmin, topics: KafkaAdmin, topic: str | None, max_timeout_ms: int
) -> list[HangingTransaction]:
    """Every partition of `topic`, or of every topic: one DescribeProducers per partition."""
    names = [topic] if topic else topics.list_topics()
    partitions = [(t, p) for t in names for p in topics.partitions_of(t)]
    return hanging_transactions(admin, partitions, max_timeout_ms, int(time.time() * 1000))
