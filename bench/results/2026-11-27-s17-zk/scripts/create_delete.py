"""Create a topic of N partitions on one broker, then delete it; per-thread broker CPU over each step (from /proc)
and the wall time: the creation until every partition has a leader (+2 s settling), the deletion until the topic
is gone from Metadata and no dir of it (renamed -delete ones included) is left in the broker's log dir (+2 s).

python create_delete.py BOOTSTRAP BROKER_PID LOG_DIR PARTITIONS LABEL OUT.jsonl
SPY_DIR=DIR: py-spy record (raw, --threads, 50 Hz) of the broker over each step, DIR/LABEL-{create,delete}.txt
(a profiling run, not a measuring one: py-spy stops the broker to sample it)
(run from bench/scenarios' parent with sys.path holding bench/scenarios, for scale.wait_leaders)"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "bench" / "scenarios"))
from scale import wait_leaders  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def threads(pid: int) -> dict[int, float]:
    out = {}
    for t in Path(f"/proc/{pid}/task").iterdir():
        try:
            f = (t / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[int(t.name)] = (int(f[11]) + int(f[12])) / TICK
    return out


def delta(before: dict[int, float], after: dict[int, float], pid: int) -> dict[str, float]:
    d = {tid: after.get(tid, 0.0) - before.get(tid, 0.0) for tid in set(before) | set(after)}
    main = d.pop(pid, 0.0)
    rest = sorted(d.items(), key=lambda kv: -kv[1])
    return {"all_s": round(main + sum(d.values()), 2), "main_s": round(main, 2),
            "top_threads_s": {str(t): round(v, 2) for t, v in rest[:6] if v >= 0.05}}


def spy(pid: int, name: str) -> subprocess.Popen[bytes] | None:
    d = os.environ.get("SPY_DIR")
    if not d:
        return None
    return subprocess.Popen(["/work/main/.venv/bin/py-spy", "record", "-p", str(pid), "-r", "50", "--threads",
                             "--format", "raw", "-o", f"{d}/{name}.txt"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def unspy(p: subprocess.Popen[bytes] | None) -> None:
    if p is not None:
        p.send_signal(signal.SIGINT)
        p.wait(60)


def main() -> None:
    bootstrap, pid, log_dir, n, label, out = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4]), \
        sys.argv[5], sys.argv[6]
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"cd-p{n}"
    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 300_000})
    p = spy(pid, f"{label}-create")
    t0, c0 = time.monotonic(), threads(pid)
    admin.create_topics([NewTopic(topic, n, 1)], operation_timeout=600, request_timeout=600)[topic].result(900)
    asyncio.run(wait_leaders(bootstrap, topic, n, 900))
    created = time.monotonic() - t0
    time.sleep(2)
    c1 = threads(pid)
    unspy(p)
    p = spy(pid, f"{label}-delete")
    t1 = time.monotonic()
    stalls = 0
    admin.delete_topics([topic], operation_timeout=600, request_timeout=600)[topic].result(900)
    while True:
        try:
            listed = topic in admin.list_topics(timeout=60).topics
        except Exception:  # the broker did not answer Metadata within 60 s (its event loop busy)
            stalls += 1
            continue
        left = [c for c in log_dir.iterdir() if c.name.startswith(topic + "-")]
        if not listed and not left:
            break
        if time.monotonic() - t1 > 900:
            raise TimeoutError(f"{topic}: {len(left)} dirs left")
        time.sleep(0.1)
    deleted = time.monotonic() - t1
    time.sleep(2)
    c2 = threads(pid)
    unspy(p)
    row = {"label": label, "partitions": n, "create_s": round(created, 2), "delete_s": round(deleted, 2), "metadata_timeouts_60s": stalls,
           "create_cpu": delta(c0, c1, pid), "delete_cpu": delta(c1, c2, pid),
           "load": os.getloadavg()[0]}
    print(json.dumps(row))
    with open(out, "a") as f:
        f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
