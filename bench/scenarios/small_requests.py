"""Broker CPU per small request: many connections each pipelining one-record Produce requests (acks=all, the
librdkafka default, to a one-replica topic), one-record Fetch requests (offset 0 of a topic holding one record per
partition), Metadata, OffsetCommit or Heartbeat requests (a consumer group of one member joined and synced before
the run: the commits and heartbeats are the member's, with its generation) or ApiVersions, as fast as the broker
answers. The frames are encoded once, so the client costs a socket write and a response read per request; the
figure is the broker's CPU time (its process CPU clock, all its threads: benchlib.cpu_seconds) over the run
divided by the requests answered.
Before the run one request of each frame is sent and its answer decoded: an error code fails the run (so a figure
never measures an error path).

    .venv/bin/python bench/scenarios/small_requests.py -b 127.0.0.1:9092 --broker-pid PID --label kbus [--api produce]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import struct
import time

from confluent_kafka.admin import AdminClient, NewTopic

from kbus.protocol.client import KafkaConnection
from kbus.protocol.codec import build, encode_request, nested, request_type, response_type
from kbus.protocol.record_batch import build_batch
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))  # bench/lib: benchlib
from benchlib import TICK, cpu_seconds  # noqa: E402


def system_seconds(pid: int) -> float:
    """The kernel's share of cpu_seconds (stime): sockets, files."""
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[12]) / TICK


# the versions of each request (librdkafka 2.x and the Java client send these or later)
VERSIONS = {"produce": (0, 9), "fetch": (1, 12), "metadata": (3, 12), "offsetcommit": (8, 8), "heartbeat": (12, 4),
            "apiversions": (18, 3)}  # fmt: skip
FETCH_TOPIC = "small-fetch"  # one record per partition: a Fetch at offset 0 answers exactly one record


def body(api: str, topic: str, partition: int, member: tuple[str, int, str] = ("", -1, ""), *, records: int = 1,
         acks: int = -1, version: int | None = None) -> object:
    """The request of API for one partition; MEMBER: (group id, generation id, member id) for the group APIs.
    Produce: RECORDS x 100 B in its batch, ACKS, VERSION (default VERSIONS')."""
    req = request_type(VERSIONS[api][0], VERSIONS[api][1] if version is None else version)
    assert req is not None

    def entity(name: str, /, **fields: object) -> object:
        return build(nested(req, name), **fields)

    group, generation, member_id = member
    if api == "produce":
        return build(req, acks=acks, timeout=5000, topic_data=(
            entity("TopicProduceData", name=topic, partition_data=(
                entity("PartitionProduceData", index=partition,
                       records=build_batch([(None, b"x" * 100)] * records)),)),))  # fmt: skip
    if api == "fetch":
        return build(req, replica_id=-1, max_wait=500, min_bytes=1, max_bytes=52428800, isolation_level=0,
                     session_id=0, session_epoch=-1, forgotten_topics_data=(), rack_id="", topics=(
            entity("FetchTopic", topic=FETCH_TOPIC, partitions=(
                entity("FetchPartition", partition=partition, fetch_offset=0,
                       partition_max_bytes=1048576),)),))  # fmt: skip
    if api == "metadata":
        return build(req, topics=(entity("MetadataRequestTopic", name=topic),))
    if api == "offsetcommit":
        return build(req, group_id=group, generation_id_or_member_epoch=generation, member_id=member_id, topics=(
            entity("OffsetCommitRequestTopic", name=topic, partitions=(
                entity("OffsetCommitRequestPartition", partition_index=partition, committed_offset=1,
                       committed_metadata=""),)),))  # fmt: skip
    if api == "heartbeat":
        return build(req, group_id=group, generation_id=generation, member_id=member_id)
    return build(req, client_software_name="bench", client_software_version="1")


def frame(api: str, topic: str, partition: int, member: tuple[str, int, str] = ("", -1, ""), **produce: int) -> bytes:
    return encode_request(body(api, topic, partition, member, **produce), 1, "small-requests")


async def join_group(host: str, port: int, group: str) -> tuple[str, int, str]:
    """A group of one member on a one-broker cluster, as a consumer joins: FindCoordinator v3, JoinGroup v5 twice
    (KIP-394's member id round), then SyncGroup v3."""
    conn = KafkaConnection(host, port, "small-requests")
    join = request_type(11, 5)
    sync = request_type(14, 3)
    assert join is not None and sync is not None
    find = request_type(10, 3)
    assert find is not None
    for _ in range(60):  # the first FindCoordinator creates __consumer_offsets: COORDINATOR_NOT_AVAILABLE until then
        found = await conn.request(build(find, key=group, key_type=0), response_type(10, 3))
        if found.error_code == 0:
            break
        await asyncio.sleep(0.5)
    else:
        raise SystemExit(f"FindCoordinator: error {found.error_code}")
    member_id = ""
    for _ in range(60):
        req = build(join, group_id=group, session_timeout=45000, rebalance_timeout=60000, member_id=member_id,
                    protocol_type="consumer",
                    protocols=(build(nested(join, "JoinGroupRequestProtocol"), name="range",
                                     metadata=b""),))  # fmt: skip
        answer = await conn.request(req, response_type(11, 5), timeout=90)
        member_id = answer.member_id
        if answer.error_code == 0:
            break
        if answer.error_code in (14, 15):  # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE: retriable
            await asyncio.sleep(0.5)
        elif answer.error_code != 79:  # MEMBER_ID_REQUIRED: join again with the id
            raise SystemExit(f"JoinGroup: error {answer.error_code}")
    generation = answer.generation_id
    synced = await conn.request(build(sync, group_id=group, generation_id=generation, member_id=member_id,
                                      assignments=(build(nested(sync, "SyncGroupRequestAssignment"),
                                                         member_id=member_id, assignment=b""),)),
                                response_type(14, 3))  # fmt: skip
    if synced.error_code != 0:
        raise SystemExit(f"SyncGroup: error {synced.error_code}")
    await conn.close()
    return group, generation, member_id


