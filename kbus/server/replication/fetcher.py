"""Follower side of replication: one fetcher task per leader broker pulls every partition this broker follows
from that leader (Fetch with replica_id), appends the batches unchanged, and tracks the leader's high watermark.

Before fetching a partition it first asks the leader where its own latest leader epoch ends
(OffsetForLeaderEpoch) and truncates what diverges, so a former leader that comes back drops writes that were
never committed instead of serving them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import zlib
from typing import Protocol

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12.response import PartitionData as FetchPartitionData  # FETCH_VERSION's

from kbus.common.broker_config import KafkaConfig
from kbus.common.cluster import BrokerInfo
from kbus.protocol.client import ClientSecurity, KafkaConnection
from kbus.protocol.codec import build, nested
from kbus.protocol.fetch_request import FETCH_REQUEST_VERSION, FetchPartition, FetchRequestV12
from kbus.protocol.record_batch import iter_complete_batches
from kbus.server.log.epochs import UNDEFINED_EPOCH, UNDEFINED_OFFSET
from kbus.server.partition.partition import Partition
from kbus.server.replication.quota import ReplicationQuotaManager
from kbus.server.replication.session import FetchSessionHandler
from kbus.server.util.repeated_warning import RepeatedWarning

log = logging.getLogger("kbus.replication")

FETCH_VERSION = FETCH_REQUEST_VERSION
EPOCH_VERSION = 4
FetchResp = load_response_schema(1, FETCH_VERSION)
EpochReq, EpochResp = load_request_schema(23, EPOCH_VERSION), load_response_schema(23, EPOCH_VERSION)
RETRY_BACKOFF_S = 0.5
FETCH_BACKOFF_S = 1.0  # Kafka's replica.fetch.backoff.ms default

TopicPartition = tuple[str, int]


class FollowerHost(Protocol):
    """What the fetchers need from the broker's replica manager."""

    broker_id: int
    config: KafkaConfig
    stopping: bool
    client_security: ClientSecurity
    follower_quota: ReplicationQuotaManager

    def get_partition(self, topic: str, index: int) -> Partition | None: ...
    def broker_endpoint(self, broker_id: int) -> BrokerInfo | None: ...
    def storage_error(self, part: Partition, what: str, error: OSError) -> Exception:
        """An I/O error on a replica's log: its log dir goes offline (Kafka's LogDirFailureChannel)."""
        ...


