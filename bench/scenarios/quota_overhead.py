"""What client quotas cost the broker: CPU per produced message with no quota anywhere, with quotas configured
for other clients only (every request now looks its sensor up and records into it), and with a quota on this very
client that is never reached (recorded and measured against its bound every request). One standalone kbus broker
(started here, its metadata in a JSON file), the three cases interleaved round by round in the same process;
quotas are set and removed with AlterClientQuotas between phases.

The broker's utime+stime over a phase, divided by the messages acknowledged in it, is its CPU per message; the
producer (librdkafka, in this process) is told to make small requests (batch.num.messages) so the per-request
work a quota adds is not hidden behind big batches.

    .venv/bin/python bench/scenarios/quota_overhead.py [--rounds 5] [--messages 40000] [--batch 50] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kbus.admin.quotas import alter_client_quotas
from kbus.admin.wire import WireAdmin
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))  # bench/lib: benchlib
from benchlib import cpu_seconds as broker_cpu, free_port  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def produce(bootstrap: str, topic: str, client_id: str, n: int, batch: int) -> int:
    acked = [0]

    def delivered(err: object, _msg: object) -> None:
        if err is None:
            acked[0] += 1

    p = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "linger.ms": 1, "acks": 1,
                  "batch.num.messages": batch, "log_level": 0})  # fmt: skip
    value = b"x" * 100
    for _ in range(n):
        while True:
            try:
                p.produce(topic, value, on_delivery=delivered)
                break
            except BufferError:
                p.poll(0.005)
        p.poll(0)
    p.flush(60)
    return acked[0]


def set_quotas(admin: WireAdmin, phase: str) -> None:
    """none: no quota anywhere; others: 20 clients and the default user have quotas, not this client;
    own: this client has a producer_byte_rate it never reaches (and the others stay)."""
    others = [((("client-id", f"other-{i}"),), "producer_byte_rate") for i in range(20)]
    others.append(((("user", None),), "consumer_byte_rate"))
    own = ((("client-id", "bench"),), "producer_byte_rate")
    for entity, key in others:
        alter_client_quotas(admin, entity, [(key, None if phase == "none" else 1_000_000.0)])
    alter_client_quotas(admin, own[0], [(own[1], 1e12 if phase == "own" else None)])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--messages", type=int, default=40000)
    ap.add_argument("--batch", type=int, default=50)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    port = free_port()
    work = Path(tempfile.mkdtemp(prefix="quota-bench-"))
    log = open(work / "server.log", "wb")  # noqa: SIM115 - open for the broker's lifetime
    proc = subprocess.Popen(
        [sys.executable, "-m", "kbus.server", str(REPO / "config/server.properties"),
         "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}", "--override", f"log.dirs={work / 'data'}",
         "--override", "zookeeper.connect="],
        stdout=log, stderr=subprocess.STDOUT, cwd=REPO,
    )  # fmt: skip
    bootstrap = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("quota-bench", 1, 1)])["quota-bench"].result(30)
        wire = WireAdmin(bootstrap)
        produce(bootstrap, "quota-bench", "bench", 5000, args.batch)  # warm up
        results: dict[str, list[float]] = {"none": [], "others": [], "own": []}
        for r in range(args.rounds):
            for phase in results:
                set_quotas(wire, phase)
                time.sleep(0.2)
                cpu0 = broker_cpu(proc.pid)
                acked = produce(bootstrap, "quota-bench", "bench", args.messages, args.batch)
                us = (broker_cpu(proc.pid) - cpu0) / acked * 1e6
                results[phase].append(us)
                print(f"round {r + 1} {phase:6s}: {us:.2f} us broker CPU per message", file=sys.stderr)
        med = {k: statistics.median(v) for k, v in results.items()}
        summary = {
            "messages": args.messages, "batch": args.batch, "rounds": args.rounds,
            "us_per_msg": {k: round(v, 3) for k, v in med.items()},
            "ratio_others_vs_none": round(med["others"] / med["none"], 3),
            "ratio_own_vs_none": round(med["own"] / med["none"], 3),
            "runs": results,
        }  # fmt: skip
        print(json.dumps(summary))
        if args.out:
            with open(args.out, "a") as f:
                f.write(json.dumps(summary) + "\n")
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()


if __name__ == "__main__":
    main()
