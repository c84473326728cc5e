"""Every second, each named broker's per-thread CPU (schedstat runtime ns): python sampler.py OUT label=pid ..."""
import json, os, sys, time
out = open(sys.argv[1], "a")
pids = dict(a.split("=") for a in sys.argv[2:])
while True:
    for label, pid in pids.items():
        th = {}
        try:
            for tid in os.listdir(f"/proc/{pid}/task"):
                try:
                    with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                        th[tid] = int(f.read().split()[0])
                except OSError:
                    pass
        except OSError:
            continue
        out.write(json.dumps({"t": time.monotonic(), "label": label, "pid": int(pid), "threads": th}) + "\n")
    out.flush()
    time.sleep(1)
