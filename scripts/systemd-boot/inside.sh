#!/bin/bash
# Runs inside the booted Debian container of scripts/systemd-boot-test.sh, as an operator would on a host where
# kbus was installed per docs/operations.md (a venv under /opt/kbus): install-service, systemctl start, the seed
# walkthrough, a controlled stop, restart, kill -9 of the broker under load, the journal, systemd-analyze security.
# Every check prints "ok: ..." or "FAIL: ..." (and exits 1).
set -uo pipefail
KBUS=/opt/kbus/venv/bin/kbus
PY=/opt/kbus/venv/bin/python
BOOTSTRAP=localhost:9092

step() { printf '\n=== [%3ss] %s\n' "$SECONDS" "$*"; }
ok() { echo "ok: $*"; }
fail() { echo "FAIL: $*"; echo "--- journalctl -u kbus -u kbus-zookeeper (last 40 lines)"; \
  journalctl -u kbus -u kbus-zookeeper --no-pager -n 40; exit 1; }
timed() {  # timed LABEL CMD...: run, print how long it took
  local label=$1 t0 t1; shift
  t0=$(date +%s.%N); "$@" || fail "$label: exit $?"; t1=$(date +%s.%N)
  printf 'took %.1fs: %s\n' "$($PY -c "print($t1 - $t0)")" "$label"
}
main_pid() { systemctl show -p MainPID --value kbus; }

step "systemd: $(systemctl --version | head -1); system state: $(systemctl is-system-running)"
step "kbus install-service"
$KBUS install-service || fail "install-service"
[ "$(stat -c %U /var/lib/kbus/data)" = kbus ] && ok "/var/lib/kbus/data owned by kbus" || fail "data dir owner"

step "systemctl start kbus-zookeeper kbus"
timed "systemctl start kbus-zookeeper kbus" systemctl start kbus-zookeeper kbus
systemctl --no-pager status kbus-zookeeper kbus | sed -n '1,12p;/^$/q'
systemctl --no-pager status kbus | sed -n '1,12p'
[ "$(systemctl is-active kbus)" = active ] && ok "kbus.service active (Type=notify: READY=1 came)" || fail "kbus not active"
$KBUS broker-health --bootstrap-server $BOOTSTRAP || fail "broker-health"

step "seed walkthrough"
$KBUS topics --create --topic topic-1 --zookeeper localhost:2181 --partitions 3 --replication-factor 1 \
  || fail "topics --create"
$KBUS topics --describe --topic topic-1 --bootstrap-server $BOOTSTRAP
printf 'Hello World\nHello Kafka\n' | $KBUS console-producer --broker-list $BOOTSTRAP --topic topic-1 \
  || fail "console-producer"
out=$($KBUS console-consumer --bootstrap-server $BOOTSTRAP --topic topic-1 --from-beginning --timeout-ms 5000)
echo "$out"
grep -qx "Hello World" <<<"$out" && grep -qx "Hello Kafka" <<<"$out" && ok "consumer read both lines" \
  || fail "consumer output"

step "systemctl stop kbus (controlled shutdown)"
timed "systemctl stop kbus" systemctl stop kbus
echo "ExecMainStatus=$(systemctl show -p ExecMainStatus --value kbus) Result=$(systemctl show -p Result --value kbus)"
[ -f /var/lib/kbus/data/.kafka_cleanshutdown ] && ok "clean-shutdown marker /var/lib/kbus/data/.kafka_cleanshutdown" \
  || fail "no clean-shutdown marker"
[ "$(systemctl show -p Result --value kbus)" = success ] && ok "stop result: success" || fail "stop result"
[ "$(systemctl is-active kbus-zookeeper)" = active ] && ok "ZooKeeper still running" || fail "ZooKeeper stopped too"

step "systemctl start kbus (after the controlled stop)"
timed "systemctl start kbus" systemctl start kbus
# (journal text in a variable: `journalctl | grep -q` would fail under pipefail when grep stops reading early)
loaded=$(journalctl -u kbus -o cat --no-pager | grep "loaded .* logs from" | tail -1)
echo "$loaded"
[[ $loaded == *"(clean shutdown)"* ]] && ok "the start found the marker and skipped recovery" \
  || fail "start did not see a clean shutdown"

step "systemctl restart kbus"
before=$(main_pid)
timed "systemctl restart kbus" systemctl restart kbus
after=$(main_pid)
[ "$after" != "$before" ] && [ "$(systemctl is-active kbus)" = active ] && ok "restarted: MainPID $before -> $after" \
  || fail "restart"
out=$($KBUS console-consumer --bootstrap-server $BOOTSTRAP --topic topic-1 --from-beginning --timeout-ms 5000)
[ "$(grep -c '^Hello' <<<"$out")" = 2 ] && ok "topic-1 still holds both records" || fail "records after restart"

step "kill -9 of the main PID while a producer (acks=all) runs"
$KBUS topics --create --topic acked --bootstrap-server $BOOTSTRAP --partitions 3 --replication-factor 1 \
  || fail "create acked"
rm -f /run/kbus-acked.txt /run/kbus-producing /run/kbus-killed
$PY - 2>/run/kbus-producer.err <<'EOF' &
# Produce numbered records (acks=all) before, across and after the kill: from 2000 acknowledged records on, the
# shell may kill; 3 s after it did, stop producing and wait for every record's fate. Acknowledged ones go to a file.
import os, time
from confluent_kafka import Producer
acked, failed = [], []
def report(err, msg):
    (failed if err else acked).append(msg.value().decode())
