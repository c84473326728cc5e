"""A socket-level request fuzzer for kbus (used by tests/integration/test_fuzz_frames.py and bench/scenarios/fuzz.py).

Frames are built from kio's schemas for ApiVersions, Metadata, Produce, Fetch, ListOffsets, CreateTopics, JoinGroup
and OffsetCommit at every version kbus serves, with values drawn so the broker does real work (topic and group
names from a small pool, short waits, valid record batches), then most of them are mutated: bit flips, counts and
lengths that claim too much, -1 where a length goes, truncation, inserted bytes, a wrong version. Produce also
sends CRC-valid garbage batches (random records, garbage compressed payloads, negative key lengths, control or
count-mismatch headers) that must be refused, and well-formed batches whose acknowledged records are checked byte
for byte at the end.

Each frame is followed on its connection by an ApiVersions "sentinel": the sentinel's answer proves the broker
handled (or dropped) the frame and still serves that connection; a close means the frame was refused. Everything
is driven by one seeded random.Random, so a run is reproducible.
"""

from __future__ import annotations

import argparse
import datetime
import io
import json
import os
import random
import socket
import struct
import sys
import time
from collections import Counter
from dataclasses import dataclass, field, fields, is_dataclass
from types import NoneType, UnionType
from typing import Union, get_args, get_origin

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from kbus.protocol import record_batch as rb

APIS = {  # api key -> (name, versions kbus serves)
    18: ("ApiVersions", range(0, 4)),
    3: ("Metadata", range(0, 13)),
    0: ("Produce", range(3, 10)),
    1: ("Fetch", range(4, 13)),
    2: ("ListOffsets", range(1, 8)),
    19: ("CreateTopics", range(2, 8)),
    11: ("JoinGroup", range(0, 10)),
    8: ("OffsetCommit", range(2, 10)),
}
# every other API kbus serves, for the nullable-field sweep (null where the schema allows it must never reach a
# handler as a TypeError); the ones that delete or rewrite data get their own topics
OTHER_APIS = {
    9: ("OffsetFetch", range(1, 10)), 10: ("FindCoordinator", range(0, 5)), 12: ("Heartbeat", range(0, 5)),
    13: ("LeaveGroup", range(0, 6)), 14: ("SyncGroup", range(0, 6)), 15: ("DescribeGroups", range(0, 6)),
    16: ("ListGroups", range(0, 6)), 20: ("DeleteTopics", range(1, 7)), 21: ("DeleteRecords", range(0, 3)),
    22: ("InitProducerId", range(0, 5)), 23: ("OffsetForLeaderEpoch", range(2, 5)),
    24: ("AddPartitionsToTxn", range(0, 4)), 25: ("AddOffsetsToTxn", range(0, 4)), 26: ("EndTxn", range(0, 4)),
    27: ("WriteTxnMarkers", range(1, 2)), 28: ("TxnOffsetCommit", range(0, 4)), 32: ("DescribeConfigs", range(1, 5)),
    33: ("AlterConfigs", range(0, 3)), 37: ("CreatePartitions", range(0, 4)), 42: ("DeleteGroups", range(0, 3)),
    44: ("IncrementalAlterConfigs", range(0, 2)), 47: ("OffsetDelete", range(0, 1)),
    60: ("DescribeCluster", range(0, 2)), 61: ("DescribeProducers", range(0, 1)),
    65: ("DescribeTransactions", range(0, 1)), 66: ("ListTransactions", range(0, 2)),
}
DESTRUCTIVE = {20, 21, 24, 27, 28, 33, 37, 44}
VICTIM_TOPICS = ["fuzz-victim", "fuzz-auto"]
ACKED_TOPIC = "fuzz-acked"
GARBAGE_TOPIC = "fuzz-garbage"
COMPACT_TOPIC = "fuzz-compact"
TOPICS = [ACKED_TOPIC, GARBAGE_TOPIC, COMPACT_TOPIC, "fuzz-auto"]
GROUPS = ["fuzz-g1", "fuzz-g2"]
SENTINEL_CORRELATION = 0x7FFF0000