def _error_codes(value: object) -> list[int]:
    """Every error_code in a decoded response (nested entities too)."""
    codes = []
    for name in getattr(value, "__slots__", ()) or getattr(value, "__dataclass_fields__", ()):
        field = getattr(value, name)
        if name == "error_code":
            codes.append(int(field))
        for item in field if isinstance(field, tuple) else (field,):
            if hasattr(item, "__dataclass_fields__"):
                codes.extend(_error_codes(item))
    return codes


async def check(host: str, port: int, api: str, bodies: list[object], version: int | None = None) -> None:
    conn = KafkaConnection(host, port, "small-requests")
    for b in bodies:
        answer = await conn.request(b, response_type(VERSIONS[api][0], version or VERSIONS[api][1]))
        if any(_error_codes(answer)):
            raise SystemExit(f"{api}: the broker answered an error: {answer}")
    await conn.close()


async def connection(host: str, port: int, frames: list[bytes], count: int, window: int) -> int:
    reader, writer = await asyncio.open_connection(host, port)
    sent = done = 0
    while done < count:
        batch = min(window - (sent - done), count - sent)
        if batch > 0:
            writer.writelines(frames[(sent + i) % len(frames)] for i in range(batch))
            sent += batch
        size = struct.unpack(">i", await reader.readexactly(4))[0]
        await reader.readexactly(size)
        done += 1
    writer.close()
    return done


async def run(args: argparse.Namespace) -> dict[str, object]:
    host, port = args.bootstrap.rsplit(":", 1)
    member = ("", -1, "")
    if args.api in ("offsetcommit", "heartbeat"):
        member = await join_group(host, int(port), f"small-{args.api}-{os.getpid()}")
    if args.api == "fetch":  # one record in each partition of FETCH_TOPIC (a new topic: nothing else in it)
        await check(host, int(port), "produce", [body("produce", FETCH_TOPIC, p) for p in range(args.partitions)])
    produce = {"records": args.records, "acks": args.acks, "version": args.produce_version}
    if args.api != "produce":
        produce = {}
    bodies = [body(args.api, args.topic, p, member, **produce) for p in range(args.partitions)]
    await check(host, int(port), args.api, bodies, version=args.produce_version if produce else None)
    frames = [frame(args.api, args.topic, p, member, **produce) for p in range(args.partitions)]
    per_conn = args.requests // args.connections
    warm = [connection(host, int(port), frames, min(per_conn, 200), args.window) for _ in range(args.connections)]
    await asyncio.gather(*warm)
    cpu0, sys0, t0 = cpu_seconds(args.broker_pid), system_seconds(args.broker_pid), time.monotonic()
    counts = await asyncio.gather(*(connection(host, int(port), frames, per_conn, args.window)
                                    for _ in range(args.connections)))  # fmt: skip
    elapsed, cpu = time.monotonic() - t0, cpu_seconds(args.broker_pid) - cpu0
    kernel = system_seconds(args.broker_pid) - sys0
    n = sum(counts)
    return {"tool": "small-requests", "label": args.label, "api": args.api, "requests": n,
            "connections": args.connections, "window": args.window, "seconds": round(elapsed, 3),
            **({"records": args.records, "acks": args.acks, "version": args.produce_version or VERSIONS["produce"][1]}
               if args.api == "produce" else {}),
            "requests_per_s": round(n / elapsed), "broker_cpu_s": round(cpu, 3),
            "broker_cpu_us_per_request": round(cpu / n * 1e6, 2),
            "broker_sys_us_per_request": round(kernel / n * 1e6, 2), "loadavg": os.getloadavg()[0],
            "time": time.strftime("%Y-%m-%dT%H:%M:%S")}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-b", "--bootstrap", required=True)
    ap.add_argument("--broker-pid", type=int, required=True)
    ap.add_argument("--label", required=True)
    ap.add_argument("--api", choices=tuple(VERSIONS), default="produce")
    ap.add_argument("--topic", default="small")
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--window", type=int, default=4, help="requests in flight per connection")
    ap.add_argument("--requests", type=int, default=40_000)
    ap.add_argument("--records", type=int, default=1, help="Produce: 100 B records per request (one batch)")
    ap.add_argument("--acks", type=int, default=-1, choices=(-1, 1), help="Produce: acks (0 is never answered)")
    ap.add_argument("--produce-version", type=int, default=None, help="Produce: the request version (default 9)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    existing = admin.list_topics(timeout=30).topics
    new = [NewTopic(t, args.partitions, 1) for t in (args.topic, FETCH_TOPIC) if t not in existing]
    if new:
        for future in admin.create_topics(new).values():
            future.result(60)
        time.sleep(2)
    row = asyncio.run(run(args))
    line = json.dumps(row)
    print(line, flush=True)
    if args.out:
        with open(args.out, "a") as f:
            f.write(line + "\n")


if __name__ == "__main__":
    main()
