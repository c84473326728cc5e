"""State kept in a compacted internal topic (Kafka's GroupMetadataManager / TransactionStateManager pattern), the
piece every coordinator shares: keys map onto the topic's partitions, the leader of a partition coordinates its
keys, loads them by reading the partition when it becomes leader and drops them when it resigns, and writes each
change as records appended with acks=all.

The group coordinator keeps groups and offsets in `__consumer_offsets` this way, the transaction coordinator its
transactions in `__transaction_state`, the share coordinator in `__share_group_state`: all are `StateCoordinator`s,
with `InternalTopicLog`, `StatePartitions` and `follow_leadership`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from kbus.protocol.record_batch import iter_complete_batches
from kbus.server.coordinator.state_path import StateReplicas as StateReplicas
from kbus.server.coordinator.state_path import StateWriteError as StateWriteError
from kbus.server.coordinator.state_path import append_acked, ownership_error

log = logging.getLogger("kbus.coordinator")
State = TypeVar("State")



class BackgroundTasks:
    """A coordinator's fire-and-forget work (loads, appends, marker writes): failures are logged, never lost as
    "Task exception was never retrieved", and tests or shutdown can wait for everything in flight."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._tasks: set[asyncio.Future[object]] = set()

    def spawn(self, coro: Awaitable[object]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Future[object]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("%s task failed", self._name, exc_info=task.exception())

    async def settle(self) -> None:
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def cancel(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await self.settle()

@dataclass(frozen=True)
class StateTopic:
    """The compacted internal topic a coordinator keeps its state in, as created on first use."""

    name: str
    num_partitions: int
    replication_factor: int
    configs: dict[str, str]


class KeyedCoordinator(Protocol):
    """A coordinator whose keys (group ids, transactional ids) map onto the partitions of its state topic; the
    leader of a key's partition is the key's coordinator (FindCoordinator)."""

    def state_topic(self) -> StateTopic: ...
    def partition_for(self, key: str) -> int: ...
    def coordinates(self, partition: int) -> bool: ...


class StateLog(Protocol):
    """A coordinator's view of its state topic: append to / read back one partition."""

    async def append(self, partition: int, records: bytes) -> int: ...
    async def read(self, partition: int) -> list[bytes]: ...


class InternalTopicLog:
    """`StateLog` over this broker's partitions of one internal topic.

    Appends wait for the in-sync replicas (Kafka's coordinators write with acks=-1), so an acknowledged change
    survives the coordinator's failover. Loads read to the log end, not the high watermark: a freshly elected
    leader's high watermark can trail records that were already acknowledged (Kafka loads the same way).
    """

    def __init__(self, topic: str, replicas: StateReplicas, commit_timeout_ms: int = 5000) -> None:
        self.topic = topic
        self._replicas = replicas
        self._timeout_ms = commit_timeout_ms

    async def append(self, partition: int, records: bytes) -> int:
        """acks=-1 with min.insync.replicas: NOT_ENOUGH_REPLICAS and a timeout both surface as exceptions (the
        append: state_path, compiled)."""
        return await append_acked(self._replicas, self.topic, partition, records, self._timeout_ms)

    @property
    def replicas(self) -> StateReplicas:
        return self._replicas

    @property
    def timeout_ms(self) -> int:
        """How long an append waits for the in-sync replicas (offsets.commit.timeout.ms and its like)."""
        return self._timeout_ms

    async def read(self, partition: int) -> list[bytes]:
        # The partition is not served while it loads, so reading it off the loop cannot race our own appends.
        return await asyncio.to_thread(self._read_all, partition)

    def _read_all(self, partition: int) -> list[bytes]:
        part = self._replicas.get_partition(self.topic, partition)
        if part is None:
            return []
        offset, end = part.log_start_offset, part.log_end_offset
        chunks = []
        while offset < end:
            chunk = part.read(offset, 1 << 20, max_offset=end, min_one_batch=True).to_bytes()
            last = None
            for header in iter_complete_batches(chunk):
                last = header
            if last is None:
                break
            chunks.append(chunk)
            offset = last.next_offset
        return chunks


class StatePartitions(Generic[State]):
    """Which partitions of a state topic this coordinator owns (Kafka's ownedPartitions / loadingPartitions).

    `elect` starts a load: the partition is read back (`StateLog.read`), decoded off the event loop (`replay`,
    CPU work proportional to the partition) and handed to `install`; only then is it owned. `resign` forgets it
    and `uninstall`s its state. A resign (and re-elect) while a load is in flight makes that load's result
    stale: each election's load carries a token, and only the current one installs.
    """

    def __init__(
        self,
        topic: str,
        log: StateLog,
        replay: Callable[[int, list[bytes]], State],
        install: Callable[[int, State], None],
        uninstall: Callable[[int], None],
        spawn: Callable[[Awaitable[None]], None],
    ) -> None:
        self.topic = topic
        self._log = log
        self._replay = replay
        self._install = install
        self._uninstall = uninstall
        self._spawn = spawn
        self.owned: set[int] = set()
        self.loading: dict[int, object] = {}  # partition -> the token of the load in flight

    def elect(self, partition: int) -> bool:
        """This broker now leads `partition`: load it. False when it is already owned or loading."""
        if partition in self.owned or partition in self.loading:
            return False
        token = object()
        self.loading[partition] = token
        self._spawn(self._load(partition, token))
        return True

    def has(self, partition: int) -> bool:
        """Owned or loading: this broker's coordinator answers for the partition's keys (perhaps with
        COORDINATOR_LOAD_IN_PROGRESS for now)."""
        return partition in self.owned or partition in self.loading

    def resign(self, partition: int) -> None:
        self.owned.discard(partition)
        self.loading.pop(partition, None)
        self._uninstall(partition)

    def clear(self) -> None:
        self.owned.clear()
        self.loading.clear()

    async def _load(self, partition: int, token: object) -> None:
        try:
            chunks = await self._log.read(partition)
            state = await asyncio.to_thread(self._replay, partition, chunks)
        except Exception:
            log.exception("Loading %s-%d failed", self.topic, partition)
            if self.loading.get(partition) is token:
                del self.loading[partition]
            return
        if self.loading.get(partition) is not token:  # resigned (and maybe re-elected) while loading
            return
        self._install(partition, state)
        del self.loading[partition]
        self.owned.add(partition)


class StateCoordinator(Generic[State]):
    """The ownership half every state-topic coordinator shares (group, transaction and share coordinators; Kafka's
    GroupMetadataManager / TransactionStateManager ownedPartitions and loadingPartitions checks): which partitions
    of the state topic this broker answers for, the answer for a key of a partition it does not, and the leadership
    hooks `follow_leadership` calls."""

    partitions: StatePartitions[State]

    @property
    def owned(self) -> set[int]:
        return self.partitions.owned

    @property
    def loading(self) -> dict[int, object]:
        return self.partitions.loading

    def coordinates(self, partition: int) -> bool:
        return self.partitions.has(partition)

    def ownership_error(self, partition: int) -> int:
        """COORDINATOR_LOAD_IN_PROGRESS while `partition` loads, NOT_COORDINATOR when this broker does not own it,
        else NONE (the rule: state_path.ownership_error, compiled)."""
        partitions = self.partitions
        return ownership_error(partitions.loading, partitions.owned, partition)

    def on_election(self, partition: int) -> None:
        self.partitions.elect(partition)

    def on_resignation(self, partition: int) -> None:
        self.partitions.resign(partition)


class StateLoader(Protocol):
    def on_election(self, partition: int) -> None: ...
    def on_resignation(self, partition: int) -> None: ...


def follow_leadership(replicas: StateReplicas, topic: str, loader: StateLoader) -> None:
    """Load a state partition when this broker becomes its leader, unload it on resignation."""

    def on_leadership(name: str, partition: int, is_leader: bool) -> None:
        if name != topic:
            return
        if is_leader:
            loader.on_election(partition)
        else:
            loader.on_resignation(partition)

    replicas.add_leadership_listener(on_leadership)