class ReplicaFetcher:
    """Fetches from one leader broker."""

    def __init__(self, host: FollowerHost, leader_id: int, fetcher_id: int = 0) -> None:
        self.host = host
        self.leader_id = leader_id
        self.fetcher_id = fetcher_id
        # value: the generation of the truncation check still owed (0: none). follow() bumps it, so a check
        # answered for an older leader epoch never clears the one a newer epoch needs.
        self.partitions: dict[TopicPartition, int] = {}
        # the leader's high watermark in each partition's last answer: a log that reached it is in sync (Kafka's
        # PartitionFetchState.lag == 0), which exempts it from throttling; compared only while throttling
        self._leader_hw: dict[TopicPartition, int] = {}
        # each partition's position as the last request carried it: reused while it has not moved (most of a
        # follower's partitions are idle), so an idle partition costs no new object and the session's comparison
        # with what the leader holds is an identity check
        self._positions: dict[TopicPartition, FetchPartition] = {}
        self._generation = 0
        self._task: asyncio.Task[None] | None = None
        self._conn: KafkaConnection | None = None
        self._changed = asyncio.Event()
        self._failures = RepeatedWarning(log)
        self._session = FetchSessionHandler()

    def add(self, tp: TopicPartition) -> None:
        self._generation += 1
        self.partitions[tp] = self._generation
        self._changed.set()
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name=f"replica-fetcher-{self.leader_id}-{self.fetcher_id}")

    def remove(self, tp: TopicPartition) -> None:
        self.partitions.pop(tp, None)
        self._leader_hw.pop(tp, None)
        self._positions.pop(tp, None)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        if self._conn is not None:
            await self._conn.close()

    # ------------------------------------------------------------------
    async def _connection(self) -> KafkaConnection | None:
        if self._conn is not None and self._conn.connected:
            return self._conn
        leader = self.host.broker_endpoint(self.leader_id)
        # replication goes over the inter-broker listener (Kafka's inter.broker.listener.name)
        endpoint = None if leader is None else leader.endpoint(self.host.config.inter_broker_listener)
        if endpoint is None:
            return None
        conn = KafkaConnection(
            endpoint.host,
            endpoint.port,
            f"broker-{self.host.broker_id}-fetcher-{self.fetcher_id}-{self.leader_id}",  # Kafka's client id form
            self.host.client_security,  # TLS/SASL of the inter-broker listener
        )
        await conn.connect()
        self._conn = conn
        return conn

    async def _run(self) -> None:
        try:
            await self._loop()
        finally:
            if self._conn is not None:
                await self._conn.close()
                self._conn = None

    async def _loop(self) -> None:
        while self.partitions and not self.host.stopping:
            try:
                conn = await self._connection()
                if conn is None:
                    await asyncio.sleep(RETRY_BACKOFF_S)
                    continue
                await self._truncate_pending(conn)
                await self._fetch_once(conn)
                self._failures.succeeded(f"Fetcher for leader {self.leader_id}: fetching again")
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._failures.failed(f"Fetcher for leader {self.leader_id}: {exc or type(exc).__name__}; retrying")
                if self._conn is not None:
                    await self._conn.close()
                    self._conn = None
                await asyncio.sleep(RETRY_BACKOFF_S)

    def _in_sync(self, tp: TopicPartition, part: Partition) -> bool:
        """Kafka's PartitionFetchState.isReplicaInSync: the log reached the leader's high watermark of the last
        answer (unknown before the first one: not in sync)."""
        hw = self._leader_hw.get(tp)
        return hw is not None and part.log_end_offset >= hw

    def _partition(self, tp: TopicPartition) -> Partition | None:
        part = self.host.get_partition(*tp)
        if part is None or part.is_leader or part.state.leader != self.leader_id:
            return None
        return part

    async def _truncate_pending(self, conn: KafkaConnection) -> None:
        pending = {tp: gen for tp, gen in self.partitions.items() if gen}
        if not pending:
            return
        topics: dict[str, list[object]] = {}
        for tp in pending:
            part = self._partition(tp)
            if part is None:
                continue
            topics.setdefault(tp[0], []).append(
                build(
                    nested(EpochReq, "OffsetForLeaderPartition"),
                    partition=tp[1],
                    current_leader_epoch=part.leader_epoch,
                    leader_epoch=part.epochs.latest_epoch,
                )
            )
        if not topics:
            return
        req = build(
            EpochReq,
            replica_id=self.host.broker_id,
            topics=[
                build(nested(EpochReq, "OffsetForLeaderTopic"), topic=t, partitions=ps) for t, ps in topics.items()
            ],
        )
        resp = await conn.request(req, EpochResp)
        for t in resp.topics:
            for p in t.partitions:
                tp = (t.topic, p.partition)
                part = self._partition(tp)
                if part is None or tp not in self.partitions:
                    continue
                if p.error_code != ErrorCode.none:
                    continue  # stale metadata on one side; retried on the next round
                try:
                    done = self._truncate(part, p.leader_epoch, p.end_offset)
                except OSError as e:
                    self.host.storage_error(part, "truncating", e)
                    self.remove(tp)
                    continue
                if done and self.partitions.get(tp) == pending.get(tp):
                    self.partitions[tp] = 0

    def _truncate(self, part: Partition, leader_epoch: int, leader_end_offset: int) -> bool:
        """KIP-279: truncate to where the leader's copy of our latest common epoch ends. Returns True when the
        logs now agree; False when another round is needed (the leader's epoch was not ours, so an older epoch
        may still diverge: ask again with our new latest epoch)."""
        leo = part.log_end_offset
        done = True
        if leader_epoch == UNDEFINED_EPOCH or leader_end_offset == UNDEFINED_OFFSET:
            target = min(part.high_watermark, leo) if part.epochs.latest_epoch != UNDEFINED_EPOCH else leo
        elif leader_epoch == part.epochs.latest_epoch:
            target = min(leader_end_offset, leo)
        else:
            local_epoch, local_end = part.epochs.end_offset_for(leader_epoch, leo)
            done = local_epoch == leader_epoch
            target = min(leader_end_offset, local_end if local_end >= 0 else leo, leo)
        if target < leo:
            log.info(
                "Truncating %s-%d from %d to %d (leader %d epoch %d ends at %d)",
                part.topic,
                part.index,
                leo,
                target,
                self.leader_id,
                leader_epoch,
                leader_end_offset,
            )
            part.truncate_to(target)
        return done or target >= leo

    async def _fetch_once(self, conn: KafkaConnection) -> None:
        cfg = self.host.config
        quota = self.host.follower_quota
        throttling = quota.throttling
        max_bytes = cfg.replica_fetch_max_bytes
        positions = self._positions
        wanted: dict[TopicPartition, FetchPartition] = {}
        for tp, gen in self.partitions.items():
            part = self._partition(tp)
            if part is None or gen:
                continue
            if throttling and quota.should_throttle(tp[0], tp[1], self._in_sync(tp, part)):
                continue  # Kafka's shouldFollowerThrottle: left out of this fetch while the quota is exceeded
            epoch, leo, log_start = part.leader_epoch, part.log_end_offset, part.log_start_offset
            fp = positions.get(tp)
            if (fp is None or fp.fetch_offset != leo or fp.current_leader_epoch != epoch
                    or fp.log_start_offset != log_start or fp.partition_max_bytes != max_bytes):
                fp = positions[tp] = FetchPartition(tp[1], epoch, leo, log_start, max_bytes)
            wanted[tp] = fp
        if not wanted:
            self._changed.clear()
            # nothing to fetch (or all of it throttled): Kafka's fetcher backs off replica.fetch.backoff.ms
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), FETCH_BACKOFF_S)
            return
        # a KIP-227 session: after the first, a request lists only the partitions whose position moved
        session = self._session.build(wanted)
        # encoded by hand (kbus.protocol.fetch_request): kio's writer took ~190 µs for 18 partitions, and the
        # leader's high watermark waits for this request
        req = FetchRequestV12(
            replica_id=self.host.broker_id,
            max_wait_ms=cfg.replica_fetch_wait_max_ms,
            min_bytes=1,
            max_bytes=10 * 1024 * 1024,
            topics=session.topics(),
            forgotten=session.forgotten_topics(),
            session_id=session.session_id,
            session_epoch=session.epoch,
        )
        try:
            resp = await conn.request(req, FetchResp, timeout=cfg.replica_fetch_wait_max_ms / 1000 + 30)
        except BaseException:
            self._session.handle_error()
            raise
        if not self._session.handle_response(resp.error_code, resp.session_id):
            log.info("Fetcher for leader %d: fetch session %d: %s; starting a new one", self.leader_id,
                     session.session_id, ErrorCode(resp.error_code).name.upper())  # fmt: skip
            return
        progress = failed = False
        for t in resp.responses:
            for p in t.partitions:
                tp = (t.topic, p.partition_index)
                part = self._partition(tp)
                if part is None or tp not in self.partitions:
                    continue
                progress |= bool(p.records)
                try:
                    failed |= not self._apply(part, tp, p)
                except OSError as e:
                    # this replica's log dir failed: it stops here, the others go on (ReplicaFetcherThread
                    # marks the partition failed and the dir offline)
                    self.host.storage_error(part, "appending to", e)
                    self.remove(tp)
                    continue
                if throttling and p.records and quota.is_throttled(*tp):
                    quota.record(len(p.records))  # Kafka's processPartitionData: throttled bytes, after the fact
        if failed and not progress:
            # e.g. UNKNOWN_LEADER_EPOCH while the leader learns of its new epoch: back off instead of spinning
            # (Kafka's replica.fetch.backoff.ms)
            await asyncio.sleep(RETRY_BACKOFF_S)

    def _apply(self, part: Partition, tp: TopicPartition, p: FetchPartitionData) -> bool:
        """Apply one partition of a fetch response; False when it carried an error."""
        code = p.error_code
        if code == ErrorCode.none:
            records = p.records or b""
            leo = part.log_end_offset
            if records:
                # drop whole batches we already have; a batch straddling our end means we cut inside it
                start = 0
                for h in iter_complete_batches(records):
                    if h.next_offset <= leo:
                        start = h.position + h.size
                        continue
                    if h.base_offset < leo:
                        part.truncate_to(h.base_offset)
                    break
                records = records[start:]
            part.append_as_follower(records, p.high_watermark)
            self._leader_hw[tp] = p.high_watermark
            if part.log_start_offset < p.log_start_offset <= part.log_end_offset:
                part.delete_records(p.log_start_offset)  # DeleteRecords and retention on the leader reach followers
            return True
        if code == ErrorCode.offset_out_of_range:
            if part.log_end_offset < p.log_start_offset:
                log.info("%s-%d is behind the leader's log start %d: starting over there", *tp, p.log_start_offset)
                part.truncate_fully_and_start_at(p.log_start_offset)
            else:
                self.add(tp)  # ahead of the leader: redo the epoch check
        elif code not in (
            ErrorCode.fenced_leader_epoch,
            ErrorCode.unknown_leader_epoch,
            ErrorCode.not_leader_or_follower,
            ErrorCode.unknown_topic_or_partition,
            ErrorCode.kafka_storage_error,  # the leader's log dir failed: the controller moves leadership
        ):
            log.warning("Fetch of %s-%d from leader %d failed: %s", *tp, self.leader_id, code.name)
        # (the others mean metadata is moving: the next reconcile re-targets this partition)
        return False


