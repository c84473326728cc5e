"""Kafka's own load generators (the Java client) against one broker: kafka-producer-perf-test
(org.apache.kafka.tools.ProducerPerformance) then kafka-consumer-perf-test (ConsumerPerformance) on the topic it
filled, with the broker's CPU seconds (utime+stime from /proc) around each. One JSON line per run.

    .venv/bin/python bench/scenarios/perftest.py -b 127.0.0.1:9092 --broker-pid PID --libs DIR [-n N -s SIZE -p P --acks A]

Run by bench/scenarios/perftest.sh, which starts the brokers; DIR is what scripts/kafka-jars.sh prints.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
import uuid

from confluent_kafka.admin import AdminClient, NewTopic
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))  # bench/lib: benchlib
from benchlib import cpu_seconds as broker_cpu  # noqa: E402


def broker_rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def tool(libs: str, main: str, args: list[str], timeout: float) -> str:
    log4j = os.path.join(libs, "..", "config", "tools-log4j.properties")
    cmd = ["java", "-Xmx512M", f"-Dlog4j.configuration=file:{log4j}", "-cp", f"{libs}/*", main, *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"{main} exited {done.returncode}: {done.stderr.strip()[-800:]}")
    return done.stdout


# "1000000 records sent, 245398.9 records/sec (23.40 MB/sec), 102.31 ms avg latency, 250.00 ms max latency,
#  91 ms 50th, 210 ms 95th, 240 ms 99th, 249 ms 99.9th."
PRODUCED = re.compile(
    r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, ([\d.]+) ms max "
    r"latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99.9th")


# --print-metrics: the producer's own count of Produce requests (the same for every broker, unlike /metrics)
# "producer-metrics:request-total:{client-id=perf-producer-client}      : 6772.000"
REQUESTS = re.compile(r"^producer-metrics:request-total:\{[^}]*\}\s*:\s*([\d.]+)", re.MULTILINE)


def produce(args: argparse.Namespace, topic: str) -> dict[str, float]:
    props = [f"bootstrap.servers={args.bootstrap}", f"acks={args.acks}", *args.producer_props]
    cpu0 = broker_cpu(args.broker_pid)
    out = tool(args.libs, "org.apache.kafka.tools.ProducerPerformance",
               ["--topic", topic, "--num-records", str(args.num_records), "--record-size", str(args.size),
                "--throughput", str(args.throughput), "--producer-props", *props, "--print-metrics"], args.timeout)
    cpu = broker_cpu(args.broker_pid) - cpu0
    m = PRODUCED.findall(out)
    if not m:
        raise RuntimeError(f"ProducerPerformance printed no summary: {out[-500:]}")
    sent, rps, mbps, avg, mx, p50, p95, p99, p999 = (float(x) for x in m[-1])
    result = {"records": sent, "msgs_per_s": rps, "mb_per_s": mbps * 1.048576, "avg_ms": avg, "max_ms": mx,
              "p50_ms": p50, "p95_ms": p95, "p99_ms": p99, "p999_ms": p999, "broker_cpu_s": round(cpu, 2),
              "broker_cpu_us_per_msg": round(cpu / sent * 1e6, 3)}
    requests = REQUESTS.search(out)
    if requests and float(requests.group(1)) > 0:  # all of the producer's requests; Produce is nearly all of them
        result["requests"] = float(requests.group(1))
        result["broker_cpu_us_per_request"] = round(cpu / result["requests"] * 1e6, 1)
    return result


def fetch_requests(args: argparse.Namespace) -> float | None:
    """kbus's count of Fetch requests served, from its /metrics endpoint (None without --metrics-port)."""
    if not args.metrics_port:
        return None
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{args.metrics_port}/metrics", timeout=10) as resp:
        for line in resp.read().decode().splitlines():
            if line.startswith('kbus_requests_total{api="Fetch"}'):
                return float(line.rsplit(" ", 1)[1])
    return 0.0


