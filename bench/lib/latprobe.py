"""Latency probe for a kbus broker process (a measuring tool for bench/, not part of the broker).

    python bench/lib/latprobe.py server.properties [--override k=v ...]

runs the broker exactly as `python -m kbus.server` does, plus, at no cost to the code under test:
- an event-loop lag probe: a 1 ms timer whose lateness is the longest the loop could not run a ready callback
  (a handler running long, a GC pause, the GIL held by a worker thread, or the OS not scheduling the process);
- the duration of every garbage collection (gc.callbacks);
- a trace of the replication path (leader append, follower fetch offsets, high-watermark advances, follower
  appends, consumer reads) with CLOCK_MONOTONIC timestamps, which kbench's payload timestamps share.
At exit it writes $LATPROBE_DIR/probe-<pid>.json (default /tmp). bench/scenarios/latreport.py reads those files.
"""

from __future__ import annotations

import asyncio
import atexit
import gc
import json
import os
import resource
import sys
import time
from typing import Any

sys.path.insert(0, os.getcwd())  # the kbus of the checkout this runs from (the bench scripts cd into it)

from kbus.server.broker import Broker
from kbus.server.main import run
from kbus.server.partition import partition as partition_mod
from kbus.server.replication import replica_manager as rm_mod

ns = time.perf_counter_ns  # CLOCK_MONOTONIC on Linux: comparable across processes
EVENTS: list[tuple[Any, ...]] = []
LAGS: list[tuple[int, int, int, int]] = []  # see _lag_probe
GCS: list[tuple[int, int, int]] = []  # (t, generation, duration ns)
TICK_S = 0.001


def _gc_cb(phase: str, info: dict[str, int], _start: list[int] = [0]) -> None:  # noqa: B006
    if phase == "start":
        _start[0] = ns()
    else:
        now = ns()
        GCS.append((now, info["generation"], now - _start[0]))


async def _lag_probe() -> None:
    """Each tick: (time, lateness, CPU the loop's thread used meanwhile, CPU the process's other threads used):
    a late tick with the loop's thread busy is our code (or GC) running long; with other threads busy, the GIL
    held elsewhere; with neither, the process was not scheduled (the machine)."""
    while True:
        t0, c0, p0 = ns(), time.thread_time_ns(), time.process_time_ns()
        await asyncio.sleep(TICK_S)
        t1, c1, p1 = ns(), time.thread_time_ns(), time.process_time_ns()
        LAGS.append((t1, t1 - t0 - int(TICK_S * 1e9), c1 - c0, (p1 - p0) - (c1 - c0)))


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (value >> 1) ^ -(value & 1), pos
        shift += 7


def _first_send_ns(records: Any) -> int:
    """kbench's latency payload starts with (seq, send time ns) as >qq: the send time of the batch's first
    record (uncompressed v2 batch: 61-byte header, then length, attributes, timestamp/offset deltas, key)."""
    try:
        buf = bytes(records[:200])
        if buf[16] != 2 or int.from_bytes(buf[21:23], "big") & 0x07:
            return -1
        pos = 61
        _, pos = _varint(buf, pos)  # record length
        pos += 1  # attributes
        _, pos = _varint(buf, pos)  # timestamp delta
        _, pos = _varint(buf, pos)  # offset delta
        klen, pos = _varint(buf, pos)
        pos += max(klen, 0)
        vlen, pos = _varint(buf, pos)
        return int.from_bytes(buf[pos + 8:pos + 16], "big") if vlen >= 16 else -1
    except IndexError:
        return -1


