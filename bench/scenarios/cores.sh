#!/usr/bin/env bash
# Every core (issue 14): a broker-bound workload (32 librdkafka producers in 2 generator processes, linger.ms=0,
# acks=all, 100 B, 64 partitions, 4 records outstanding per producer, so ~1 record per Produce request) against
# kbus with num.broker.processes 1 and 2, pinned to 1 core (broker processes on CPU 1, generators on CPU 0) and
# to 2 cores (brokers and generators both on CPUs 0-1: on this 2-core machine the generators compete with the
# brokers, so their CPU is reported beside). Apache Kafka (one JVM, threads on every core it is given) runs the
# same workload at 1 and 2 cores as the peer (KAFKA=0 skips it). Configurations interleaved round by round; one
# JSON line per run in
# $OUT (default $RESULTS/cores.jsonl); the table: .venv/bin/python bench/scenarios/cores.py report $RESULTS/cores.jsonl
#   usage: bench/scenarios/cores.sh [ROUNDS] [bench/scenarios/cores.py run args, e.g. --seconds 30 --partitions 256]
set -euo pipefail
cd "$(dirname "$0")/../.."
. bench/lib/lib.sh
rounds=${1:-3}; shift || true
OUT=${OUT:-$RESULTS/cores.jsonl}
bench_start cores
# the generator in C (bench/scenarios/cores_load.c, ~25% less CPU per record than the Python one) when gcc and Debian's
# librdkafka1 are there; GENERATOR=python or their absence uses bench/scenarios/cores.py's
gen=()
rdkafka=/usr/lib/x86_64-linux-gnu/librdkafka.so.1
if [ "${GENERATOR:-c}" = c ] && command -v gcc >/dev/null && [ -e "$rdkafka" ]; then
  gcc -O2 -Wall -o "$work/cores_load" bench/scenarios/cores_load.c "$rdkafka" -lpthread && gen=(--c-generator "$work/cores_load")
fi
zkport=$(free_port); start_zk "$zkport"
configs=(
  "--processes 1 --cpus 1 --gen-cpus 0"
  "--processes 2 --cpus 1 --gen-cpus 0"
  "--processes 1 --cpus 0-1 --gen-cpus 0-1"
  "--processes 2 --cpus 0-1 --gen-cpus 0-1"
)
if [ "${KAFKA:-1}" = 1 ]; then  # the JVM's JIT needs a longer warm-up
  libs=$(kafka_libs)
  configs+=("--kafka-libs $libs --warmup 15 --cpus 1 --gen-cpus 0" "--kafka-libs $libs --warmup 15 --cpus 0-1 --gen-cpus 0-1")
fi
for r in $(seq "$rounds"); do
  for c in "${configs[@]}"; do
    echo "== round $r: $c $* (load average: $(cut -d' ' -f1-3 /proc/loadavg))" >&2
    # shellcheck disable=SC2086
    $PY bench/scenarios/cores.py run --zk "127.0.0.1:$zkport" $c "${gen[@]}" --work "$work" --out "$OUT" "$@" >/dev/null \
      || echo "   (run failed: $c)" >&2
  done
done
$PY bench/scenarios/cores.py report "$OUT"
