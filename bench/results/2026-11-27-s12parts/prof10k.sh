#!/usr/bin/env bash
# profile kbus producing over 10,000 new partitions: py-spy --native on the broker during scale.py's produce
set -euo pipefail
cd /work/wt/parts
. bench/lib/lib.sh
SYSTEMS=${SYSTEMS:-kbus}
ulimit -n "$(ulimit -Hn)"
bench_start prof10k
start_systems
who=${SYSTEMS%% *}
N=${N:-10000}; MSGS=${MSGS:-100000}
$PY - "127.0.0.1:${port[$who]}" "${pid[$who]}" $N <<'PY'
import argparse, asyncio, sys
sys.path.insert(0, "bench/scenarios"); sys.path.insert(0, "bench/lib")
import scale
a = argparse.Namespace(bootstrap=sys.argv[1], broker_pid=int(sys.argv[2]), timeout=300)
print(asyncio.run(scale.create_topic_timed(a, f"scale-p{sys.argv[3]}", int(sys.argv[3]))))
PY
sleep 2
OUTP=${OUTP:-/tmp/parts/prof.txt}
if [ -n "${PERF:-}" ]; then
  perf record -F 499 -g -p "${pid[$who]}" -o /tmp/parts/perf.data &
else
  .venv/bin/py-spy record --native -r 250 -f raw -o "$OUTP" -p "${pid[$who]}" &
fi
spy=$!
sleep 1
$PY - "127.0.0.1:${port[$who]}" "${pid[$who]}" $N $MSGS <<'PY'
import argparse, sys
sys.path.insert(0, "bench/scenarios"); sys.path.insert(0, "bench/lib")
import scale
a = argparse.Namespace(bootstrap=sys.argv[1], broker_pid=int(sys.argv[2]))
print(scale.produce(a, f"scale-p{sys.argv[3]}", int(sys.argv[3]), int(sys.argv[4]), 100))
print(scale.produce(a, f"scale-p{sys.argv[3]}", int(sys.argv[3]), int(sys.argv[4]), 100))
PY
kill -INT $spy; wait $spy || true
