"""StateCoordinator, the ownership half the group and transaction coordinators share: a partition of the state
topic is NOT_COORDINATOR until elected, COORDINATOR_LOAD_IN_PROGRESS while its load runs, NONE once loaded, and
NOT_COORDINATOR again after resignation."""

from __future__ import annotations

import asyncio

from kio.schema.errors import ErrorCode as E

from kbus.server.coordinator.state_topic import BackgroundTasks, StateCoordinator, StatePartitions


class GatedLog:
    """A state log whose reads wait until the test opens the gate, so the load can be seen in flight."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()

    async def append(self, partition: int, records: bytes) -> int:
        return 0

    async def read(self, partition: int) -> list[bytes]:
        await self.gate.wait()
        return [b"state"]


class Coordinator(StateCoordinator[list[bytes]]):
    def __init__(self, log: GatedLog) -> None:
        self.tasks = BackgroundTasks("test")
        self.installed: dict[int, list[bytes]] = {}
        self.partitions = StatePartitions(
            "__test_state", log, lambda _p, chunks: chunks, self.installed.__setitem__,
            lambda p: self.installed.pop(p, None), self.tasks.spawn,
        )  # fmt: skip


def test_a_partition_is_not_coordinated_then_loading_then_owned_then_not_after_resignation() -> None:
    async def run() -> None:
        log = GatedLog()
        c = Coordinator(log)
        assert c.ownership_error(0) == E.not_coordinator and not c.coordinates(0)
        c.on_election(0)
        assert c.ownership_error(0) == E.coordinator_load_in_progress and c.coordinates(0)
        assert c.ownership_error(1) == E.not_coordinator
        log.gate.set()
        await c.tasks.settle()
        assert c.ownership_error(0) == E.none and c.installed == {0: [b"state"]} and c.owned == {0}
        c.on_resignation(0)
        assert c.ownership_error(0) == E.not_coordinator and c.installed == {} and not c.loading

    asyncio.run(run())
