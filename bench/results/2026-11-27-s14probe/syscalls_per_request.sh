#!/usr/bin/env bash
# syscalls per request: the connections point (one Produce of 10 x 100 B in flight per connection), kbus vs Kafka
set -euo pipefail
cd /work/main
source bench/lib/lib.sh
bench_start conncount
SYSTEMS="${SYSTEMS:-kbus kafka}"
start_systems
C=${C:-100}
for who in $SYSTEMS; do
  .venv/bin/python - "${port[$who]}" <<'PY'
import sys
from confluent_kafka.admin import AdminClient, NewTopic
a = AdminClient({"bootstrap.servers": f"127.0.0.1:{sys.argv[1]}", "socket.timeout.ms": 300000})
a.create_topics([NewTopic("scale-conn", 10, 1)], operation_timeout=300, request_timeout=300)["scale-conn"].result(300)
PY
  # warm-up (Kafka's JIT), then the counted run
  .venv/bin/python bench/scenarios/scale.py connections -b 127.0.0.1:${port[$who]} --broker-pid ${pid[$who]} --label $who --out /dev/null --connections $C --topic scale-conn --requests 20000 --idle-seconds 1 >/dev/null
  tids=$(ls /proc/${pid[$who]}/task | sed "s/^/-p /" | tr "\n" " ")
  strace -c -f -o /work/notes/idle/strace-$who-$C.txt $tids & sp=$!
  sleep 1
  .venv/bin/python bench/scenarios/scale.py connections -b 127.0.0.1:${port[$who]} --broker-pid ${pid[$who]} --label $who --out /work/notes/idle/conn-$who-$C.jsonl --connections $C --topic scale-conn --requests 20000 --idle-seconds 1
  kill -INT $sp; wait $sp || true
done
