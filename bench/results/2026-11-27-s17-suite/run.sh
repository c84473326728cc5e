#!/usr/bin/env bash
# usage: run.sh base|mine TAG pytest-args...   (one pytest process, --durations=0, own basetemp)
set -u
which=$1; tag=$2; shift 2
# base: a copy of 5322e36 (git archive) with this build's compiled modules and .cache linked; mine: this worktree
case $which in base) tree=/tmp/h4-base;; mine) tree=/work/wt/h4-suite;; esac
cd $tree
start=$(date -u +%T); l1=$(cut -d' ' -f1 /proc/loadavg)
/usr/bin/time -f "TIME %e s wall, %U+%S s cpu (pytest process and children waited for)" \
  /work/wt/h4-suite/.venv/bin/python -m pytest -q -p no:cacheprovider -p no:xdist --durations=0 \
  --basetemp=/tmp/h4-meas/bt-$tag "$@" > /tmp/h4-meas/$tag.log 2>&1
rc=$?
echo "RUN $which $tag rc=$rc $start-$(date -u +%T) load $l1 -> $(cut -d' ' -f1 /proc/loadavg)" | tee -a /tmp/h4-meas/$tag.log
grep -E "TIME|passed|failed" /tmp/h4-meas/$tag.log | tail -3
