"""Every core (issue 14, docs/cores.md): a broker-bound workload against kbus with `num.broker.processes` 1 or 2,
pinned with taskset to 1 core (CPU 1) or 2 cores (CPUs 0-1). One JSON line per run.

The workload is many small requests, the case where a broker's CPU is the limit: G generator processes x C
librdkafka producers (each its own connections to every broker), `linger.ms=0`, acks=all, 100 B records spread
round-robin over P partitions (RF 1, so spread over the processes by leader), each producer keeping W records
outstanding (closed loop: a record is sent when one is acknowledged), so requests carry one or a few records and
throughput is the broker's request rate. Measured over a common wall-clock window after a warm-up:
acknowledged records/s, broker CPU seconds (utime+stime of every broker process, /proc) per record and per
Produce request (kbus's /metrics), the generators' own CPU seconds, and the load average of the machine.

    bench/scenarios/cores.sh [ROUNDS]            # starts ZooKeeper, runs every configuration interleaved round by round
    .venv/bin/python bench/scenarios/cores.py run --zk HOST:PORT/chroot --processes 2 --cpus 0-1 --gen-cpus 0-1 ...
    .venv/bin/python bench/scenarios/cores.py load ...   # one generator process in Python (run by `run`); the same in C,
                                               # lighter on this 2-core machine: bench/scenarios/cores_load.c (--c-generator)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")
REPO = Path(__file__).resolve().parents[2]


def cpu_s(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICK


def sleep_until(t: float) -> None:
    while (left := t - time.time()) > 0:
        time.sleep(min(left, 0.5))


# ---- one generator process ---------------------------------------------------------------------------------------
def load(args: argparse.Namespace) -> None:
    from confluent_kafka import Producer

    payload = os.urandom(args.size)
    acked = [0] * args.clients
    errors = [0] * args.clients
    requests = [0] * args.clients  # Produce requests sent, from librdkafka's statistics (same count for any broker)
    stop = threading.Event()

    def client(i: int) -> None:
        def stats(blob: str) -> None:
            brokers = json.loads(blob).get("brokers", {}).values()
            requests[i] = sum(b.get("req", {}).get("Produce", 0) for b in brokers)

        p = Producer({"bootstrap.servers": args.bootstrap, "linger.ms": 0, "acks": "all", "log_level": 0,
                      "client.id": f"cores-{os.getpid()}-{i}", "message.timeout.ms": 60000,
                      "statistics.interval.ms": 1000, "stats_cb": stats})
        outstanding = 0
        n = i * 7 + args.seed

        def done(err: object, msg: object) -> None:
            nonlocal outstanding
            outstanding -= 1
            if err is None:
                acked[i] += 1
            else:
                errors[i] += 1

        while not stop.is_set():
            while outstanding < args.window:
                p.produce(args.topic, payload, partition=n % args.partitions, on_delivery=done)
                n += 1
                outstanding += 1
            p.poll(0.05)
        p.flush(30)

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(args.clients)]
    for t in threads:
        t.start()
    sleep_until(args.window_start)
    a0, q0, c0 = sum(acked), sum(requests), resource.getrusage(resource.RUSAGE_SELF)
    sleep_until(args.window_end)
    a1, q1, c1 = sum(acked), sum(requests), resource.getrusage(resource.RUSAGE_SELF)
    stop.set()
    for t in threads:
        t.join(40)
    print(json.dumps({"acked": a1 - a0, "errors": sum(errors), "produce_requests": q1 - q0,
                      "cpu_s": (c1.ru_utime + c1.ru_stime) - (c0.ru_utime + c0.ru_stime)}), flush=True)


# ---- one measured configuration ----------------------------------------------------------------------------------
def free_ports(n: int) -> int:
    """A base port with the n-1 ports above it free too."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        try:
            for k in range(1, 2 * n):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", base + k))
            return base
        except OSError:
            continue