def consume(args: argparse.Namespace, topic: str) -> dict[str, float]:
    fetches0 = fetch_requests(args)
    cpu0 = broker_cpu(args.broker_pid)
    out = tool(args.libs, "org.apache.kafka.tools.ConsumerPerformance",
               ["--bootstrap-server", args.bootstrap, "--topic", topic, "--messages", str(args.num_records),
                "--group", f"perf-{uuid.uuid4().hex[:8]}", "--timeout", "60000"], args.timeout)
    cpu = broker_cpu(args.broker_pid) - cpu0
    # start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec,
    # rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec
    line = [ln for ln in out.splitlines() if ln.strip() and not ln.startswith("start.time")][-1]
    f = [x.strip() for x in line.split(",")]
    n = float(f[4])
    if n < args.num_records:
        raise RuntimeError(f"ConsumerPerformance read {n:.0f} of {args.num_records}")
    result = {"records": n, "msgs_per_s": float(f[5]), "mb_per_s": float(f[3]) * 1.048576,
              "rebalance_ms": float(f[6]), "fetch_ms": float(f[7]), "fetch_msgs_per_s": float(f[9]),
              "broker_cpu_s": round(cpu, 2), "broker_cpu_us_per_msg": round(cpu / n * 1e6, 3)}
    fetches1 = fetch_requests(args)
    if fetches0 is not None and fetches1 is not None and fetches1 > fetches0:
        # Fetch requests of every client in the window (the consumer's and nobody else's in these runs)
        result["fetch_requests"] = fetches1 - fetches0
        result["broker_cpu_us_per_fetch"] = round(cpu / (fetches1 - fetches0) * 1e6, 1)
    return result


def live(args: argparse.Namespace, topic: str) -> dict[str, float]:
    """A consumer reading while a producer writes at --live-rate msg/s: the broker's CPU per message over the
    whole window, where every fetch finds little new data (what fetch sessions are for)."""
    log4j = os.path.join(args.libs, "..", "config", "tools-log4j.properties")
    props = [f"bootstrap.servers={args.bootstrap}", f"acks={args.acks}", *args.producer_props]
    producer = subprocess.Popen(
        ["java", "-Xmx512M", f"-Dlog4j.configuration=file:{log4j}", "-cp", f"{args.libs}/*",
         "org.apache.kafka.tools.ProducerPerformance", "--topic", topic, "--num-records", str(args.num_records),
         "--record-size", str(args.size), "--throughput", str(args.live_rate), "--producer-props", *props],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        result = consume(args, topic)
    finally:
        out, err = producer.communicate(timeout=args.timeout)
    if producer.returncode != 0:
        raise RuntimeError(f"ProducerPerformance exited {producer.returncode}: {err[-500:]}")
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-b", "--bootstrap", required=True)
    ap.add_argument("--broker-pid", type=int, required=True)
    ap.add_argument("--libs", required=True, help="Kafka's jars (scripts/kafka-jars.sh prints the directory)")
    ap.add_argument("-n", "--num-records", type=int, default=1_000_000)
    ap.add_argument("-s", "--size", type=int, default=100)
    ap.add_argument("-p", "--partitions", type=int, default=1)
    ap.add_argument("--acks", default="all")
    ap.add_argument("--throughput", type=int, default=-1, help="producer records/s (-1: as fast as it can)")
    ap.add_argument("--producer-props", nargs="*", default=[], metavar="K=V")
    ap.add_argument("--live-rate", type=int, default=0,
                    help="consume while producing at this many msg/s (broker CPU covers both); 0: produce first")
    ap.add_argument("--metrics-port", type=int, default=0, help="kbus's metrics.port: also count Fetch requests")
    ap.add_argument("--label", default=None)
    ap.add_argument("--out", default=None)
    ap.add_argument("--timeout", type=float, default=300)
    args = ap.parse_args()
    topic = f"perf-{int(time.time())}-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    admin.create_topics([NewTopic(topic, args.partitions, 1)])[topic].result(30)
    result: dict[str, object] = {
        "tool": "kafka-perf-test", "label": args.label, "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "loadavg_start": os.getloadavg(), "ok": False,
        "config": {"num_messages": args.num_records, "size": args.size, "partitions": args.partitions,
                   "acks": args.acks, "throughput": args.throughput, "producer_props": args.producer_props,
                   "live_rate": args.live_rate}}
    try:
        if args.live_rate:
            result["consume"] = live(args, topic)
        else:
            result["produce"] = produce(args, topic)
            result["consume"] = consume(args, topic)
        result["broker_rss_mb"] = round(broker_rss_mb(args.broker_pid), 1)
        result["ok"] = True
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        result["error"] = str(e)
        print(f"perftest: {e}", file=sys.stderr)
    finally:
        admin.delete_topics([topic])
    line = json.dumps(result)
    print(line)
    if args.out:
        with open(args.out, "a") as f:
            f.write(line + "\n")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