def _unwrap(tp: object) -> tuple[object, bool]:
    if get_origin(tp) in (UnionType, Union):
        args = [a for a in get_args(tp) if a is not NoneType]
        return args[0], len(args) != len(get_args(tp))
    return tp, False


class Generator:
    """Valid request bodies with values that make the broker work, from kio's schema."""

    def __init__(self, rng: random.Random, null_rate: float = 0.0, extreme_rate: float = 0.05) -> None:
        self.rng = rng
        self.null_rate = null_rate  # how often a nullable field is sent as null
        self.extreme_rate = extreme_rate  # how often an integer is its type's bound (offsets, epochs, timestamps)
        self.topics = TOPICS

    def batch(self, n: int | None = None, codec: int = rb.COMPRESSION_NONE) -> tuple[bytes, list[tuple[bytes, bytes]]]:
        rng = self.rng
        count = n or rng.randint(1, 5)
        records = [(rng.randbytes(rng.randint(1, 8)), rng.randbytes(rng.randint(0, 64))) for _ in range(count)]
        return rb.build_batch(records, compression=codec), records

    def _string(self, name: str) -> str:
        if "group" in name:
            return self.rng.choice(GROUPS)
        if "topic" in name or name in ("name", "resource_name"):
            return self.rng.choice(self.topics)
        if "protocol_type" in name:
            return "consumer"
        return self.rng.choice(["", "a", "kbus-fuzz", "x" * self.rng.randint(0, 20)])

    def _int(self, name: str, lo: int, hi: int) -> int:
        rng = self.rng
        if rng.random() < self.extreme_rate:  # arithmetic on it must not leave the type (issue 28)
            return rng.choice([lo, hi, lo + 1, hi - 1])
        if "partition" in name or name == "index":
            return rng.randint(0, 2)
        if name == "acks":
            return rng.choice([-1, 0, 1])
        if name in ("num_partitions",):
            return rng.randint(1, 3)
        if name == "replication_factor":
            return rng.choice([1, -1])
        if "epoch" in name or "generation" in name or name == "replica_id":
            return rng.choice([-1, 0, 1])
        if "max_bytes" in name or "min_bytes" in name:
            return rng.choice([0, 1, 1024, 1 << 20])
        if name == "timestamp":
            return rng.choice([-1, -2, -3, 0])
        if "offset" in name:
            return rng.choice([-1, 0, 1, 5, 1000])
        return rng.choice([lo if lo < 0 else 0, 0, 1, 2, 100])

    def _value(self, kafka_type: str, name: str) -> object:
        rng = self.rng
        bounds = {"int8": (-128, 127), "int16": (-(2**15), 2**15 - 1), "int32": (-(2**31), 2**31 - 1),
                  "int64": (-(2**63), 2**63 - 1), "uint16": (0, 2**16 - 1)}
        if kafka_type in bounds:
            return self._int(name, *bounds[kafka_type])
        if kafka_type == "bool":
            return rng.random() < 0.5
        if kafka_type == "string":
            return self._string(name)
        if kafka_type == "records":
            return self.batch()[0]
        if kafka_type == "bytes":
            return rng.randbytes(rng.randint(0, 16))
        if kafka_type == "uuid":
            return None
        if kafka_type == "error_code":
            from kio.schema.errors import ErrorCode

            return ErrorCode.none
        if kafka_type == "float64":
            return 0.0
        if kafka_type in ("timedelta_i32", "timedelta_i64"):
            if "session" in name:
                return datetime.timedelta(milliseconds=rng.randint(6000, 10000))
            if "rebalance" in name:
                return datetime.timedelta(milliseconds=rng.randint(0, 2000))
            return datetime.timedelta(milliseconds=rng.randint(0, 50))
        if kafka_type == "datetime_i64":
            return None
        raise AssertionError(kafka_type)

    def entity(self, cls: type) -> object:
        kwargs: dict[str, object] = {}
        for f in fields(cls):
            inner, nullable = _unwrap(f.type)
            kafka_type = f.metadata.get("kafka_type")
            if get_origin(inner) is tuple:
                elem = get_args(inner)[0]
                n = self.rng.randint(0, 3)
                if is_dataclass(elem):
                    kwargs[f.name] = tuple(self.entity(elem) for _ in range(n))
                else:
                    kwargs[f.name] = tuple(self._value(kafka_type, f.name) for _ in range(n))
            elif is_dataclass(inner):
                kwargs[f.name] = self.entity(inner)  # type: ignore[arg-type]
            else:
                value = self._value(kafka_type, f.name)
                if value is None and not nullable and kafka_type == "datetime_i64":
                    value = datetime.datetime.now(datetime.UTC)
                kwargs[f.name] = value
            if nullable and "tag" not in f.metadata and self.rng.random() < self.null_rate:
                kwargs[f.name] = None
        return cls(**kwargs)

    def body(self, api_key: int, version: int) -> bytes:
        out = io.BytesIO()
        cls = load_request_schema(api_key, version)
        entity_writer(cls)(out, self.entity(cls))
        return out.getvalue()


