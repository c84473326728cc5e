"""What transaction verification (KIP-890 part 1) costs: transactional produce msg/s with
transaction.partition.verification.enable on and off, on the same brokers in the same run (the key is dynamic,
so rounds alternate on / off / on / off ...).

usage: .venv/bin/python bench/scenarios/txn_verification.py [--brokers 1|3] [--rounds 3] [--txns 200] [--per-txn 30]
                                                  [--partitions 3] [--size 100] [--linger-ms 5] [--batch-size B]
                                                  [--out bench/results/2026-11-26-vm/txn-verification.jsonl]

Each round: one confluent-kafka transactional producer (acks=all, linger.ms) runs `--txns` transactions of
`--per-txn` records spread over `--partitions` partitions, committing each; the figure is records/s. With
verification on, the first write of each transaction on each partition waits for the coordinator's answer (local
call on the coordinator's own partitions, AddPartitionsToTxn v4 to it from the other brokers); so small
transactions show the cost, large ones hide it. Before each round a forged transactional batch checks that the
mode took effect on every broker. One JSON line per round.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.kbus_processes import BrokerProcess, Cluster, kbus, wait_for
from tests.txn_forgery import forge_produce, transactional_batch
from tests.zk_server import ZooKeeperServer, free_port
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))  # bench/lib: benchlib
from benchlib import results_file  # noqa: E402


def create(bs: str, partitions: int, rf: int) -> str:
    name = f"tvb-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(name, partitions, rf)])[name].result(60)
    return name


def set_mode(bootstrap: str, brokers: list[str], probe: str, partitions: int, on: bool) -> None:
    res = kbus("configs", "--bootstrap-server", bootstrap, "--alter", "--entity-type", "brokers",
               "--entity-default", "--add-config", f"transaction.partition.verification.enable={str(on).lower()}")
    assert res.returncode == 0, res.stderr
    want = "invalid_producer_id_mapping" if on else "none"

    def applied() -> bool:
        # every partition of the probe topic (one per broker) refuses / accepts a forged batch
        for part in range(partitions):
            for b in brokers:
                # a new producer id each time: one let through while off has an open transaction ever after
                pid = random.randrange(10**9, 2**62)
                error, _ = forge_produce(b, probe, part, transactional_batch(pid, 0), "bench-probe")
                if error in ("not_leader_or_follower", "unknown_topic_or_partition"):
                    continue
                if error != want:
                    return False
                break
        return True

    wait_for(applied, timeout=30, what=f"verification {'on' if on else 'off'}")


def requests_served(metrics_ports: list[int]) -> dict[str, float]:
    """kbus_requests_total per API, summed over the brokers (their /metrics)."""
    out: dict[str, float] = {}
    for port in metrics_ports:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
            for line in resp.read().decode().splitlines():
                m = re.match(r'kbus_(?:requests|transaction_verifications)_total\{(?:api|coordinator)="([A-Za-z]+)"\} '
                             r'([0-9.e+]+)', line)
                if m:
                    out[m.group(1)] = out.get(m.group(1), 0) + float(m.group(2))
    return out


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU the broker processes used so far (/proc/<pid>/stat): far less sensitive than msg/s to
    what else runs on the machine."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
    return total / ticks


def run(args: argparse.Namespace, bs: str, topic: str) -> float:
    txns, per_txn, partitions, size = args.txns, args.per_txn, args.partitions, args.size
    p = Producer({"bootstrap.servers": bs, "transactional.id": f"bench-{uuid.uuid4().hex[:8]}", "acks": "all",
                  "linger.ms": args.linger_ms, "batch.size": args.batch_size})
    p.init_transactions(60)
    payload = b"x" * size
    start = time.perf_counter()
    for _ in range(txns):
        p.begin_transaction()
        for i in range(per_txn):
            p.produce(topic, payload, partition=i % partitions)
        p.commit_transaction(60)
    rate = txns * per_txn / (time.perf_counter() - start)
    p.flush(10)
    return rate


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--brokers", type=int, choices=(1, 3), default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--txns", type=int, default=200)
    ap.add_argument("--per-txn", type=int, default=30)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--linger-ms", type=int, default=5)
    ap.add_argument("--batch-size", type=int, default=1_000_000)  # librdkafka's default
    ap.add_argument("--out", default=results_file("txn-verification.jsonl"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="txn-verification-", dir=".cache") as tmp:
        work = Path(tmp).resolve()
        zk: ZooKeeperServer | None = None
        cluster: Cluster | None = None
        single: BrokerProcess | None = None
        try:
            if args.brokers == 3:
                (work / "zk").mkdir()
                zk = ZooKeeperServer(work / "zk", free_port()).start()
                cluster = Cluster(work, zk.connect)
                metrics_ports = list(cluster.expose_metrics().values())
                cluster.start_all()
                brokers = [b.bootstrap for b in cluster.brokers.values()]
                pids = [b.proc.pid for b in cluster.brokers.values() if b.proc is not None]
            else:
                metrics_ports = [free_port()]
                single = BrokerProcess(work / "b0", {"metrics.port": str(metrics_ports[0])}).start()
                brokers = [single.bootstrap]
                pids = [single.proc.pid] if single.proc is not None else []
            bs = ",".join(brokers)
            rf = min(3, args.brokers)
            topic, probe = create(bs, args.partitions, rf), create(bs, args.brokers, rf)
            warm = Producer({"bootstrap.servers": bs, "transactional.id": "bench-probe"})
            warm.init_transactions(60)  # __transaction_state exists, the probe's id is known
            rates: dict[str, list[float]] = {"on": [], "off": []}
            cpus: dict[str, list[float]] = {"on": [], "off": []}
            for r in range(args.rounds):
                for mode in ("on", "off") if r % 2 == 0 else ("off", "on"):
                    set_mode(bs, brokers, probe, args.brokers, mode == "on")
                    before, cpu_before = requests_served(metrics_ports), cpu_seconds(pids)
                    rate = run(args, bs, topic)
                    after, cpu = requests_served(metrics_ports), cpu_seconds(pids) - cpu_before
                    served = {api: round(after.get(api, 0) - before.get(api, 0))
                              for api in ("Produce", "AddPartitionsToTxn", "local", "remote", "failed")}
                    rates[mode].append(rate)
                    cpus[mode].append(cpu * 1e6 / args.txns)
                    line = {"bench": "txn_verification", "brokers": args.brokers, "round": r, "verification": mode,
                            "txns": args.txns, "per_txn": args.per_txn, "partitions": args.partitions,
                            "size": args.size, "linger_ms": args.linger_ms, "batch_size": args.batch_size,
                            "msg_per_s": round(rate), "produce_requests": served["Produce"],
                            "add_partitions_requests": served["AddPartitionsToTxn"],
                            "verified_local": served["local"], "verified_remote": served["remote"],
                            "verification_failed": served["failed"],
                            "broker_cpu_us_per_txn": round(cpu * 1e6 / args.txns)}
                    print(json.dumps(line), flush=True)
                    with open(args.out, "a") as out:
                        out.write(json.dumps(line) + "\n")
            on, off = statistics.median(rates["on"]), statistics.median(rates["off"])
            paired = statistics.median(a / b for a, b in zip(rates["on"], rates["off"], strict=True))
            print(f"brokers={args.brokers} per_txn={args.per_txn}: median on {on:,.0f} msg/s, off {off:,.0f} msg/s, "
                  f"on/off = {on / off:.3f} (median of the rounds' own on/off: {paired:.3f})")
            cpu_on, cpu_off = statistics.median(cpus["on"]), statistics.median(cpus["off"])
            print(f"broker CPU per transaction: median on {cpu_on:,.0f} us, off {cpu_off:,.0f} us, "
                  f"on/off = {cpu_on / cpu_off:.3f}")
        finally:
            set_back = cluster is not None or single is not None
            if set_back:
                kbus("configs", "--bootstrap-server", ",".join(brokers), "--alter", "--entity-type", "brokers",
                     "--entity-default", "--delete-config", "transaction.partition.verification.enable")
            if cluster is not None:
                cluster.stop()
            if single is not None:
                single.stop()
            if zk is not None:
                zk.stop()


if __name__ == "__main__":
    main()
