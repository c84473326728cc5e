#!/usr/bin/env bash
# On sockets, same run: kbus (this tree, compiled) beside kbus-pre (/work/wt/pre = 1c16b41, compiled).
#   ab_run.sh small [ROUNDS]: one-record Produce (small_requests.sh: 16 connections x 4 in flight, v9, acks=-1)
#   ab_run.sh conn [ROUNDS]:  scale.py's connections point (one Produce v8 of 10 x 100 B, acks=1, in flight per connection)
set -euo pipefail
R=/work/wt/h4-produce/bench/results/2026-11-27-s16-produce
cd /work/wt/h4-produce
case $1 in
  small) RESULTS=$R OUT=$R/small_requests.jsonl KBUS_PRE=/work/wt/pre SYSTEMS="${SYSTEMS:-kbus kbus-pre}" APIS=produce \
           bench/scenarios/small_requests.sh "${2:-3}" ;;
  conn) RESULTS=$R OUT=$R/scale.jsonl KBUS_PRE=/work/wt/pre SYSTEMS="${SYSTEMS:-kbus kbus-pre}" AXES=connections \
          CONNECTIONS="${CONNECTIONS:-1000 5000}" bench/scenarios/scale.sh "${2:-2}" ;;
  *) echo "usage: $0 small|conn [ROUNDS]" >&2; exit 2 ;;
esac