def wait_port(port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(f"nothing listens on {port}")


def produce_requests(metrics_ports: list[int]) -> float:
    total = 0.0
    for port in metrics_ports:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
            for line in resp.read().decode().splitlines():
                if line.startswith('kbus_requests_total{api="Produce"}'):
                    total += float(line.split()[-1])
    return total


def broker_pids(top: int, processes: int) -> list[int]:
    """The broker processes: the process itself (1) or its children (the supervisor's N)."""
    if processes == 1:
        return [top]
    kids = Path(f"/proc/{top}/task/{top}/children").read_text().split()
    return [int(k) for k in kids]


def run(args: argparse.Namespace) -> dict[str, object]:
    from confluent_kafka.admin import AdminClient, NewTopic

    work = Path(tempfile.mkdtemp(prefix="cores.", dir=args.work))
    port = free_ports(args.processes * 2)
    mport = port + args.processes  # the metrics ports follow the listener ports
    config = work / "server.properties"
    props = {
        "broker.id": "1",
        "listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "log.dirs": str(work / "data"),
        "zookeeper.connect": f"{args.zk}/cores-{work.name.split('.')[-1]}",
        "num.broker.processes": str(args.processes),
        "metrics.port": str(mport),
        "offsets.topic.replication.factor": "1",
        "group.initial.rebalance.delay.ms": "0",
        "log.segment.bytes": "1073741824",
    }
    config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    env = {**os.environ, "KBUS_LOG_LEVEL": "WARNING"}
    if args.kafka_libs:  # Apache Kafka as the peer: same keys, one JVM using every core it is given
        assert args.processes == 1, "Kafka is one process"
        cmd = ["java", "-Xmx1G", "-Xms1G", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
               "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent", "-XX:MaxInlineLevel=15",
               "-Djava.awt.headless=true", f"-Dlog4j.configuration=file:{args.kafka_libs}/../config/log4j.properties",
               f"-Dkafka.logs.dir={work}/kafka-logs", "-cp", f"{args.kafka_libs}/*", "kafka.Kafka", str(config)]
        props.pop("num.broker.processes")
        props.pop("metrics.port")
        config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    else:
        cmd = [sys.executable, "-m", "kbus.server", str(config)]
    with open(work / "server.log", "wb") as out:
        broker = subprocess.Popen(["taskset", "-c", args.cpus, *cmd], stdout=out, stderr=subprocess.STDOUT, env=env,
                                  cwd=REPO)
    gens: list[subprocess.Popen[str]] = []
    try:
        for i in range(args.processes):
            wait_port(port + i, 300)
        bootstrap = f"127.0.0.1:{port}"
        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
        deadline = time.monotonic() + 60
        while len(admin.list_topics(timeout=10).brokers) < args.processes:
            if time.monotonic() > deadline:
                raise TimeoutError("not every broker process registered")
            time.sleep(0.2)
        topic = f"cores-{os.getpid()}-{int(time.time())}"
        admin.create_topics([NewTopic(topic, args.partitions, 1)])[topic].result(60)
        deadline = time.monotonic() + 60
        while True:
            md = admin.list_topics(topic=topic, timeout=10).topics.get(topic)
            if md is not None and md.error is None and len(md.partitions) == args.partitions and all(
                p.leader >= 0 for p in md.partitions.values()
            ):
                break
            if time.monotonic() > deadline:
                raise TimeoutError("topic has no leaders")
            time.sleep(0.2)
        leaders = sorted({p.leader for p in md.partitions.values()})
        pids = broker_pids(broker.pid, args.processes)
        t0 = time.time() + 3  # generators start up inside this margin
        window_start, window_end = t0 + args.warmup, t0 + args.warmup + args.seconds
        for g in range(args.generators):
            if args.c_generator:
                gen_cmd = [args.c_generator, bootstrap, topic, str(args.partitions), str(args.clients),
                           str(args.window), str(args.size), str(g), str(window_start), str(window_end)]
            else:
                gen_cmd = [sys.executable, __file__, "load", "-b", bootstrap, "--topic", topic,
                           "--partitions", str(args.partitions), "--clients", str(args.clients),
                           "--window", str(args.window), "--size", str(args.size), "--seed", str(g),
                           "--window-start", str(window_start), "--window-end", str(window_end)]
            gens.append(subprocess.Popen(["taskset", "-c", args.gen_cpus, *gen_cmd], stdout=subprocess.PIPE,
                                         text=True, cwd=REPO))
        sleep_until(window_start)
        cpu0 = sum(cpu_s(p) for p in pids)
        mports = [] if args.kafka_libs else [mport + i for i in range(args.processes)]
        req0 = produce_requests(mports)
        sleep_until(window_end)
        cpu1 = sum(cpu_s(p) for p in pids)
        req1 = produce_requests(mports)
        load1 = os.getloadavg()[0]
        results = []
        for gen in gens:
            out, _ = gen.communicate(timeout=120)
            results.append(json.loads(out.strip().splitlines()[-1]))
        acked = sum(r["acked"] for r in results)
        broker_cpu = cpu1 - cpu0
        requests = req1 - req0 if mports else float("nan")  # Kafka: no /metrics here (its JMX is not read)
        return {
            "system": "kafka" if args.kafka_libs else "kbus",
            "label": ("kafka-" if args.kafka_libs else "") + f"{args.processes}proc-cpus{args.cpus}",
            "processes": args.processes, "broker_cpus": args.cpus, "generator_cpus": args.gen_cpus,
            "generator": "c" if args.c_generator else "python",
            "generators": args.generators, "clients": args.generators * args.clients, "window": args.window,
            "partitions": args.partitions, "size": args.size, "seconds": args.seconds, "leaders": leaders,
            "msgs_per_s": round(acked / args.seconds),
            # Produce requests the clients sent (librdkafka statistics, sampled each second), any broker
            "client_msgs_per_request": round(acked / max(1, sum(r["produce_requests"] for r in results)), 2),
            "produce_requests_per_s": round(requests / args.seconds) if mports else None,
            "msgs_per_request": round(acked / max(1.0, requests), 2) if mports else None,
            "broker_cpu_s": round(broker_cpu, 2),
            "broker_cores_busy": round(broker_cpu / args.seconds, 2),
            "broker_cpu_us_per_msg": round(broker_cpu / max(1, acked) * 1e6, 1),
            "broker_cpu_us_per_request": round(broker_cpu / max(1.0, requests) * 1e6, 1) if mports else None,
            "generator_cpu_s": round(sum(r["cpu_s"] for r in results), 2),
            "errors": sum(r["errors"] for r in results),
            "loadavg_1m": round(load1, 2),
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
    finally:
        for gen in gens:
            if gen.poll() is None:
                gen.kill()
                gen.wait()
        broker.terminate()
        try:
            broker.wait(60)
        except subprocess.TimeoutExpired:
            broker.kill()
            broker.wait()
        subprocess.run(["rm", "-rf", str(work)], check=False)


# ---- the table in bench/notes/RESULTS.md -------------------------------------------------------------------------------
def report(files: list[str]) -> None:
    import statistics

    rows: dict[str, list[dict[str, float]]] = {}
    for name in files:
        for line in Path(name).read_text().splitlines():
            if line.strip():
                r = json.loads(line)
                r["generator_cores_busy"] = round(r["generator_cpu_s"] / r["seconds"], 2)
                rows.setdefault(r["label"], []).append(r)
    cols = ["msgs_per_s", "broker_cores_busy", "broker_cpu_us_per_msg", "client_msgs_per_request",
            "generator_cores_busy", "loadavg_1m"]
    print("| broker | processes | broker CPUs | generator CPUs | runs | " + " | ".join(cols) + " (medians) |")
    print("|---" * (len(cols) + 5) + "|")
    base = None

    def order(kv: tuple[str, list[dict[str, float]]]) -> tuple[object, ...]:
        r = kv[1][0]
        return (r.get("system", "kbus") != "kbus", len(str(r["broker_cpus"])), r["processes"])

    for label, rs in sorted(rows.items(), key=order):
        med = {c: statistics.median(float(r[c]) for r in rs if r.get(c) is not None)
               if any(r.get(c) is not None for r in rs) else float("nan") for c in cols}
        base = base or med["msgs_per_s"]
        r0 = rs[0]
        cells = [f"{med['msgs_per_s']:.0f} ({med['msgs_per_s'] / base:.2f}x)"] + [f"{med[c]:g}" for c in cols[1:]]
        print(f"| {r0.get('system', 'kbus')} | {r0['processes']} | {r0['broker_cpus']} | {r0['generator_cpus']} | "
              f"{len(rs)} | " + " | ".join(cells) + " |")
        print(f"<!-- {label}: msgs/s per run {[r['msgs_per_s'] for r in rs]}, load {[r['loadavg_1m'] for r in rs]} -->")


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="mode", required=True)
    lp = sub.add_parser("load")
    lp.add_argument("-b", "--bootstrap", required=True)
    lp.add_argument("--topic", required=True)
    lp.add_argument("--partitions", type=int, required=True)
    lp.add_argument("--clients", type=int, required=True)
    lp.add_argument("--window", type=int, required=True)
    lp.add_argument("--size", type=int, default=100)
    lp.add_argument("--seed", type=int, default=0)
    lp.add_argument("--window-start", type=float, required=True)
    lp.add_argument("--window-end", type=float, required=True)
    rp = sub.add_parser("run")
    rp.add_argument("--zk", required=True, help="ZooKeeper connect string (a chroot per run is fine)")
    rp.add_argument("--processes", type=int, default=1, help="num.broker.processes")
    rp.add_argument("--cpus", default="1", help="taskset CPU list of the broker processes")
    rp.add_argument("--gen-cpus", default="0-1", help="taskset CPU list of the generators")
    rp.add_argument("--generators", type=int, default=2, help="generator processes")
    rp.add_argument("--clients", type=int, default=16, help="producers per generator process")
    rp.add_argument("--window", type=int, default=4, help="records outstanding per producer")
    rp.add_argument("--partitions", type=int, default=64)
    rp.add_argument("--size", type=int, default=100)
    rp.add_argument("--warmup", type=float, default=5.0)
    rp.add_argument("--seconds", type=float, default=20.0)
    rp.add_argument("--work", default=str(REPO / ".cache" / "bench"))
    rp.add_argument("--out", default=None)
    rp.add_argument("--c-generator", default=None,
                    help="bench/scenarios/cores_load.c built (bench/scenarios/cores.sh does): the generator in C instead of Python")
    rp.add_argument("--kafka-libs", default=None, help="run Apache Kafka (jars from scripts/kafka-jars.sh) instead")
    rep = sub.add_parser("report")
    rep.add_argument("files", nargs="+")
    args = ap.parse_args()
    if args.mode == "report":
        report(args.files)
        return
    if args.mode == "load":
        load(args)
        return
    Path(args.work).mkdir(parents=True, exist_ok=True)
    result = run(args)
    line = json.dumps(result)
    print(line, flush=True)
    if args.out:
        with open(args.out, "a") as f:
            f.write(line + "\n")


if __name__ == "__main__":
    main()