def request_frame(api_key: int, version: int, correlation: int, body: bytes, client_id: bytes = b"fuzz") -> bytes:
    try:
        flexible = bool(load_request_schema(api_key, version).__flexible__)
    except Exception:
        flexible = False
    payload = struct.pack(">hhih", api_key, version, correlation, len(client_id)) + client_id
    payload += (b"\x00" if flexible else b"") + body
    return struct.pack(">i", len(payload)) + payload


def mutate(rng: random.Random, data: bytes) -> bytes:
    buf = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        at = rng.randint(0, max(len(buf) - 1, 0))
        kind = rng.randrange(7)
        if kind == 0 and buf:
            buf[at] ^= 1 << rng.randrange(8)
        elif kind == 1:  # a count/length that claims far more than the frame holds
            buf[at:at] = rng.choice(
                [b"\x7f\xff\xff\xff", b"\x81\x80\x80\x80\x10", b"\xff\xff\xff\xff\x0f", b"\x7f\xff"]
            )
        elif kind == 2:
            buf[at:at] = rng.choice([b"\xff\xff", b"\xff\xff\xff\xff", b"\x00"])
        elif kind == 3:
            del buf[at:]
        elif kind == 4:
            buf[at:at] = rng.randbytes(rng.randint(1, 8))
        elif kind == 5 and buf:
            buf[at] = rng.choice([0, 0xFF, 0x80, 0x7F])
        elif kind == 6 and buf:
            del buf[at : at + rng.randint(1, 4)]
    return bytes(buf)


def garbage_batch(rng: random.Random, gen: Generator) -> tuple[str, bytes]:
    """A CRC-valid batch the broker must refuse: (kind, bytes)."""
    good, _ = gen.batch(rng.randint(1, 4))
    buf = bytearray(good)
    kind = rng.choice(["random-records", "garbage-lz4", "garbage-gzip", "garbage-zstd", "negative-key-length",
                       "control-bit", "count-mismatch", "two-batches", "base-offset"])
    if kind == "random-records":
        buf = buf[: rb.RECORDS_OFFSET] + bytearray(rng.randbytes(rng.randint(1, 64)))
    elif kind.startswith("garbage-"):
        codec = {"lz4": rb.COMPRESSION_LZ4, "gzip": rb.COMPRESSION_GZIP, "zstd": rb.COMPRESSION_ZSTD}[kind[8:]]
        buf = buf[: rb.RECORDS_OFFSET] + bytearray(rng.randbytes(rng.randint(4, 64)))
        struct.pack_into(">h", buf, rb.ATTRIBUTES_OFFSET, codec)
    elif kind == "negative-key-length":
        buf[rb.RECORDS_OFFSET + 4] = rng.choice([3, 5, 7])  # zigzag -2, -3, -4
    elif kind == "control-bit":
        struct.pack_into(">h", buf, rb.ATTRIBUTES_OFFSET, rb.CONTROL_FLAG_MASK)
    elif kind == "count-mismatch":
        struct.pack_into(">i", buf, rb.RECORDS_COUNT_OFFSET, rng.choice([0, 7, 1000, -1]))
    elif kind == "base-offset":
        struct.pack_into(">q", buf, 0, rng.randint(1, 1000))
    struct.pack_into(">i", buf, rb.LENGTH_OFFSET, len(buf) - rb.LOG_OVERHEAD)
    struct.pack_into(">I", buf, rb.CRC_OFFSET, rb.crc32c(memoryview(buf)[rb.ATTRIBUTES_OFFSET :]))
    if kind == "two-batches":
        buf += good
    return kind, bytes(buf)


