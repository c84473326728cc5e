"""Session 11 (bench/notes/produce1p-2026-11-26-s11.md). Run through perfrun.sh SYSTEM SIZE COUNT OUT.
Produce N messages of SIZE bytes into a fresh 1-partition topic, then consume them under perf record -g -p PID."""
import os, signal, subprocess, sys, time, uuid
sys.path.insert(0, "bench/scenarios")
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
boot, pid, size, count, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
phase = sys.argv[6] if len(sys.argv) > 6 else "consume"
def cpu(pid):
    return time.clock_gettime((~pid << 3) | 2)
topic = f"perf-{uuid.uuid4().hex[:6]}"
a = AdminClient({"bootstrap.servers": boot}); a.create_topics([NewTopic(topic, 1, 1)])[topic].result(60)
time.sleep(1)
def perf():
    if os.environ.get("PROFILER") == "none":
        return None
    if os.environ.get("PROFILER") == "strace":
        return subprocess.Popen(["strace", "-f", "-c", "-o", out, "-p", str(pid)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return subprocess.Popen(["perf", "record"] + os.environ.get("PERFARGS", "-g -F 2000").split() + ["-o", out, "-p", str(pid)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
p = Producer({"bootstrap.servers": boot, "linger.ms": 5, "acks": "1", "queue.buffering.max.messages": 1000000,
              "queue.buffering.max.kbytes": 1048576, "message.max.bytes": 1000000})
p.list_topics(topic, timeout=30)
payload = os.urandom(size)
pr = perf() if phase == "produce" else None
if pr: time.sleep(1)
c0 = cpu(pid); t0 = time.monotonic()
for i in range(count):
    while True:
        try: p.produce(topic, payload, partition=0); break
        except BufferError: p.poll(0.01)
p.flush(300)
dt = time.monotonic() - t0; c = cpu(pid) - c0
print(f"produce {count} x {size}: {count/dt:,.0f}/s, {c/count*1e6:.3f} us/msg broker CPU")
if pr: pr.send_signal(signal.SIGINT); pr.wait()
if phase != "consume": sys.exit(0)
def warm():
    w = Consumer({"bootstrap.servers": boot, "group.id": "w"+topic, "enable.auto.commit": False,
                  "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 1048576})
    w.assign([TopicPartition(topic, 0, 0)]); n = 0
    while n < count:
        n += sum(1 for m in w.consume(min(10000, count - n), 1.0) if m.error() is None)
    w.close()
for _ in range(int(os.environ.get('WARM', '1'))): warm()
time.sleep(1)
pr = perf(); time.sleep(1)
import json as _j
stats = {}
def _scb(s):
    stats['last'] = _j.loads(s)
cons = Consumer({"bootstrap.servers": boot, "group.id": "g"+topic, "enable.auto.commit": False, "statistics.interval.ms": 200, "stats_cb": _scb,
                 "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 1048576})
cons.assign([TopicPartition(topic, 0, 0)])
got = 0; c0 = cpu(pid); t0 = time.monotonic()
while got < count:
    for m in cons.consume(min(10000, count - got), 1.0):
        if m.error() is None: got += 1
dt = time.monotonic() - t0; c = cpu(pid) - c0
for _ in range(5): cons.poll(0.1)
for b in stats['last']['brokers'].values():
    if b.get('nodeid', -1) >= 0: print('broker', b['name'], 'Fetch reqs', b['req'].get('Fetch'), 'rx', b['rx'], 'rxbytes', b['rxbytes'])
cons.close()
if pr: pr.send_signal(signal.SIGINT); pr.wait()
print(f"consume {count} x {size}: {count/dt:,.0f}/s, {c/count*1e6:.3f} us/msg broker CPU")
