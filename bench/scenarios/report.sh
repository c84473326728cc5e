#!/usr/bin/env bash
# Every table of bench/notes/RESULTS.md from the raw JSON lines (medians, ratios to Apache Kafka from the same runs).
#   usage: bench/scenarios/report.sh [SINCE]   (ISO time prefix: only runs from then on; default: all)
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-.venv/bin/python}
since=(); [ -z "${1:-}" ] || since=(--since "$1")
echo "## kbench (librdkafka): $RESULTS/results.jsonl"; $PY bench/scenarios/summarize.py $RESULTS/results.jsonl "${since[@]}"
for f in $RESULTS/perftest-final.jsonl $RESULTS/sessions.jsonl; do
  [ -f "$f" ] && { echo; echo "## Kafka's perf tools: $f"; $PY bench/scenarios/summarize_perftest.py "$f" "${since[@]}"; }
done
[ -f $RESULTS/zerocopy.jsonl ] && { echo; echo "## zero copy: $RESULTS/zerocopy.jsonl"; $PY bench/scenarios/summarize.py $RESULTS/zerocopy.jsonl; }
[ -f $RESULTS/fetch_sessions.jsonl ] && { echo; echo "## fetch sessions per request: $RESULTS/fetch_sessions.jsonl"
  sed -n '/^\$PY - "\$OUT" <<.PY.$/,/^PY$/p' bench/scenarios/fetch_sessions.sh | sed '1d;$d' | $PY - $RESULTS/fetch_sessions.jsonl; }
[ -f $RESULTS/ops.jsonl ] && { echo; echo "## operations: $RESULTS/ops.jsonl"; $PY bench/scenarios/summarize_ops.py $RESULTS/ops.jsonl "${since[@]}"; }