p = Producer({"bootstrap.servers": "localhost:9092", "acks": "all", "linger.ms": 5,
              "message.timeout.ms": 120000, "enable.idempotence": True})
i, at_kill = 0, None
while i < 500000:
    if len(acked) >= 2000 and not os.path.exists("/run/kbus-producing"):
        open("/run/kbus-producing", "w").close()
    if os.path.exists("/run/kbus-killed"):
        if at_kill is None:
            at_kill = len(acked)
        if time.time() - os.path.getmtime("/run/kbus-killed") > 3:
            break
    try:
        p.produce("acked", str(i).encode(), str(i % 97).encode(), on_delivery=report)
        i += 1
    except BufferError:
        p.poll(0.05)
    p.poll(0)
    if i % 500 == 0:
        time.sleep(0.01)
left = p.flush(150)
with open("/run/kbus-acked.txt", "w") as f:
    f.write("\n".join(acked) + "\n")
print(f"producer: {i} sent, {at_kill} acknowledged when the kill was seen, {len(acked)} acknowledged in the end, "
      f"{len(failed)} failed, {left} unresolved", flush=True)
EOF
producer=$!
for _ in $(seq 1 120); do [ -e /run/kbus-producing ] && break; sleep 0.5; done
[ -e /run/kbus-producing ] || fail "producer did not get going"
victim=$(main_pid)
restarts_before=$(systemctl show -p NRestarts --value kbus)
kill -9 "$victim" && touch /run/kbus-killed && echo "kill -9 $victim at t=${SECONDS}s"
t_kill=$(date +%s.%N)
for _ in $(seq 1 120); do
  now=$(main_pid)
  if [ "$now" != 0 ] && [ "$now" != "$victim" ] && [ "$(systemctl is-active kbus)" = active ]; then break; fi
  sleep 0.5
done
t_back=$(date +%s.%N)
now=$(main_pid)
[ "$now" != "$victim" ] && [ "$(systemctl is-active kbus)" = active ] \
  && printf 'ok: systemd restarted kbus: MainPID %s -> %s, active again %.1fs after the kill (RestartSec=5)\n' \
    "$victim" "$now" "$($PY -c "print($t_back - $t_kill)")" || fail "kbus not restarted after kill -9"
restarts=$(systemctl show -p NRestarts --value kbus)
[ "$restarts" -gt "$restarts_before" ] && ok "NRestarts $restarts_before -> $restarts" || fail "NRestarts"
# the new broker waits for the killed one's ZooKeeper session to expire before it registers (as Kafka does)
journalctl -u kbus -o cat --no-pager \
  | grep -E "Main process exited|Scheduled restart|loaded .* logs from|is held by session" | tail -4
wait $producer || fail "producer"
echo "(librdkafka logged $(grep -c 'Connection refused' /run/kbus-producer.err) refused connects while kbus was down)"
$PY - <<'EOF' || fail "acknowledged records lost"
from confluent_kafka import Consumer, TopicPartition
acked = set(open("/run/kbus-acked.txt").read().split())
c = Consumer({"bootstrap.servers": "localhost:9092", "group.id": "check", "enable.auto.commit": False})
seen, ends = [], {}
for p in range(3):
    lo, hi = c.get_watermark_offsets(TopicPartition("acked", p), timeout=10, cached=False)
    ends[p] = hi
c.assign([TopicPartition("acked", p, 0) for p in range(3)])
done = {p for p, hi in ends.items() if hi == 0}
while len(done) < 3:
    for m in c.consume(1000, timeout=2):
        assert not m.error(), m.error()
        seen.append(m.value().decode())
        if m.offset() >= ends[m.partition()] - 1:
            done.add(m.partition())
lost = acked - set(seen)
print(f"check: {len(acked)} acknowledged, {len(seen)} in the log ({len(seen) - len(set(seen))} duplicates), "
      f"{len(lost)} acknowledged but missing")
raise SystemExit(1 if lost or not acked else 0)
EOF
ok "nothing acknowledged was lost"

step "journalctl -u kbus"
journalctl -u kbus --no-pager -o short-iso | grep -E "KafkaServer|loaded .* logs|Started|Stopping|Stopped|Main process|restart" \
  | tail -20
journal=$(journalctl -u kbus -o cat --no-pager)
grep -q "\[KafkaServer id=0\] started" <<<"$journal" && grep -q "\[KafkaServer id=0\] shut down completed" <<<"$journal" \
  && ok "the broker's own log lines are in the journal ($(wc -l <<<"$journal") lines)" \
  || fail "broker log lines missing from the journal"

step "systemd-analyze security"
for u in kbus.service kbus-zookeeper.service; do
  systemd-analyze security --no-pager "$u" | tail -1
done
systemd-analyze security --no-pager kbus.service | grep -E "^\s*✗" | head -20

step "systemctl stop kbus kbus-zookeeper"
timed "systemctl stop kbus kbus-zookeeper" systemctl stop kbus kbus-zookeeper
echo "ALL CHECKS PASSED in ${SECONDS}s"