def _patch() -> None:
    P = partition_mod.Partition
    orig_append = P.append_as_leader

    def append_as_leader(self: Any, records: Any, *, from_coordinator: bool = False) -> Any:
        t = ns()  # before: a sole replica's high watermark moves inside the append
        r = orig_append(self, records, from_coordinator=from_coordinator)
        sent = _first_send_ns(records) if self.topic.endswith("-lat") else -1
        EVENTS.append((t, "append", self.topic, self.index, r.first_offset, r.last_offset, sent))
        return r

    P.append_as_leader = append_as_leader  # type: ignore[method-assign]
    orig_fappend = P.append_as_follower

    def append_as_follower(self: Any, records: Any, hw: int) -> Any:
        r = orig_fappend(self, records, hw)
        if records:
            EVENTS.append((ns(), "f_append", self.topic, self.index, self.log.log_end_offset, hw))
        return r

    P.append_as_follower = append_as_follower  # type: ignore[method-assign]
    orig_hw = P.maybe_advance_high_watermark

    def maybe_advance_high_watermark(self: Any) -> bool:
        moved: bool = orig_hw(self)
        if moved:
            EVENTS.append((ns(), "hw", self.topic, self.index, self.high_watermark))
        return moved

    P.maybe_advance_high_watermark = maybe_advance_high_watermark  # type: ignore[method-assign]
    R = rm_mod.ReplicaManager
    orig_read = R.read

    def read(self: Any, part: Any, fetch_offset: int, max_bytes: int, **kw: Any) -> Any:
        r = orig_read(self, part, fetch_offset, max_bytes, **kw)
        EVENTS.append((ns(), "read", part.topic, part.index, kw.get("replica_id", -1), fetch_offset, r.records.size))
        return r

    R.read = read  # type: ignore[method-assign]
    from kbus.protocol.client import KafkaConnection

    orig_request = KafkaConnection.request

    async def request(self: Any, body: Any, response_type: type, timeout: float = 30.0) -> Any:
        EVENTS.append((ns(), "c_send", type(body).__name__))
        resp = await orig_request(self, body, response_type, timeout)
        EVENTS.append((ns(), "c_recv", type(body).__name__))
        return resp

    KafkaConnection.request = request  # type: ignore[method-assign]
    orig_wake = getattr(P, "wake_followers", None)  # not in kbus before the wake-up split (kbus-base)

    def wake_followers(self: Any) -> None:
        if self._parked_log_end:
            EVENTS.append((ns(), "wake_f", self.topic, self.index, len(self._parked_log_end)))
        orig_wake(self)

    if orig_wake is not None:
        P.wake_followers = wake_followers  # type: ignore[method-assign]
    import types

    from kbus.server.apis import fetch as fetch_mod
    from kbus.server.network.processor import KafkaProtocol

    orig_wait_for = asyncio.wait_for

    async def wait_for(fut: Any, timeout: Any) -> Any:
        try:
            return await orig_wait_for(fut, timeout)
        finally:
            EVENTS.append((ns(), "resume"))

    fetch_asyncio = types.ModuleType("asyncio_probe")
    fetch_asyncio.__dict__.update(asyncio.__dict__)
    fetch_asyncio.wait_for = wait_for  # type: ignore[attr-defined]
    fetch_mod.asyncio = fetch_asyncio  # type: ignore[attr-defined]
    orig_rx = KafkaProtocol.data_received

    def data_received(self: Any, data: bytes) -> None:
        EVENTS.append((ns(), "rx", len(data)))
        orig_rx(self, data)

    KafkaProtocol.data_received = data_received  # type: ignore[method-assign]
    orig_updated = KafkaProtocol.buffer_updated  # what the transport calls (a BufferedProtocol)

    def buffer_updated(self: Any, nbytes: int) -> None:
        EVENTS.append((ns(), "rx", nbytes))
        orig_updated(self, nbytes)

    KafkaProtocol.buffer_updated = buffer_updated  # type: ignore[method-assign]
    orig_start = Broker.start

    async def start(self: Any) -> None:
        await orig_start(self)
        self._latprobe = asyncio.get_running_loop().create_task(_lag_probe())

    Broker.start = start  # type: ignore[method-assign]


def _dump() -> None:
    path = os.path.join(os.environ.get("LATPROBE_DIR", "/tmp"), f"probe-{os.getpid()}.json")
    with open(path, "w") as f:
        ru = resource.getrusage(resource.RUSAGE_SELF)
        json.dump({"pid": os.getpid(), "argv": sys.argv, "events": EVENTS, "lags": LAGS, "gcs": GCS,
                   "cpu_s": ru.ru_utime + ru.ru_stime, "nvcsw": ru.ru_nvcsw, "nivcsw": ru.ru_nivcsw}, f)


def main() -> int:
    args = sys.argv[1:]
    config = args[0] if args and not args[0].startswith("--") else None
    overrides = [args[i + 1] for i, a in enumerate(args) if a == "--override"]
    _patch()
    gc.callbacks.append(_gc_cb)
    atexit.register(_dump)
    return run(config, overrides)


if __name__ == "__main__":
    sys.exit(main())
