# Sourced by the *_cost.sh scenarios: instructions counted by callgrind over the measured requests only
# (deterministic, unlike CPU time on a shared machine). The measured script calls cg_on()/cg_off() from the shim
# (through ctypes, CALLGRIND_SHIM) around its requests; each cg_off() dumps one file.

# callgrind_shim DIR: DIR/shim.so, cg_on() zeroing and starting the count, cg_off() stopping and dumping it
callgrind_shim() {
  cat >"$1/shim.c" <<'C'
#include <valgrind/callgrind.h>
void cg_on(void) { CALLGRIND_ZERO_STATS; CALLGRIND_START_INSTRUMENTATION; }
void cg_off(void) { CALLGRIND_STOP_INSTRUMENTATION; CALLGRIND_DUMP_STATS; }
C
  cc -shared -fPIC -O1 -o "$1/shim.so" "$1/shim.c"
}

# callgrind_per_request SCRIPT COUNT_VAR N "CASES" TREE_A TREE_B: runs SCRIPT (with COUNT_VAR=N in its environment)
# from each tree with that tree's .venv, A, B, A, B (the spread between equal runs is the noise), and prints, for
# each of its dumps in order (one per case), "<case> <tree> <instructions / N> instructions per request (N=N)".
# KEEP=PREFIX keeps each callgrind file (PREFIX.<tree>.<case>) for callgrind_annotate.
callgrind_per_request() {
  local script=$1 count_var=$2 n=$3 cases=$4 out tree i f total case
  out=$(mktemp -d)
  callgrind_shim "$out"
  for tree in "$5" "$6" "$5" "$6"; do
    tree=$(realpath "$tree")
    rm -f "$out"/cg*
    (cd "$tree" && env CALLGRIND_SHIM="$out/shim.so" "$count_var=$n" valgrind --tool=callgrind --instr-atstart=no \
      --callgrind-out-file="$out/cg" "$tree/.venv/bin/python" "$script" >/dev/null 2>"$out/err") \
      || { cat "$out/err" >&2; rm -rf "$out"; return 1; }
    i=0
    for case in $cases; do
      i=$((i + 1))
      f=$(ls "$out"/cg.* 2>/dev/null | sort -t. -k2 -n | sed -n "${i}p")
      total=$(awk '/^(summary|totals):/ {s += $2} END {print s}' "$f")
      echo "$case $tree $((total / n)) instructions per request (N=$n)"
      [ -z "${KEEP:-}" ] || cp "$f" "$KEEP.$(basename "$tree").$case"
    done
  done
  rm -rf "$out"
}
