"""One hosted partition: its log, its leadership state, its high watermark, and the fetches waiting on it."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from kbus.server.metadata.types import PartitionState

if TYPE_CHECKING:
    from kbus.server.log.log import AppendResult, Log


class Partition:
    def __init__(self, topic: str, index: int, log: Log, state: PartitionState, local_broker_id: int) -> None:
        self.topic = topic
        self.index = index
        self.log = log
        self.local_broker_id = local_broker_id
        self.state = state
        # Standalone: everything in the local log is committed. Replication moves this to the ISR minimum.
        self.high_watermark = log.log_end_offset
        self._waiters: set[asyncio.Future[None]] = set()

    @property
    def is_leader(self) -> bool:
        return self.state.leader == self.local_broker_id

    @property
    def leader_epoch(self) -> int:
        return self.state.leader_epoch

    def append_as_leader(self, records: bytes) -> AppendResult:
        result = self.log.append_as_leader(records, leader_epoch=self.state.leader_epoch)
        if not result.duplicate:
            self.high_watermark = self.log.log_end_offset
            self.wake_fetchers()
        return result

    # ---- long-poll support: fetches park a future here and are woken by the next append ----
    def add_waiter(self, fut: asyncio.Future[None]) -> None:
        self._waiters.add(fut)

    def remove_waiter(self, fut: asyncio.Future[None]) -> None:
        self._waiters.discard(fut)

    def wake_fetchers(self) -> None:
        if self._waiters:
            waiters, self._waiters = self._waiters, set()
            for fut in waiters:
                if not fut.done():
                    fut.set_result(None)
