"""Benchmark (a verdict, not a rate): ONE streaming job writes --records records exactly once to kbus from --tasks
tasks on a Spark standalone cluster (a master and 2 one-core workers on 127.0.0.1 and 127.0.0.2, so speculative
copies can run), with spark.speculation=true, while

  1. micro-batch 0: one task stalls inside its open transaction, so Spark runs a speculative twin on the other
     worker (the twin's InitProducerId fences the stalled attempt);
  2. a later micro-batch, once some of its tasks have committed their markers and others are still writing: the
     worker on 127.0.0.2 is killed -9 (its JVM, executor and Python workers), then started again;
  3. a later micro-batch, in the same mid-batch state: the driver is killed -9 (spark-submit's whole process
     group), then the same job is submitted again and resumes from its checkpoint, replaying that batch.

Then a read_committed consumer reads the topic and checks every id 0..records-1 once (count, a bitmap of the ids,
each value against its key, the sum of the ids), and the driver's RSS (its whole process tree, sampled every 0.5 s)
is compared across the micro-batch sizes given (the whole scenario runs once per size).

    bench/run spark-eos-faults [--records 10000000] [--tasks 8] [--batch-records 625000 2500000] [--stall 600]

Prints a table and a verdict (exit 1 unless every condition held); raw figures to $RESULTS/spark_eos_faults.jsonl.
The job: bench/scenarios/spark_eos_faults_job.py. Notes: bench/notes/spark_write.md.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from spark_read import REPO, start_broker  # type: ignore[import-not-found]
from spark_write import create_topic, descendants  # type: ignore[import-not-found]

sys.path.insert(0, str(REPO))
from tests.e2e.spark.standalone import EventLog, StandaloneCluster

JOB = Path(__file__).resolve().parent / "spark_eos_faults_job.py"
KBUS = Path(sys.executable).parent / "kbus"
HOSTS = ("127.0.0.1", "127.0.0.2")  # two hosts to Spark: a speculative copy never runs on its original's host


@dataclass
class Run:
    records: int
    batch_records: int
    tasks: int
    seconds: float = 0.0
    worker_kill: dict = field(default_factory=dict)  # batch, markers of that batch committed at the kill
    driver_kill: dict = field(default_factory=dict)
    replayed: list = field(default_factory=list)  # the restarted driver's COMMIT of the replayed batch
    speculative: list = field(default_factory=list)  # (stage, partition, executor, end reason)
    lost_with_worker: list = field(default_factory=list)
    rss_mb: dict = field(default_factory=dict)  # driver run -> (peak JVM RSS, peak RSS of the process tree)
    read: dict = field(default_factory=dict)  # the read_committed check
    log_end_offsets: int = 0


def _rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _is_jvm(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"org.apache.spark.deploy.SparkSubmit" in f.read()
    except OSError:
        return False


class RssSampler(threading.Thread):
    """Peak RSS of the driver JVM and of the driver's whole process tree (the kbus spark-submit launcher, the JVM,
    the Python driver and the Python workers the JVM starts), sampled every 0.5 s."""

    def __init__(self, root: int) -> None:
        super().__init__(daemon=True)
        self.root, self.jvm_kb, self.total_kb = root, 0, 0
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(0.5):
            pids = descendants(self.root)
            sizes = {p: _rss_kb(p) for p in pids}
            self.total_kb = max(self.total_kb, sum(sizes.values()))
            self.jvm_kb = max([self.jvm_kb, *(kb for p, kb in sizes.items() if _is_jvm(p))])

    def stop(self) -> tuple[float, float]:
        self.stopped.set()
        self.join(5)
        return round(self.jvm_kb / 1024), round(self.total_kb / 1024)


class Markers:
    """The sink's per-task markers (kbus/spark/task_txn.py): group kbus-sink-<id>-<p> commits offset batch + 1 on
    partition 0 of the topic when task p of that micro-batch commits its transaction."""

    def __init__(self, bootstrap: str, topic: str, sink_id: str, tasks: int) -> None:
        self.tp = TopicPartition(topic, 0)
        self.consumers = [Consumer({"bootstrap.servers": bootstrap, "group.id": f"kbus-sink-{sink_id}-{p}",
                                    "enable.auto.commit": False, "isolation.level": "read_committed"})
                          for p in range(tasks)]

    def batches(self) -> list[int] | None:
        """Per task: the last micro-batch it committed (-1: none); None when a marker could not be read (its
        transaction still open: OffsetFetch with require_stable waits for it)."""
        try:
            return [c.committed([self.tp], timeout=10)[0].offset - 1 for c in self.consumers]
        except KafkaException:
            return None

    def close(self) -> None:
        for c in self.consumers:
            c.close()


def submit(master: str, args: list[str], events: Path, log: Path, cwd: Path) -> subprocess.Popen:
    events.mkdir(parents=True, exist_ok=True)
    conf = {
        "spark.executor.memory": "512m",
        "spark.driver.memory": "1g",
        "spark.pyspark.python": sys.executable,
        "spark.scheduler.minRegisteredResourcesRatio": "1.0",
        "spark.speculation": "true",
        "spark.speculation.interval": "500ms",
        "spark.speculation.quantile": "0.5",
        "spark.speculation.multiplier": "2",
        "spark.speculation.minTaskRuntime": "5s",
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": str(events),
        "spark.eventLog.compress": "false",
    }
    cmd = [str(KBUS), "spark-submit", "--master", master]
    for k, v in conf.items():
        cmd += ["--conf", f"{k}={v}"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "SPARK_"))}
    with open(log, "w") as out:
        return subprocess.Popen([*cmd, str(JOB), *args], stdout=out, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True, cwd=cwd)


def kill_group(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)


def _committed(checkpoint: Path, batch: int) -> bool:
    return (checkpoint / "commits" / str(batch)).exists()


def wait_mid_batch(job: subprocess.Popen, log: Path, checkpoint: Path, markers: Markers, first: int,
                   timeout: float = 1800) -> tuple[int, list[int]]:
    """Wait for a micro-batch >= `first` with some tasks committed (markers) and some not; returns it and the
    markers. A batch that commits before it is seen in that state is skipped for the next one."""
    batch = first
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if job.poll() is not None:
            raise RuntimeError(f"the job exited {job.returncode} before batch {batch}:\n{log.read_text()[-4000:]}")
        if _committed(checkpoint, batch):
            batch += 1
            continue
        seen = markers.batches()
        done = -1 if seen is None else sum(1 for b in seen if b >= batch)
        if seen is not None and 2 <= done < len(seen) and not _committed(checkpoint, batch):
            return batch, seen
        time.sleep(0.2)
    raise TimeoutError(f"micro-batch {batch} never reached mid-batch")


def read_committed(bootstrap: str, topic: str, partitions: int, records: int, value_size: int) -> dict:
    """Every record, read_committed: each id 0..records-1 exactly once, each value matching its key."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-eos-check-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False, "isolation.level": "read_committed", "enable.partition.eof": True,
                  "fetch.max.bytes": 52428800, "queued.max.messages.kbytes": 262144})
    seen = bytearray(records)
    count = duplicates = out_of_range = bad_values = 0
    id_sum = 0
    pad = b"x" * max(0, value_size - 12)
    t0 = time.monotonic()
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        eof: set[int] = set()
        deadline = time.monotonic() + 1800
        while len(eof) < partitions and time.monotonic() < deadline:
            for m in c.consume(10000, 1.0):
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        eof.add(m.partition())
                        continue
                    raise RuntimeError(err)
                eof.discard(m.partition())
                count += 1
                i = int(m.key())
                if not 0 <= i < records:
                    out_of_range += 1
                    continue
                if seen[i]:
                    duplicates += 1
                seen[i] = 1
                id_sum += i
                if m.value() != b"%012d" % i + pad:
                    bad_values += 1
    finally:
        c.close()
    missing = records - sum(seen)  # bytearray sum: the ids never seen
    return {"count": count, "duplicates": duplicates, "missing": missing, "out_of_range": out_of_range,
            "bad_values": bad_values, "id_sum": id_sum, "expected_id_sum": records * (records - 1) // 2,
            "read_seconds": round(time.monotonic() - t0, 1)}