def produce_body(version: int, topic: str, records: bytes, acks: int = 1) -> bytes:
    cls = load_request_schema(0, version)
    mod = sys.modules[cls.__module__]
    req = cls(
        transactional_id=None, acks=acks, timeout=datetime.timedelta(milliseconds=5000),
        topic_data=(
            mod.TopicProduceData(name=topic, partition_data=(mod.PartitionProduceData(index=0, records=records),)),
        ),
    )
    out = io.BytesIO()
    entity_writer(cls)(out, req)
    return out.getvalue()


class Conn:
    def __init__(self, host: str, port: int, timeout: float) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.buf = b""

    def close(self) -> None:
        self.sock.close()

    def read_frame(self) -> bytes | None:
        """One response frame; None when the broker closed the connection (TimeoutError on silence)."""
        while True:
            if len(self.buf) >= 4:
                (size,) = struct.unpack_from(">i", self.buf)
                if len(self.buf) >= 4 + size:
                    frame, self.buf = self.buf[4 : 4 + size], self.buf[4 + size :]
                    return frame
            try:
                chunk = self.sock.recv(1 << 16)
            except ConnectionResetError:
                return None
            if not chunk:
                return None
            self.buf += chunk


@dataclass
class FuzzResult:
    frames: int = 0
    by_api: Counter[str] = field(default_factory=Counter)
    closed: int = 0
    answered: int = 0
    waits_dropped: int = 0  # Fetch/JoinGroup that may legitimately wait longer than the per-frame timeout
    hangs: int = 0
    hang_frames: list[str] = field(default_factory=list)  # "api vN: hex" of the first few, to reproduce
    garbage_accepted: list[str] = field(default_factory=list)
    garbage_refused: Counter[str] = field(default_factory=Counter)
    acked: dict[int, tuple[bytes, bytes]] = field(default_factory=dict)  # offset in fuzz-acked -> (key, value)
    health_failures: int = 0
    rss_kb: list[tuple[int, int]] = field(default_factory=list)  # (frames, VmRSS kB)

    def summary(self) -> dict[str, object]:
        return {
            "frames": self.frames, "by_api": dict(self.by_api), "closed_by_broker": self.closed,
            "answered": self.answered, "long_waits_dropped": self.waits_dropped, "hangs": self.hangs,
            "hang_frames": self.hang_frames,
            "garbage_refused": dict(self.garbage_refused), "garbage_accepted": self.garbage_accepted,
            "acked_records": len(self.acked), "health_failures": self.health_failures, "rss_kb": self.rss_kb,
        }


def rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def healthy(host: str, port: int) -> bool:
    """A fresh connection gets ApiVersions and Metadata answered within 10 s: the event loop is not wedged."""
    try:
        c = Conn(host, port, 10)
        try:
            c.sock.sendall(request_frame(18, 0, 1, b""))
            a = c.read_frame()
            c.sock.sendall(request_frame(3, 1, 2, struct.pack(">i", 0)))
            m = c.read_frame()
            return a is not None and m is not None
        finally:
            c.close()
    except OSError:
        return False