def fetcher_id(tp: TopicPartition, num_fetchers: int) -> int:
    """Which of a leader's `num.replica.fetchers` fetchers a partition goes to (Kafka's getFetcherId spreads them
    by a hash of topic and partition too; kbus's hash is crc32, not String.hashCode)."""
    return (zlib.crc32(tp[0].encode()) * 31 + tp[1]) % num_fetchers


class ReplicaFetcherManager:
    """The follower side's fetchers: `num.replica.fetchers` per leader broker (Kafka's fetcher threads, here
    asyncio tasks, each with its own connection and fetch request), each partition on one of them."""

    def __init__(self, host: FollowerHost) -> None:
        self.host = host
        self.fetchers: dict[tuple[int, int], ReplicaFetcher] = {}  # (leader id, fetcher id)
        self.assigned: dict[TopicPartition, int] = {}  # partition -> its leader
        self.num_fetchers = host.config.num_replica_fetchers

    def _fetcher(self, tp: TopicPartition, leader_id: int) -> ReplicaFetcher:
        key = (leader_id, fetcher_id(tp, self.num_fetchers))
        fetcher = self.fetchers.get(key)
        if fetcher is None:
            fetcher = self.fetchers[key] = ReplicaFetcher(self.host, leader_id, key[1])
        return fetcher

    def follow(self, tp: TopicPartition, leader_id: int) -> None:
        """Fetch `tp` from `leader_id` (re-checking truncation first, as after any leader change)."""
        self.unfollow(tp)
        self.assigned[tp] = leader_id
        self._fetcher(tp, leader_id).add(tp)

    def unfollow(self, tp: TopicPartition) -> None:
        leader = self.assigned.pop(tp, None)
        if leader is not None:
            self._fetcher(tp, leader).remove(tp)

    def resize(self, num_fetchers: int) -> None:
        """num.replica.fetchers changed (dynamically, as Kafka's ReplicaFetcherManager.resizeThreadPool): every
        partition moves to its fetcher under the new count; a fetcher left without partitions ends."""
        if num_fetchers == self.num_fetchers:
            return
        followed = dict(self.assigned)
        for tp in followed:
            self.unfollow(tp)
        self.num_fetchers = num_fetchers
        for tp, leader in followed.items():
            self.follow(tp, leader)
        log.info("Replica fetchers per source broker: %d", num_fetchers)

    async def stop(self) -> None:
        for f in self.fetchers.values():
            await f.stop()
        self.fetchers.clear()