def log_end_offsets(bootstrap: str, topic: str, partitions: int) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-eos-ends"})
    try:
        return sum(c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in range(partitions))
    finally:
        c.close()


def commit_lines(log: Path) -> dict[int, list[tuple[int, int, bool]]]:
    """The job's `COMMIT <batch> [(partition, records, written), ...]` lines."""
    out = {}
    for line in log.read_text(errors="replace").splitlines():
        m = re.match(r"COMMIT (\d+) (\[.*\])$", line)
        if m:
            out[int(m.group(1))] = ast.literal_eval(m.group(2))
    return out


def one_run(cluster: StandaloneCluster, bootstrap: str, records: int, batch: int, tasks: int, value_size: int,
            stall: int, work: Path) -> Run:
    run = Run(records, batch, tasks)
    batches = (records + batch - 1) // batch
    if batches < 3:
        raise SystemExit(f"--batch-records {batch}: {batches} micro-batches; the faults need at least 3")
    topic = create_topic(bootstrap, tasks)
    sink_id = f"bench-eos-{topic}"
    checkpoint = work / "checkpoint"
    args = [bootstrap, topic, sink_id, str(checkpoint), str(records), str(batch), str(tasks), str(value_size),
            str(stall)]
    markers = Markers(bootstrap, topic, sink_id, tasks)
    t0 = time.monotonic()
    log1, log2 = work / "driver-1.log", work / "driver-2.log"
    job = submit(cluster.url, args, work / "events-1", log1, work)
    rss = RssSampler(job.pid)
    rss.start()
    try:
        # the worker on 127.0.0.2 dies a third of the way in, the driver two thirds in
        at, seen = wait_mid_batch(job, log1, checkpoint, markers, max(1, batches // 3))
        killed_at_ms = int(time.time() * 1000)
        worker_ui = cluster.workers[1].ui_port
        cluster.kill_worker(1)
        run.worker_kill = {"batch": at, "tasks_committed": sum(1 for b in seen if b >= at), "markers": seen}
        print(f"  worker on {HOSTS[1]} killed -9 in micro-batch {at} ({run.worker_kill['tasks_committed']} of "
              f"{tasks} tasks committed)", flush=True)
        time.sleep(3)
        cluster.restart_worker(1)
        at, seen = wait_mid_batch(job, log1, checkpoint, markers, max(at + 1, 2 * batches // 3))
        kill_group(job)
        run.driver_kill = {"batch": at, "tasks_committed": sum(1 for b in seen if b >= at), "markers": seen}
        print(f"  driver killed -9 in micro-batch {at} ({run.driver_kill['tasks_committed']} of {tasks} tasks "
              f"committed)", flush=True)
    finally:
        kill_group(job)
        run.rss_mb["driver 1"] = rss.stop()
    job = submit(cluster.url, args, work / "events-2", log2, work)
    rss = RssSampler(job.pid)
    rss.start()
    try:
        rc = job.wait(3600)
        if rc != 0:
            raise RuntimeError(f"the restarted job exited {rc}:\n{log2.read_text()[-6000:]}")
    finally:
        kill_group(job)
        run.rss_mb["driver 2 (restarted)"] = rss.stop()
        markers.close()
    run.seconds = round(time.monotonic() - t0, 1)
    replay = commit_lines(log2).get(run.driver_kill["batch"], [])
    run.replayed = replay

    events = EventLog.read(work / "events-1")
    run.speculative = [(t.stage, t.index, t.executor, t.reason) for t in events.tasks if t.speculative]
    dead = {e for e, port in events.executors.items() if port == worker_ui}
    run.lost_with_worker = [(t.stage, t.index, t.reason) for t in events.tasks
                            if t.executor in dead and t.finish_ms >= killed_at_ms]
    run.log_end_offsets = log_end_offsets(bootstrap, topic, tasks)
    run.read = read_committed(bootstrap, topic, tasks, records, value_size)
    return run


def verdict(runs: list[Run]) -> list[tuple[str, bool, str]]:
    checks = []
    for r in runs:
        rd = r.read
        tag = f"batch {r.batch_records:,}"
        sum_ok = "ok" if rd["id_sum"] == rd["expected_id_sum"] else "WRONG"
        checks.append((f"{tag}: read_committed sees every record exactly once",
                       rd["count"] == r.records and rd["duplicates"] == rd["missing"] == rd["out_of_range"]
                       == rd["bad_values"] == 0 and rd["id_sum"] == rd["expected_id_sum"],
                       f"{rd['count']:,} records, {rd['duplicates']} duplicates, {rd['missing']} missing, "
                       f"{rd['bad_values']} bad values, id sum {sum_ok}"))
        wk, dk = r.worker_kill, r.driver_kill
        checks.append((f"{tag}: worker killed -9 mid-batch", 0 < wk["tasks_committed"] < r.tasks,
                       f"batch {wk['batch']}, {wk['tasks_committed']}/{r.tasks} tasks committed, "
                       f"{len(r.lost_with_worker)} task attempts lost with it"))
        skipped = [p for p, n, written in r.replayed if n and not written]
        checks.append((f"{tag}: driver killed -9 mid-batch, restarted from its checkpoint, replay skipped the "
                       "committed tasks", 0 < dk["tasks_committed"] < r.tasks and len(skipped) > 0,
                       f"batch {dk['batch']}, {dk['tasks_committed']}/{r.tasks} committed at the kill; on replay "
                       f"{len(skipped)} found their marker, {sum(1 for _, n, w in r.replayed if w)} written"))
        checks.append((f"{tag}: speculative task attempts ran", bool(r.speculative),
                       f"{len(r.speculative)}: {r.speculative}"))
    if len(runs) >= 2:
        small, large = min(runs, key=lambda r: r.batch_records), max(runs, key=lambda r: r.batch_records)
        s_total = max(t for _, t in small.rss_mb.values())
        l_total = max(t for _, t in large.rss_mb.values())
        s_jvm = max(j for j, _ in small.rss_mb.values())
        l_jvm = max(j for j, _ in large.rss_mb.values())
        # flat: the larger batch's peak within 10% (or 64 MB) of the smaller's; through the driver it would grow by
        # the batch's bytes (hundreds of MB at these sizes)
        flat = l_total <= max(s_total * 1.10, s_total + 64)
        checks.append((f"driver RSS does not grow with the batch size ({small.batch_records:,} -> "
                       f"{large.batch_records:,} records per micro-batch)", flat,
                       f"peak tree {s_total} -> {l_total} MB, peak JVM {s_jvm} -> {l_jvm} MB"))
    return checks


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000_000)
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("--batch-records", type=int, nargs="+", default=[625_000, 2_500_000])
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--stall", type=int, default=600, help="seconds the stalled task of batch 0 waits (0: none)")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="kbus-bench-spark-eos-"))
    broker, bootstrap = start_broker(work)
    cluster = StandaloneCluster(work / "cluster")
    runs: list[Run] = []
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    try:
        cluster.start(workers=2, hosts=HOSTS)
        for batch in args.batch_records:
            print(f"run: {args.records:,} records, {args.tasks} tasks, micro-batches of {batch:,}", flush=True)
            d = work / f"run-{batch}"
            d.mkdir()
            runs.append(one_run(cluster, bootstrap, args.records, batch, args.tasks, args.value_size, args.stall, d))
            r = runs[-1]
            print(f"  {r.seconds} s, read back in {r.read['read_seconds']} s, driver RSS {r.rss_mb}", flush=True)
    finally:
        cluster.stop()
        broker.terminate()
        broker.wait(30)
        shutil.rmtree(work, ignore_errors=True)  # the broker's log and Spark's work dirs: GBs a run
    load = os.getloadavg()
    print(f"\n{args.records:,} records of {args.value_size} B, {args.tasks} tasks, standalone cluster of 2 workers x 1 "
          f"core, spark.speculation=true; load average {load[0]:.1f}, {os.cpu_count()} CPUs\n")
    print("| records per micro-batch | micro-batches | wall s (incl. faults, restart) | records read_committed | "
          "duplicates | missing | driver peak RSS MB, JVM / process tree (1st driver; restarted) |")
    print("|---|---|---|---|---|---|---|")
    for r in runs:
        rss = "; ".join(f"{j} / {t}" for j, t in r.rss_mb.values())
        print(f"| {r.batch_records:,} | {(r.records + r.batch_records - 1) // r.batch_records} | {r.seconds} | "
              f"{r.read['count']:,} | {r.read['duplicates']} | {r.read['missing']} | {rss} |")
    checks = verdict(runs)
    print()
    for name, ok, detail in checks:
        print(f"- {'PASS' if ok else 'FAIL'}: {name}: {detail}")
    ok = all(c[1] for c in checks)
    print(f"\nVERDICT: {'PASS' if ok else 'FAIL'}")
    out = REPO / os.environ.get("RESULTS", "bench/results/local")
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "spark_eos_faults.jsonl", "a") as f:
        f.write(json.dumps({"time": started, "args": vars(args), "load": load[0], "verdict": ok,
                            "checks": checks, "runs": [asdict(r) for r in runs]}) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
