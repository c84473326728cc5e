"""A light load: python loadgen.py PORT SECONDS RATE: 100 B records at ~RATE/s (acks=1) into topic p10's 10
partitions, and a consumer reading them; prints what it sent and read."""
import sys, threading, time
from confluent_kafka import Consumer, Producer
port, secs, rate = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
boot = f"127.0.0.1:{port}"
stop = time.monotonic() + secs
read = [0]

def consume() -> None:
    c = Consumer({"bootstrap.servers": boot, "group.id": "light", "auto.offset.reset": "latest"})
    c.subscribe(["p10"])
    while time.monotonic() < stop:
        m = c.poll(0.2)
        if m is not None and m.error() is None:
            read[0] += 1
    c.close()

t = threading.Thread(target=consume)
t.start()
p = Producer({"bootstrap.servers": boot, "acks": 1, "linger.ms": 5})
sent, value, start = 0, b"x" * 100, time.monotonic()
while time.monotonic() < stop:
    p.produce("p10", value, partition=sent % 10)
    sent += 1
    p.poll(0)
    ahead = sent / rate - (time.monotonic() - start)
    if ahead > 0:
        time.sleep(ahead)
p.flush(30)
t.join()
print(f"sent {sent} read {read[0]}")
