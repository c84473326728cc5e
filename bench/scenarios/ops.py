"""Operational timings, Apache Kafka and kbus interleaved round by round on one Debian ZooKeeper (chroots /kafka
and /kbus), the same config/server.properties, the same disk:

  startup   a broker with a 1,000-partition topic is stopped (SIGTERM) and started again: seconds from exec
            until metadata shows a leader for every partition and a produce to the last one is acknowledged.
  recovery  >= 1 GB of log (1 KB messages, acks=1), then kill -9 and a restart: seconds from exec until the
            topic is served again (leader known, the log end offset answered, a produce acknowledged).
  shutdown  a broker holding a topic of --shutdown-partitions partitions (10,000), one message produced to each
            (every log has data to flush and a producer snapshot to write): seconds from SIGTERM to the exit.
  failover  3 brokers, a RF=3 topic (min.insync.replicas=2), a producer sending every 5 ms with acks=all;
            the leader is killed (-9 or SIGTERM): seconds from the signal to the first acknowledgement of a
            message sent after it. The killed broker is started again before the next round.

Run by bench/scenarios/ops.sh (which fetches Kafka's jars and exports KAFKA_LIBS); one JSON line per measurement in --out.
System kbus-base: the kbus of the checkout in $KBUS_BASE (before/after in the same run).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))  # bench/lib: benchlib
from benchlib import free_port, results_file  # noqa: E402

PY = sys.executable
STARTED: list[Broker] = []  # stopped (kill -9) on the way out, whatever happened


def wait_port(port: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


@dataclass
class Broker:
    system: str  # kafka | kbus
    broker_id: int
    port: int
    log_dir: Path
    zk: str
    overrides: list[str] = field(default_factory=list)
    proc: subprocess.Popen[bytes] | None = None

    def command(self) -> list[str]:
        over = [f"listeners=PLAINTEXT://127.0.0.1:{self.port}", f"log.dirs={self.log_dir}",
                f"zookeeper.connect={self.zk}", f"broker.id={self.broker_id}", *self.overrides]
        args = [x for kv in over for x in ("--override", kv)]
        if self.system == "kafka":
            libs = os.environ["KAFKA_LIBS"]
            return ["java", *shlex.split(os.environ.get("KAFKA_HEAP_OPTS", "-Xmx1G -Xms1G")),
                    *shlex.split(os.environ.get("KAFKA_JVM_OPTS", "")),
                    f"-Dlog4j.configuration=file:{libs}/../config/log4j.properties",
                    "-cp", f"{libs}/*", "kafka.Kafka", "config/server.properties", *args]
        if self.system == "kbus-base":
            base = Path(os.environ["KBUS_BASE"])
            return [str(base / ".venv/bin/python"), "-m", "kbus.server", str(base / "config/server.properties"),
                    *args]
        return [PY, "-m", "kbus.server", "config/server.properties", *args]

    def start(self) -> float:
        log = open(self.log_dir.parent / f"{self.log_dir.name}.out", "ab")
        t0 = time.monotonic()
        cwd = os.environ["KBUS_BASE"] if self.system == "kbus-base" else None
        self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT, cwd=cwd)
        STARTED.append(self)
        return t0

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 120) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"


def wait_served(bootstrap: str, topic: str, partitions: int, timeout: float = 600) -> None:
    """Every partition has a leader and a produce to the last partition is acknowledged."""
    deadline = time.monotonic() + timeout
    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.connection.setup.timeout.ms": 1000,
                         "reconnect.backoff.ms": 20, "reconnect.backoff.max.ms": 100})
    while time.monotonic() < deadline:
        try:
            md = admin.list_topics(topic, timeout=2).topics.get(topic)
        except Exception:  # the broker is still starting
            md = None
        if md and not md.error and len(md.partitions) == partitions and all(
                p.leader >= 0 for p in md.partitions.values()):
            break
        time.sleep(0.02)
    else:
        raise RuntimeError(f"{topic} not served after {timeout} s")
    acked: list[bool] = []
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                  "message.timeout.ms": int(max(1000, (deadline - time.monotonic()) * 1000))})
    p.produce(topic, b"probe", partition=partitions - 1, on_delivery=lambda err, m: acked.append(err is None))
    p.flush(timeout)
    if acked != [True]:
        raise RuntimeError(f"probe produce to {topic} failed")


def create(bootstrap: str, topic: str, partitions: int, rf: int, config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, rf, config=config or {})],
                        operation_timeout=120)[topic].result(180)


def leader_of(bootstrap: str, topic: str, rf: int, timeout: float = 120) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        md = admin.list_topics(topic, timeout=5).topics.get(topic)
        if md and not md.error and md.partitions and md.partitions[0].leader >= 0 and \
                len(md.partitions[0].isrs) == rf:
            return int(md.partitions[0].leader)
        time.sleep(0.1)
    raise RuntimeError(f"{topic}: no leader with {rf} in-sync replicas")


def wait_unregistered(b: Broker, timeout: float = 120) -> None:
    from kazoo.client import KazooClient

    hosts, _, chroot = b.zk.partition("/")
    zk = KazooClient(hosts=hosts)
    zk.start(timeout=30)
    try:
        deadline = time.monotonic() + timeout
        while zk.exists(f"/{chroot}/brokers/ids/{b.broker_id}") and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        zk.stop()
        zk.close()


def log_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def emit(args: argparse.Namespace, row: dict[str, object]) -> None:
    row = {"tool": "bench-ops", "time": time.strftime("%Y-%m-%dT%H:%M:%S"), **row}
    line = json.dumps(row)
    print(line, flush=True)
    with open(args.out, "a") as f:
        f.write(line + "\n")


def startup(args: argparse.Namespace, work: Path, zk: str) -> None:
    brokers = {s: Broker(s, 0, free_port(), work / f"startup-{s}", f"{zk}/startup-{s}") for s in args.systems}
    for b in brokers.values():
        b.start()
        wait_port(b.port)
        create(b.bootstrap, "p1000", 1000, 1)
        wait_served(b.bootstrap, "p1000", 1000)
        b.stop()
    for r in range(args.rounds):
        for s, b in brokers.items():
            t0 = b.start()
            wait_served(b.bootstrap, "p1000", 1000)
            emit(args, {"label": s, "test": "startup_1000_partitions", "round": r + 1,
                        "seconds": round(time.monotonic() - t0, 3)})
            b.stop()


def shutdown(args: argparse.Namespace, work: Path, zk: str) -> None:
    n = args.shutdown_partitions
    for r in range(args.rounds):
        for s in args.systems:
            b = Broker(s, 0, free_port(), work / f"shutdown-{s}-{r}", f"{zk}/shutdown-{s}-{r}")
            b.start()
            wait_port(b.port)
            create(b.bootstrap, "wide", n, 1)
            wait_served(b.bootstrap, "wide", n)
            p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 50, "acks": "1"})
            for i in range(n):
                p.produce("wide", b"x", partition=i)
                if i % 1000 == 0:
                    p.poll(0)
            if p.flush(600) != 0:
                raise RuntimeError(f"{s}: produce to {n} partitions not acknowledged")
            assert b.proc is not None
            proc = b.proc
            t0 = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            proc.wait(900)
            emit(args, {"label": s, "test": f"shutdown_{n}_partitions", "round": r + 1,
                        "seconds": round(time.monotonic() - t0, 3), "exit_code": proc.returncode})
            b.proc = None


def recovery(args: argparse.Namespace, work: Path, zk: str) -> None:
    brokers = {s: Broker(s, 0, free_port(), work / f"recovery-{s}", f"{zk}/recovery-{s}") for s in args.systems}
    n = args.recovery_mb * 1000  # 1 KB messages
    for b in brokers.values():
        b.start()
        wait_port(b.port)
        create(b.bootstrap, "big", 1, 1)
        subprocess.run([PY, "bench/lib/kbench.py", "produce", "-b", b.bootstrap, "--topic", "big", "-n", str(n),
                        "-s", "1000", "--acks", "1", "--quiet"], check=True, stdout=subprocess.DEVNULL)
        b.stop()
    for r in range(args.rounds):
        for s, b in brokers.items():
            b.start()
            wait_served(b.bootstrap, "big", 1)
            # a few more acknowledged writes, then the crash
            subprocess.run([PY, "bench/lib/kbench.py", "produce", "-b", b.bootstrap, "--topic", "big", "-n", "20000",
                            "-s", "1000", "--acks", "1", "--quiet"], check=True, stdout=subprocess.DEVNULL)
            b.stop(signal.SIGKILL)
            size = log_bytes(b.log_dir / "big-0")
            # Kafka refuses to start while its dead session's /brokers/ids/N is still in ZooKeeper (NodeExists):
            # restart both once it has expired, as an operator would
            wait_unregistered(b)
            t0 = b.start()
            wait_served(b.bootstrap, "big", 1)
            secs = time.monotonic() - t0
            c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "ops"})
            _, high = c.get_watermark_offsets(TopicPartition("big", 0), timeout=30)
            c.close()
            emit(args, {"label": s, "test": "recovery_after_kill9", "round": r + 1, "seconds": round(secs, 3),
                        "log_bytes": size, "log_end_offset": high})
            b.stop()


class Prober:
    """Sends a message every interval with acks=all; records (send time, ack time) of each acknowledged one."""

    def __init__(self, bootstrap: str, topic: str, interval: float = 0.005):
        self.p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                           "message.timeout.ms": 120000, "log_level": 2, "retry.backoff.ms": 20, "retry.backoff.max.ms": 100,
                           "topic.metadata.refresh.interval.ms": 1000, "reconnect.backoff.ms": 20,
                           "reconnect.backoff.max.ms": 200})
        self.topic, self.interval = topic, interval
        self.acks: list[tuple[float, float]] = []
        self.failed = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        while not self.stop.is_set():
            sent = time.monotonic()

            def done(err: object, _msg: object, sent: float = sent) -> None:
                if err is None:
                    self.acks.append((sent, time.monotonic()))
                else:
                    self.failed += 1
            self.p.produce(self.topic, b"x" * 100, on_delivery=done)
            self.p.poll(self.interval)
        self.p.flush(130)


def failover(args: argparse.Namespace, work: Path, zk: str) -> None:
    clusters: dict[str, list[Broker]] = {}
    for s in args.systems:
        clusters[s] = [Broker(s, i, free_port(), work / f"failover-{s}{i}", f"{zk}/failover-{s}",
                              ["offsets.topic.replication.factor=3", "default.replication.factor=3",
                               "min.insync.replicas=2"]) for i in (1, 2, 3)]
        for b in clusters[s]:
            b.start()
        for b in clusters[s]:
            wait_port(b.port)
    time.sleep(3)
    for r in range(args.rounds):
        for sig_name in ("SIGKILL", "SIGTERM"):
            for s, brokers in clusters.items():
                boot = ",".join(b.bootstrap for b in brokers)
                topic = f"failover-{r}-{sig_name.lower()}"
                create(boot, topic, 1, 3, {"min.insync.replicas": "2"})
                leader = leader_of(boot, topic, 3)
                victim = next(b for b in brokers if b.broker_id == leader)
                prober = Prober(boot, topic)
                prober.thread.start()
                time.sleep(2)
                t_kill = time.monotonic()
                victim.stop(getattr(signal, sig_name))
                t_dead = time.monotonic()
                deadline = t_kill + 90
                while time.monotonic() < deadline and not any(snt > t_kill for snt, _ in prober.acks):
                    time.sleep(0.01)
                after = [ack for snt, ack in prober.acks if snt > t_kill]
                prober.stop.set()
                prober.thread.join(150)
                emit(args, {"label": s, "test": f"leader_failover_{sig_name}", "round": r + 1,
                            "seconds": round(min(after) - t_kill, 3) if after else None,
                            "shutdown_seconds": round(t_dead - t_kill, 3), "failed_sends": prober.failed})
                victim.start()
                wait_port(victim.port)
                leader_of(boot, topic, 3, timeout=180)  # back in the ISR before the next round
    for brokers in clusters.values():
        for b in brokers:
            b.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tests", nargs="*", default=["startup", "recovery", "failover"])
    ap.add_argument("--zk", required=True, help="ZooKeeper host:port (chroots are added per system and test)")
    ap.add_argument("--work", required=True, help="scratch directory on the log disk")
    ap.add_argument("--systems", nargs="+", default=["kafka", "kbus"])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--recovery-mb", type=int, default=1100, help="MB of log before the kill -9")
    ap.add_argument("--shutdown-partitions", type=int, default=10_000)
    ap.add_argument("--out", default=results_file("ops.jsonl"))
    args = ap.parse_args()
    work = Path(args.work)
    runners = {"startup": startup, "recovery": recovery, "failover": failover, "shutdown": shutdown}
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        for t in args.tests:
            runners[t](args, work, args.zk)
    finally:
        for b in STARTED:
            b.stop(signal.SIGKILL)
    return 0


if __name__ == "__main__":
    sys.exit(main())