def run(host: str, port: int, frames: int, seed: int, broker_pid: int | None = None,
        frame_timeout: float = 10.0, progress: bool = False, apis: dict[int, tuple[str, range]] | None = None,
        null_rate: float = 0.0, mutate_rate: float = 0.8) -> FuzzResult:
    """``apis`` defaults to the eight of issue 10 (APIS); OTHER_APIS with a null_rate sweeps the rest."""
    apis = apis or APIS
    rng = random.Random(seed)
    gen = Generator(rng, null_rate)
    res = FuzzResult()
    conn: Conn | None = None
    corr = 0
    keys = list(apis)
    started = time.monotonic()
    for i in range(frames):
        if broker_pid is not None and i % max(frames // 20, 1) == 0:
            res.rss_kb.append((i, rss_kb(broker_pid)))
        if i % 1000 == 999 and not healthy(host, port):
            res.health_failures += 1
        if conn is None:
            conn = Conn(host, port, frame_timeout)
        corr = (corr + 1) % SENTINEL_CORRELATION
        roll = rng.random()
        track: list[tuple[bytes, bytes]] | None = None
        garbage_kind = None
        lying_size = False
        if roll < 0.06:  # a well-formed produce whose acknowledged records are checked at the end
            api_key, version = 0, rng.choice(APIS[0][1])
            batch, records = gen.batch(codec=rng.choice([0, 0, 1, 2, 3, 4]))
            frame = request_frame(0, version, corr, produce_body(version, ACKED_TOPIC, batch))
            track = records
        elif roll < 0.14:  # CRC-valid garbage that must be refused
            api_key, version = 0, rng.choice(APIS[0][1])
            garbage_kind, batch = garbage_batch(rng, gen)
            frame = request_frame(0, version, corr, produce_body(version, GARBAGE_TOPIC, batch))
        else:
            api_key = rng.choice(keys)
            version = rng.choice(apis[api_key][1])
            gen.topics = VICTIM_TOPICS if api_key in DESTRUCTIVE else TOPICS
            body = gen.body(api_key, version)
            if rng.random() < mutate_rate:
                body = mutate(rng, body)
            if rng.random() < 0.03:
                version = rng.choice([-1, 99, version + 1])
            frame = request_frame(api_key, version, corr, body)
            if rng.random() < 0.02:  # a lying frame size: the broker closes, or waits for bytes that never come
                frame = struct.pack(">i", rng.choice([-1, 2**31 - 1, len(frame)])) + frame[4:]
                lying_size = True
        res.frames += 1
        res.by_api[{**APIS, **OTHER_APIS, **apis}[api_key][0]] += 1
        sentinel = request_frame(18, 0, SENTINEL_CORRELATION, b"")
        may_wait = api_key in (1, 11) or lying_size  # Fetch/JoinGroup may wait as long as the request asks
        conn.sock.settimeout(1.0 if may_wait else frame_timeout)
        try:
            conn.sock.sendall(frame + sentinel)
            answer = None
            while True:
                reply = conn.read_frame()
                if reply is None:
                    res.closed += 1
                    conn.close()
                    conn = None
                    break
                (rcorr,) = struct.unpack_from(">i", reply)
                if rcorr == SENTINEL_CORRELATION:
                    res.answered += 1
                    break
                if rcorr == corr:
                    answer = reply
        except TimeoutError:
            if may_wait:
                res.waits_dropped += 1
            else:
                res.hangs += 1
                if len(res.hang_frames) < 5:
                    res.hang_frames.append(f"{api_key} v{version}: {frame.hex()}")
            conn.close()
            conn = None
            continue
        except OSError:
            res.closed += 1
            if conn is not None:
                conn.close()
            conn = None
            continue
        if track is not None or garbage_kind is not None:
            code, base = _produce_outcome(answer, version)
            if track is not None and code == 0:
                for j, rec in enumerate(track):
                    res.acked[base + j] = rec
            if garbage_kind is not None:
                if code == 0:
                    res.garbage_accepted.append(garbage_kind)
                else:
                    res.garbage_refused[garbage_kind] += 1
        if progress and i % 5000 == 4999:
            print(f"fuzz: {i + 1} frames, {time.monotonic() - started:.0f} s, closed {res.closed}, hangs {res.hangs}",
                  file=sys.stderr)
    if conn is not None:
        conn.close()
    if broker_pid is not None:
        res.rss_kb.append((frames, rss_kb(broker_pid)))
    return res


def _produce_outcome(answer: bytes | None, version: int) -> tuple[int, int]:
    """(error code, base offset) of the one partition of a fuzzer Produce; (-1, -1) if none came back."""
    if answer is None:
        return -1, -1
    cls = load_response_schema(0, version)
    pos = 4 + (1 if cls.__flexible__ else 0)
    value, _ = entity_reader(cls)(answer, pos)
    p = value.responses[0].partition_responses[0]
    return int(p.error_code), int(p.base_offset)


def verify_acked(bootstrap: str, acked: dict[int, tuple[bytes, bytes]], timeout: float = 60) -> list[str]:
    """Every acknowledged record of fuzz-acked read back byte for byte; the consumer also reads to the end of
    fuzz-garbage (nothing there stops it). Returns the problems found."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    problems: list[str] = []
    for topic, wanted in ((ACKED_TOPIC, acked), (GARBAGE_TOPIC, {})):
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "fuzz-verify", "enable.auto.commit": False,
                      "enable.partition.eof": True, "fetch.wait.max.ms": 100})
        try:
            _, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
            c.assign([TopicPartition(topic, 0, 0)])
            got: dict[int, tuple[bytes | None, bytes | None]] = {}
            deadline = time.monotonic() + timeout
            at_end = high == 0
            while not at_end and time.monotonic() < deadline:
                for m in c.consume(1000, 0.5):
                    if m.error():
                        if m.error().code() == KafkaError._PARTITION_EOF:
                            at_end = m.offset() >= high
                            continue
                        problems.append(f"{topic}: consumer error {m.error()}")
                        at_end = True
                        break
                    got[m.offset()] = (m.key(), m.value())
            if not at_end:
                problems.append(f"{topic}: consumer did not reach the end offset {high} in {timeout} s")
            for offset, (key, value) in wanted.items():
                if got.get(offset) != (key, value):
                    problems.append(f"{topic}: offset {offset} reads {got.get(offset)!r}, acked {(key, value)!r}")
                    if len(problems) > 20:
                        break
        finally:
            c.close()
    return problems


def prepare(bootstrap: str) -> None:
    """The topics the fuzzer writes to, created up front (fuzz-compact is compacted: keyless records refused)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    wanted = [NewTopic(ACKED_TOPIC, 1, 1), NewTopic(GARBAGE_TOPIC, 1, 1),
              NewTopic(COMPACT_TOPIC, 1, 1, config={"cleanup.policy": "compact"})]
    for fut in admin.create_topics(wanted).values():
        fut.result(30)


def broker_log_problems(text: str) -> list[str]:
    markers = ("Traceback", "Unexpected error", "exception was never retrieved", "Fatal Python error")
    return [line for line in text.splitlines() if any(m in line for m in markers)]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bootstrap", "-b", required=True)
    p.add_argument("--frames", "-n", type=int, default=100_000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--broker-pid", type=int)
    p.add_argument("--broker-log", help="the broker's log file, scanned for tracebacks afterwards")
    p.add_argument("--all-apis", action="store_true", help="every API kbus serves, not only issue 10's eight")
    p.add_argument("--null-rate", type=float, default=0.0, help="share of nullable fields sent as null")
    p.add_argument("--mutate-rate", type=float, default=0.8, help="share of generated frames mutated")
    args = p.parse_args(argv)
    host, port = args.bootstrap.rsplit(":", 1)
    prepare(args.bootstrap)
    started = time.monotonic()
    res = run(host, int(port), args.frames, args.seed, args.broker_pid, progress=True,
              apis={**APIS, **OTHER_APIS} if args.all_apis else APIS, null_rate=args.null_rate,
              mutate_rate=args.mutate_rate)
    out = res.summary()
    out["seconds"] = round(time.monotonic() - started, 1)
    out["healthy_at_end"] = healthy(host, int(port))
    out["acked_problems"] = verify_acked(args.bootstrap, res.acked)
    if args.broker_log and os.path.exists(args.broker_log):
        with open(args.broker_log, errors="replace") as f:
            out["broker_log_problems"] = broker_log_problems(f.read())[:50]
    print(json.dumps(out, indent=1))
    bad = (res.hangs or res.health_failures or res.garbage_accepted or out["acked_problems"]
           or not out["healthy_at_end"] or out.get("broker_log_problems"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
