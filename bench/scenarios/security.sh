#!/usr/bin/env bash
# TLS and SASL cost, side by side in one run: one kbus broker (standalone) with three listeners on the same log,
# PLAINTEXT, SSL and SASL_SSL (SCRAM-SHA-256), measured round by round, interleaved, with bench/lib/kbench.py
# (confluent-kafka). Certificates are made here with openssl (a CA and a server cert for 127.0.0.1).
#   usage: bench/scenarios/security.sh [ROUNDS] [extra kbench args, e.g. -n 500000]
# Env: OUT (default $RESULTS/security.jsonl). The report (ratios to PLAINTEXT) goes to security-report.md beside $OUT.
set -euo pipefail
cd "$(dirname "$0")/../.."
. bench/lib/lib.sh
rounds=${1:-3}; shift || true
OUT=${OUT:-$RESULTS/security.jsonl}
bench_start security

# a CA and a server certificate for 127.0.0.1 (PEM keystore: PKCS#8 key + chain in one file, as KIP-651 reads it)
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=kbus-bench-ca" -keyout "$work/ca.key" \
  -out "$work/ca.pem" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" -keyout "$work/server.key" -out "$work/server.csr" \
  2>/dev/null
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >"$work/san.ext"
openssl x509 -req -in "$work/server.csr" -CA "$work/ca.pem" -CAkey "$work/ca.key" -CAcreateserial -days 2 \
  -extfile "$work/san.ext" -out "$work/server.crt" 2>/dev/null
cat "$work/server.key" "$work/server.crt" >"$work/server.pem"

pt=$(free_port); sl=$(free_port); ss=$(free_port)
$PY -m kbus.server config/server.properties --override zookeeper.connect= --override log.dirs="$work/data" \
  --override listeners="PLAINTEXT://127.0.0.1:$pt,SSL://127.0.0.1:$sl,SASL_SSL://127.0.0.1:$ss" \
  --override ssl.keystore.type=PEM --override ssl.keystore.location="$work/server.pem" \
  --override sasl.enabled.mechanisms=SCRAM-SHA-256 >"$work/kbus.log" 2>&1 &
kbus_pid=$!; pids+=("$kbus_pid")
wait_port "$pt"
.venv/bin/kbus configs --bootstrap-server "127.0.0.1:$pt" --alter --entity-type users --entity-name bench \
  --add-config 'SCRAM-SHA-256=[iterations=4096,password=bench-secret]' >/dev/null

declare -A args
args[PLAINTEXT]="-b 127.0.0.1:$pt"
args[SSL]="-b 127.0.0.1:$sl --conf security.protocol=SSL --conf ssl.ca.location=$work/ca.pem"
args[SASL_SSL]="-b 127.0.0.1:$ss --conf security.protocol=SASL_SSL --conf ssl.ca.location=$work/ca.pem \
  --conf sasl.mechanisms=SCRAM-SHA-256 --conf sasl.username=bench --conf sasl.password=bench-secret"
for who in PLAINTEXT SSL SASL_SSL; do  # unrecorded warm-up
  # shellcheck disable=SC2086
  $PY "$KBENCH" produce ${args[$who]} -n 200000 --quiet --delete "$@" >/dev/null 2>&1 || true
done
for r in $(seq "$rounds"); do
  for who in PLAINTEXT SSL SASL_SSL; do
    echo "== round $r: $who $*" >&2
    # shellcheck disable=SC2086
    $PY "$KBENCH" all ${args[$who]} --broker-pid "$kbus_pid" --label "kbus-$who" --out "$OUT" --quiet --delete \
      "$@" >/dev/null || echo "   ($who run reported invalid: see $OUT)" >&2
  done
done
$PY "$KBENCH" report "$OUT" --baseline kbus-PLAINTEXT | tee "$(dirname "$OUT")/security-report.md"
