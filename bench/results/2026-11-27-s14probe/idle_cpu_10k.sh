#!/usr/bin/env bash
# idle CPU of kbus (main) vs kbus-base with 10,000 partitions: what periodic work costs
set -euo pipefail
cd /work/main
source bench/lib/lib.sh
bench_start idlecpu
SYSTEMS="kbus kbus-base"
KBUS_BASE=/work/wt/base-main
start_systems
for who in $SYSTEMS; do
  .venv/bin/python - "${port[$who]}" <<'PY'
import sys
from confluent_kafka.admin import AdminClient, NewTopic
a = AdminClient({"bootstrap.servers": f"127.0.0.1:{sys.argv[1]}", "socket.timeout.ms": 300000})
a.create_topics([NewTopic("idle10k", 10000, 1)], operation_timeout=600, request_timeout=600)["idle10k"].result(600)
print("created", sys.argv[1])
PY
done
sleep 20
declare -A c0
cpu() { awk '{print $14+$15}' /proc/$1/stat; }
for who in $SYSTEMS; do c0[$who]=$(cpu ${pid[$who]}); done
sleep ${IDLE_S:-60}
for who in $SYSTEMS; do echo "$who idle cpu ticks over ${IDLE_S:-60}s: $(( $(cpu ${pid[$who]}) - c0[$who] ))"; done
if [ -n "${SPY:-}" ]; then
  for who in $SYSTEMS; do /work/main/.venv/bin/py-spy record -d 30 -r 200 -f raw -o /work/notes/idle/$who.txt -p ${pid[$who]} >/dev/null 2>&1 & done; wait
fi
