"""Every second: each broker's per-thread CPU (schedstat ns), brokers found from the running scale.py's args."""
import json, os, re, sys, time
out = open(sys.argv[1], "a")
while True:
    seen = {}
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            args = open(f"/proc/{p}/cmdline").read().split("\0")
        except OSError:
            continue
        if any(a.endswith("scale.py") for a in args) and "--broker-pid" in args and "--label" in args:
            seen[args[args.index("--label") + 1]] = (int(args[args.index("--broker-pid") + 1]), args[2] if len(args) > 2 else "")
    for label, (pid, cmd) in seen.items():
        th = {}
        try:
            for tid in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    th[tid] = int(f.read().split()[0])
        except OSError:
            continue
        out.write(json.dumps({"t": time.monotonic(), "label": label, "pid": pid, "cmd": cmd, "threads": th}) + "\n")
    out.flush()
    time.sleep(1)
