#!/usr/bin/env bash
# Every table of bench/RESULTS.md from the raw JSON lines (medians, ratios to Apache Kafka from the same runs).
#   usage: bench/report.sh [SINCE]   (ISO time prefix: only runs from then on; default: all)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
since=(); [ -z "${1:-}" ] || since=(--since "$1")
echo "## kbench (librdkafka): bench/results.jsonl"; $PY bench/summarize.py bench/results.jsonl "${since[@]}"
for f in bench/perftest-final.jsonl bench/sessions.jsonl; do
  [ -f "$f" ] && { echo; echo "## Kafka's perf tools: $f"; $PY bench/summarize_perftest.py "$f" "${since[@]}"; }
done
[ -f bench/zerocopy.jsonl ] && { echo; echo "## zero copy: bench/zerocopy.jsonl"; $PY bench/summarize.py bench/zerocopy.jsonl; }
[ -f bench/fetch_sessions.jsonl ] && { echo; echo "## fetch sessions per request: bench/fetch_sessions.jsonl"
  sed -n '/^\$PY - "\$OUT" <<.PY.$/,/^PY$/p' bench/fetch_sessions.sh | sed '1d;$d' | $PY - bench/fetch_sessions.jsonl; }
[ -f bench/ops.jsonl ] && { echo; echo "## operations: bench/ops.jsonl"; $PY bench/summarize_ops.py bench/ops.jsonl "${since[@]}"; }
